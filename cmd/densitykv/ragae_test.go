package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/internal/torchtest"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/ragae"
	"github.com/densitykv/densitykv/ragae/aetest"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
)

// TestGenerateRAGAutoencoder runs LongLive-RAG on the tiny golden model
// with an autoencoder in the authors' format (--rag-ae) and checks the
// memory log's selections against retrieval recomputed from the run's
// own latents: every frame described by the autoencoder, the authors'
// physical pool (frames ≤ 3b−17 eligible at block b), top 6 by cosine
// to the last frame. Bad autoencoders and conflicting flags stop generate
// before the run folder is made.
func TestGenerateRAGAutoencoder(t *testing.T) {
	g := golden.Wan(t)
	dir := t.TempDir()
	text := tinyText(t, dir)
	cfg := aetest.Config{InChannels: 16, SpatialH: 60, SpatialW: 104, LatentDim: 24, HiddenDims: []int{8, 16}}
	aePath := filepath.Join(dir, "ae_latent_mem.pt")
	if err := aetest.Write(aePath, cfg, 11); err != nil {
		t.Fatal(err)
	}
	blocks := 10
	base := func(name string, extra ...string) []string {
		return append([]string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"), "--text", text,
			"--latent-height", "6", "--latent-width", "8", "--blocks", "10", "--out", dir, "--name", name, "--quiet", "--preview=false",
			"--trace-step", "-1", "--policy", "longlive-rag"}, extra...)
	}
	if code, _, errs := run(t, context.Background(), base("ae", "--rag-ae", aePath)...); code != 0 {
		t.Fatalf("generate --rag-ae: exit %d: %s", code, errs)
	}
	run1 := filepath.Join(dir, "ae")
	var gc config.GenerateConfig
	if err := runfolder.LoadConfig(run1, &gc); err != nil {
		t.Fatal(err)
	}
	r := gc.Memory.LongLiveRAG
	if r.Descriptor != memory.RAGAE || r.Pool != memory.RAGPoolPhysical || r.DescriptorStorageDim != 24 || gc.Generate.RAGAE != aePath || r.TopK != 6 {
		t.Fatalf("recorded %+v, rag_ae %q", r, gc.Generate.RAGAE)
	}
	// Descriptors of every frame from the saved latents.
	ae, err := ragae.Load(aePath)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ae.ForLatent(16, 6, 8)
	if err != nil {
		t.Fatal(err)
	}
	man, err := rollout.ReadManifest(run1)
	if err != nil {
		t.Fatal(err)
	}
	var desc [][]float32
	for b := 0; b < blocks; b++ {
		lat, err := rollout.ReadBlock(run1, man, b)
		if err != nil {
			t.Fatal(err)
		}
		n := len(lat) / 3
		for f := 0; f < 3; f++ {
			v, err := d.Encode(lat[f*n : (f+1)*n])
			if err != nil {
				t.Fatal(err)
			}
			desc = append(desc, v)
		}
	}
	cos := func(a, b []float32) float64 {
		var ab, aa, bb float64
		for i := range a {
			ab += float64(a[i]) * float64(b[i])
			aa += float64(a[i]) * float64(a[i])
			bb += float64(b[i]) * float64(b[i])
		}
		return ab / math.Sqrt(aa*bb)
	}
	seen := 0
	for _, ln := range readLog(t, filepath.Join(run1, runfolder.FileLog)) {
		b := ln.Block
		var el []int
		for f := 1; f <= 3*b-17; f++ {
			el = append(el, f)
		}
		var q []float32
		if b > 0 {
			q = desc[3*b-1]
		}
		sort.SliceStable(el, func(i, j int) bool {
			ci, cj := cos(q, desc[el[i]]), cos(q, desc[el[j]])
			if ci != cj {
				return ci > cj
			}
			return el[i] > el[j]
		})
		want := slices.Clone(el[:min(6, len(el))])
		sort.Ints(want)
		if !slices.Equal(ln.SelectedGlobalFrames, want) && len(want)+len(ln.SelectedGlobalFrames) > 0 {
			t.Fatalf("block %d layer %d: selected %v, want %v (autoencoder descriptors, physical pool)", b, ln.Layer, ln.SelectedGlobalFrames, want)
		}
		for i, f := range want {
			if s := ln.SelectedSimilarities[i]; math.Abs(s-cos(q, desc[f])) > 1e-6 {
				t.Fatalf("block %d: similarity of frame %d %v, want %v", b, f, s, cos(q, desc[f]))
			}
		}
		if ln.NumEvicted == nil || *ln.NumEvicted != max(0, 3*b-12) {
			t.Fatalf("block %d: num_evicted %v, want %d (frames 1…3b−12)", b, ln.NumEvicted, max(0, 3*b-12))
		}
		if ln.Tokens.Memory != len(want)*12 {
			t.Fatalf("block %d: %d memory tokens attended, want %d", b, ln.Tokens.Memory, len(want)*12)
		}
		seen += len(want)
	}
	if seen < 2*(1+4+6+6) { // blocks 6–9, two layers
		t.Fatalf("only %d selections checked", seen)
	}

	// Failures before the run folder exists: a bad autoencoder names the
	// file and tensor; the descriptor flags must agree with --rag-ae.
	missing := writeFile(t, filepath.Join(dir, "missing.pt"), aetest.File(cfg, slices.DeleteFunc(aetest.StateDict(cfg, 1),
		func(kv torchtest.KV) bool { return kv.Key == "encoder.conv_stack.7.block.5.bias" })))
	wrongC := cfg
	wrongC.InChannels = 4
	channels := filepath.Join(dir, "channels.pt")
	if err := aetest.Write(channels, wrongC, 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"missing", []string{"--rag-ae", missing}, []string{"--rag-ae", missing, "tensor encoder.conv_stack.7.block.5.bias missing"}},
		{"channels", []string{"--rag-ae", channels}, []string{channels, "reads 4 latent channels", "have 16"}},
		{"absent", []string{"--rag-ae", filepath.Join(dir, "none.pt")}, []string{"none.pt"}},
		{"key-mean", []string{"--rag-ae", aePath, "--rag-descriptor", "key-mean"}, []string{"--rag-descriptor key-mean"}},
		{"no file", []string{"--rag-descriptor", "ae"}, []string{"--rag-ae FILE"}},
		{"pool", []string{"--rag-pool", "disk"}, []string{"--rag-pool", "physical", "window"}},
	} {
		code, _, errs := run(t, context.Background(), base("bad", c.extra...)...)
		for _, w := range c.want {
			if code != exitUsage || !strings.Contains(errs, w) {
				t.Errorf("%s: exit %d, stderr %q, want %q", c.name, code, errs, w)
			}
		}
		if exists(filepath.Join(dir, "bad")) {
			t.Fatalf("%s: the failed generate left a run folder", c.name)
		}
	}
	// simulate has no model latents for the autoencoder.
	if code, _, errs := run(t, context.Background(), tiny(dir, "sim", "--policy", "longlive-rag", "--rag-descriptor", "ae")...); code != exitUsage || !strings.Contains(errs, "generate --rag-ae") {
		t.Errorf("simulate --rag-descriptor ae: exit %d: %s", code, errs)
	}
}

