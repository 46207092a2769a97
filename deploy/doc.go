// Package deploy holds no code: its folder ships the container build
// (Dockerfile), a Kubernetes Indexed Job (kubernetes/densitykv-job.yaml)
// and a Slurm array script (slurm/densitykv-array.sh) that run one prompt
// list's shards (densitykv generate --prompts … --shard env), and its tests
// check their wiring: the Job decoded into the Kubernetes API types, the
// script's syntax and command line, the Dockerfile's stages.
//
// The folder is a module of its own (deploy/go.mod), so that the test-only
// k8s.io/api and its requirements stay out of the main module's go.mod:
// run its tests with (cd deploy && go test ./...), as scripts/test.sh does.
package deploy
