package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/densitykv/densitykv/golden"
)

// refinedList writes a 128-line prompt list.
func refinedList(t *testing.T, dir string) string {
	var sb strings.Builder
	for i := 0; i < 128; i++ {
		fmt.Fprintf(&sb, "refined prompt %d\n", i)
	}
	p := filepath.Join(dir, "moviegen_refined_128.txt")
	if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// dryRunIndices are the prompt indices a dry run's output lists.
func dryRunIndices(out string) []int {
	var idx []int
	for _, ln := range strings.Split(out, "\n") {
		var i int
		if _, err := fmt.Sscanf(ln, "%d  to generate", &i); err == nil {
			idx = append(idx, i)
		}
	}
	return idx
}

// TestSlurmScriptDryRun: the Slurm array script, run as task 5 of an
// array --array=1-8 (SLURM_ARRAY_TASK_ID=6, MIN=1, COUNT=8) with the tiny
// golden files in place of the models and --dry-run, runs densitykv (this
// test binary) on shard 5/8 of the paper's main list: prompts 5, 13, …, 125.
func TestSlurmScriptDryRun(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("bash", "deploy/slurm/densitykv-array.sh", "--dry-run")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), envTestMain+"=1", "DENSITYKV="+os.Args[0],
		"SLURM_ARRAY_TASK_ID=6", "SLURM_ARRAY_TASK_MIN=1", "SLURM_ARRAY_TASK_COUNT=8",
		"PROMPTS="+refinedList(t, dir), "OUT="+dir,
		"CHECKPOINT="+filepath.Join(golden.Wan(t), "weights.safetensors"),
		"TEXT_ENCODER="+filepath.Join(golden.T5(t), "weights.pth"), "TOKENIZER="+filepath.Join(golden.T5(t), "spiece.model"),
		"VAE="+filepath.Join(golden.PipelineVAE(t), "weights.pth"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	idx := dryRunIndices(string(out))
	if len(idx) != 16 || idx[0] != 5 || idx[15] != 125 || !strings.Contains(string(out), "dry run: shard 5/8 of list") {
		t.Fatalf("task 6 of --array=1-8 took %v\n%s", idx, out)
	}
}

// TestKubernetesJobDryRun: the Indexed Job's container arguments, with its
// mount points mapped onto a temporary folder, the repository and the tiny
// golden files, run for every completion index with the Job's environment
// (JOB_COMPLETION_INDEX, DENSITYKV_SHARDS) as dry runs: the pods' shards
// partition the 128 prompts.
func TestKubernetesJobDryRun(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/densitykv-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		Spec struct {
			Completions int
			Template    struct {
				Spec struct {
					Containers []struct {
						Args []string
						Env  []struct{ Name, Value string }
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &job); err != nil {
		t.Fatal(err)
	}
	c := job.Spec.Template.Spec.Containers[0]
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "prompts"), 0o755)
	refinedList(t, filepath.Join(dir, "prompts"))
	repo, _ := filepath.Abs("../..")
	golden := map[string]string{
		"--checkpoint":   filepath.Join(golden.Wan(t), "weights.safetensors"),
		"--text-encoder": filepath.Join(golden.T5(t), "weights.pth"),
		"--tokenizer":    filepath.Join(golden.T5(t), "spiece.model"),
		"--vae":          filepath.Join(golden.PipelineVAE(t), "weights.pth"),
	}
	args := append([]string(nil), c.Args...)
	for i := 1; i < len(args); i++ {
		switch {
		case golden[args[i-1]] != "":
			args[i] = golden[args[i-1]]
		case strings.HasPrefix(args[i], "/data/"):
			args[i] = filepath.Join(dir, strings.TrimPrefix(args[i], "/data/"))
		case strings.HasPrefix(args[i], "/opt/densitykv/"):
			args[i] = filepath.Join(repo, strings.TrimPrefix(args[i], "/opt/densitykv/"))
		}
	}
	for _, e := range c.Env {
		if e.Value != "" {
			t.Setenv(e.Name, e.Value)
		}
	}
	seen := map[int]bool{}
	for k := 0; k < job.Spec.Completions; k++ {
		t.Setenv("JOB_COMPLETION_INDEX", fmt.Sprint(k))
		code, out, errs := run(t, context.Background(), append(args, "--dry-run")...)
		if code != 0 {
			t.Fatalf("index %d: exit %d: %s", k, code, errs)
		}
		for _, i := range dryRunIndices(out) {
			if seen[i] {
				t.Fatalf("prompt %d in two pods' shards", i)
			}
			seen[i] = true
		}
	}
	if len(seen) != 128 {
		t.Fatalf("the pods take %d of the 128 prompts", len(seen))
	}
}