// writeFile writes b to path and returns path.
func writeFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// --resume refuses a LongLive-RAG run whose autoencoder file changed since
// the checkpoint (its descriptors would no longer be those of the run),
// and continues with the same file.
func TestGenerateRAGAEResumeChecksFile(t *testing.T) {
	dir := t.TempDir()
	text := tinyText(t, dir)
	cfg := aetest.Config{InChannels: 16, SpatialH: 60, SpatialW: 104, LatentDim: 8, HiddenDims: []int{8}}
	aePath := filepath.Join(dir, "ae.pt")
	if err := aetest.Write(aePath, cfg, 1); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(aePath)
	stopAfterBlocks(t, 2, genResumeArgs(t, dir, "r", text, 4, "--policy", "longlive-rag", "--rag-ae", aePath, "--preview=false"))
	if err := aetest.Write(aePath, cfg, 2); err != nil { // same shapes, other weights
		t.Fatal(err)
	}
	code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "r", "--resume")
	if code == 0 || !strings.Contains(errs, "rag-ae "+aePath) || !strings.Contains(errs, "changed since the checkpoint") {
		t.Fatalf("resume with a changed autoencoder: exit %d: %s", code, errs)
	}
	writeFile(t, aePath, orig)
	if code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "r", "--resume", "--quiet"); code != 0 {
		t.Fatalf("resume with the same autoencoder: exit %d: %s", code, errs)
	}
}
