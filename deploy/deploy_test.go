package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// readJob decodes the manifest into the Kubernetes API's Job, refusing any
// field the API does not have (as the API server's strict decoding does).
func readJob(t *testing.T) *batchv1.Job {
	t.Helper()
	b, err := os.ReadFile("kubernetes/densitykv-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var job batchv1.Job
	if err := dec.Decode(&job); err != nil {
		t.Fatalf("the manifest is not a batch/v1 Job: %v", err)
	}
	return &job
}

// argValue is the value after flag in args.
func argValue(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

// TestKubernetesIndexedJob: the manifest is an Indexed Job whose pods
// each run one shard of the list: completions = parallelism = the shard
// count DENSITYKV_SHARDS, --shard env, JOB_COMPLETION_INDEX from the
// completion-index annotation, pods not restarted in place (a retry is a
// new pod that resumes), and every path the command reads or writes lies
// on a mounted volume: the prompts and the run folder on the shared data
// claim (written), the models on a read-only one.
func TestKubernetesIndexedJob(t *testing.T) {
	job := readJob(t)
	if job.APIVersion != "batch/v1" || job.Kind != "Job" {
		t.Fatalf("%s %s", job.APIVersion, job.Kind)
	}
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("completionMode %v, want Indexed", s.CompletionMode)
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Parallelism > *s.Completions || *s.Completions < 1 {
		t.Fatalf("completions %v, parallelism %v", s.Completions, s.Parallelism)
	}
	if s.BackoffLimitPerIndex == nil || s.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("backoffLimitPerIndex %v with restartPolicy %s (per-index retries need Never)", s.BackoffLimitPerIndex, s.Template.Spec.RestartPolicy)
	}
	if len(s.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(s.Template.Spec.Containers))
	}
	c := s.Template.Spec.Containers[0]
	if c.Args[0] != "generate" || argValue(c.Args, "--shard") != "env" || argValue(c.Args, "--prompts") == "" || argValue(c.Args, "--config") == "" {
		t.Fatalf("args %v: want generate --prompts … --shard env", c.Args)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	n, err := strconv.Atoi(env["DENSITYKV_SHARDS"].Value)
	if err != nil || int32(n) != *s.Completions {
		t.Fatalf("DENSITYKV_SHARDS %q, completions %d: the shard count must equal completions", env["DENSITYKV_SHARDS"].Value, *s.Completions)
	}
	idx := env["JOB_COMPLETION_INDEX"].ValueFrom
	if idx == nil || idx.FieldRef == nil || idx.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
		t.Fatalf("JOB_COMPLETION_INDEX %+v, want the completion-index annotation", env["JOB_COMPLETION_INDEX"])
	}
	if c.Resources.Requests.Memory().Value() < 16<<30 || c.Resources.Limits.Memory().Cmp(*c.Resources.Requests.Memory()) < 0 {
		t.Fatalf("memory request %v, limit %v", c.Resources.Requests.Memory(), c.Resources.Limits.Memory())
	}
	vols := map[string]corev1.Volume{}
	for _, v := range s.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	mountOf := func(p string) *corev1.VolumeMount {
		var best *corev1.VolumeMount
		for k := range c.VolumeMounts {
			m := &c.VolumeMounts[k]
			if strings.HasPrefix(path.Clean(p)+"/", path.Clean(m.MountPath)+"/") && (best == nil || len(m.MountPath) > len(best.MountPath)) {
				best = m
			}
		}
		return best
	}
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok || v.PersistentVolumeClaim == nil {
			t.Fatalf("mount %s: no persistentVolumeClaim volume %q", m.MountPath, m.Name)
		}
	}
	for _, f := range []struct {
		flag   string
		writes bool
	}{{"--out", true}, {"--prompts", false}, {"--checkpoint", false}, {"--text-encoder", false}, {"--tokenizer", false}, {"--vae", false}} {
		p := argValue(c.Args, f.flag)
		m := mountOf(p)
		if m == nil {
			t.Fatalf("%s %s is on no mounted volume", f.flag, p)
		}
		if f.writes && (m.ReadOnly || vols[m.Name].PersistentVolumeClaim.ReadOnly) {
			t.Fatalf("%s %s is on the read-only volume %s", f.flag, p, m.Name)
		}
	}
	if out, prompts := mountOf(argValue(c.Args, "--out")), mountOf(argValue(c.Args, "--prompts")); out.Name != prompts.Name {
		t.Fatalf("the run folder (%s) and the prompts (%s) should share the data volume", out.Name, prompts.Name)
	}
	if !strings.HasPrefix(argValue(c.Args, "--config"), "/opt/densitykv/configs/paper/") {
		t.Fatalf("--config %s: want one of the image's paper configurations", argValue(c.Args, "--config"))
	}
	if _, err := os.Stat("../" + strings.TrimPrefix(argValue(c.Args, "--config"), "/opt/densitykv/")); err != nil {
		t.Fatalf("the Job's configuration is not in the repository: %v", err)
	}
}

// TestSlurmScript: the array script parses (bash -n), refuses to run
// outside an array task, and builds the shard's command line from its
// environment (the sharded run itself is tested in cmd/densitykv with a
// fake SLURM_ARRAY_TASK_ID, TestSlurmScriptDryRun).
func TestSlurmScript(t *testing.T) {
	if out, err := exec.Command("bash", "-n", "slurm/densitykv-array.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v: %s", err, out)
	}
	cmd := exec.Command("bash", "slurm/densitykv-array.sh")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "SLURM_ARRAY_TASK_ID is not set") {
		t.Fatalf("outside an array: %v %s", err, out)
	}
	cmd = exec.Command("bash", "slurm/densitykv-array.sh", "--dry-run")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SLURM_ARRAY_TASK_ID=3", "DENSITYKV_ECHO=1", "LORA=l.pt", "MODELS=/m"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := "densitykv generate --config configs/paper/main/self-forcing/densitykv.yaml --prompts prompts/moviegen_refined_128.txt --checkpoint /m/self_forcing.pt --text-encoder /m/Wan2.1-T2V-1.3B/models_t5_umt5-xxl-enc-bf16.pth --tokenizer /m/Wan2.1-T2V-1.3B/google/umt5-xxl --vae /m/Wan2.1-T2V-1.3B/Wan2.1_VAE.pth --out runs --shard env --quiet --lora l.pt --dry-run \n"
	if string(out) != want {
		t.Fatalf("command line\n%q\nwant\n%q", out, want)
	}
	b, _ := os.ReadFile("slurm/densitykv-array.sh")
	if !strings.Contains(string(b), "#SBATCH --array=") || !strings.Contains(string(b), "#SBATCH --requeue") {
		t.Fatal("the script lacks its #SBATCH array and requeue lines")
	}
}

// TestDockerfile: the image is built in two stages, a static Go binary
// (CGO_ENABLED=0) copied onto Debian with ffmpeg, with the paper
// configurations where the Job reads them.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"FROM golang:1.26", "AS build", "CGO_ENABLED=0 go build", "./cmd/densitykv", "FROM debian:", "apt-get install -y --no-install-recommends ffmpeg",
		"COPY --from=build /out/densitykv /usr/local/bin/densitykv", "COPY configs /opt/densitykv/configs", `ENTRYPOINT ["densitykv"]`} {
		if !strings.Contains(s, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	gomod, _ := os.ReadFile("../go.mod")
	if !strings.Contains(string(gomod), "\ngo 1.26") {
		t.Error("go.mod's Go version differs from the build image's golang:1.26")
	}
}
