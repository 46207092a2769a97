// Package golden is the tests' access to the shared reference data
// (../shared/golden beside the checkout, or the folders the DENSITYKV_GOLDEN*
// variables name), in three parts:
//
// Folders (dir.go): Find, MustFind and one function per folder (DensityKV,
// Wan, T5, VAE, PipelineVAE) locate the data and fail a test (never skip)
// when it is missing.
//
// Files (file.go): Open reads the Wan golden files for the wan and rollout
// tests: the tensors of a safetensors file, its JSON sidecar, and the
// coverage marks below. A missing file or tensor fails the test.
//
// Coverage (cov.go): the tests account for everything in the Wan golden
// folder (../shared/golden/wan): every tensor of every file and every
// sidecar field that carries data.
//
// Tests call Mark for the items they compared (or fed in as inputs whose
// effect they compared). Each package that owns part of the folder (Owner:
// OwnerWan, OwnerRollout) runs Main from its TestMain: after a complete,
// passing run of the package's tests, Main fails the run and lists every
// item the package owns that no test marked. This package's own tests fail
// on any item that no ownership rule covers, so a new tensor or sidecar
// field cannot go unnoticed either.
//
// Items are tensor names for .safetensors files, "<entry>:<name>" (the
// normalised key, see checkpoint.NormalizeKey) for each tensor entry of a
// PyTorch .pt file, and "json:<path>" for the leaves of a .json sidecar:
// object keys joined by ".", arrays of objects as "<key>[]" (so
// "json:layer0_memory_log[].accepted_entries" is that field of every log
// entry), and any other value as one leaf.
package golden

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Env variables that override the default folders.
const (
	EnvDensityKV = "DENSITYKV_GOLDEN"     // bank update sequences
	EnvWan       = "DENSITYKV_GOLDEN_WAN" // tiny Wan model, forwards, rollouts
	EnvT5        = "DENSITYKV_GOLDEN_T5"  // tokenizer models and cases, tiny umT5 encoder
	EnvVAE       = "DENSITYKV_GOLDEN_VAE" // tiny Wan VAE, whole and streaming decodes
	// EnvPipeline overrides the folder pipeline/vae: the tiny VAE with 16
	// latent channels that chains after the tiny Wan DiT.
	EnvPipeline = "DENSITYKV_GOLDEN_PIPELINE"
)

// RepoRoot walks up from the working directory to the folder holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("golden: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Find returns the golden folder named sub ("densitykv", "wan", "vae", …): the value
// of env when set, else <repo>/../shared/golden/<sub>. It returns an error if
// the folder is missing or holds no files.
func Find(env, sub string) (string, error) {
	dir := os.Getenv(env)
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "..", "shared", "golden", sub)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("golden: reference data %s missing (set %s): %w", dir, env, err)
	}
	if len(ents) == 0 {
		return "", fmt.Errorf("golden: reference folder %s is empty (set %s)", dir, env)
	}
	return dir, nil
}

// TB is the subset of testing.TB used here.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// MustFind is Find for tests: it fails the test (never skips) when the data is missing.
func MustFind(t TB, env, sub string) string {
	t.Helper()
	dir, err := Find(env, sub)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return dir
}

// DensityKV returns the bank golden folder or fails the test.
func DensityKV(t TB) string { t.Helper(); return MustFind(t, EnvDensityKV, "densitykv") }

// Wan returns the Wan golden folder or fails the test.
func Wan(t TB) string { t.Helper(); return MustFind(t, EnvWan, "wan") }

// T5 returns the text-encoder golden folder (tokenizer and umT5) or fails the test.
func T5(t TB) string { t.Helper(); return MustFind(t, EnvT5, "t5") }

// VAE returns the Wan VAE golden folder or fails the test.
func VAE(t TB) string { t.Helper(); return MustFind(t, EnvVAE, "vae") }

// PipelineVAE returns the pipeline VAE golden folder (pipeline/vae) or
// fails the test.
func PipelineVAE(t TB) string {
	t.Helper()
	return MustFind(t, EnvPipeline, filepath.Join("pipeline", "vae"))
}
