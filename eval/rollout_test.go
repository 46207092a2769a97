package eval_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/eval"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/record"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/wan"
)

// TestRecordedRolloutStream records the clean passes of a real rollout of
// the Go Wan backbone (the golden tiny weights) through record.Recorder and
// evaluates policies on the replayed stream.
func TestRecordedRolloutStream(t *testing.T) {
	dir := golden.Wan(t)
	m, err := wan.Load(filepath.Join(dir, "weights_generator.pt"), wan.TinyConfig(), wan.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := checkpoint.OpenSafetensors(filepath.Join(dir, "rollout_native.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, _, err := g.Float32("context")
	if err != nil {
		t.Fatal(err)
	}
	txt, err := m.EmbedText(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	const blocks, height, width = 6, 6, 8
	lay := m.Cfg.Layout(height, width, 3)
	pol, err := memory.New(memory.NameNative, memory.Config{Layout: lay})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := record.NewWriter(&buf, record.Header{Layout: lay, Blocks: blocks, Source: "tiny Wan rollout"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.NewRecorder(pol, w)
	if err != nil {
		t.Fatal(err)
	}
	err = rollout.Run(m, rec, rollout.Options{Blocks: blocks, Height: height, Width: width, Schedule: rollout.DefaultSchedule(),
		Noise: rollout.Seeded{Seed: 5, StepsPerBlock: 3}, Prompts: []rollout.Prompt{{Text: txt}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := record.NewFileReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r.Layout() != lay || r.Blocks() != blocks {
		t.Fatalf("recorded layout %+v, %d blocks", r.Layout(), r.Blocks())
	}
	base := memory.Config{Layout: lay, LongLiveRAG: memory.LongLiveRAGConfig{Descriptor: memory.RAGKeyMean}}
	vs, err := eval.Suite(eval.SuiteConfig{Base: base, Groups: []string{eval.GroupBaselines}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := eval.Run(r, vs, eval.Options{Base: base, Queries: 16, CoverageSample: 64})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Variants) != 7 || len(res.Skipped) != 0 {
		t.Fatalf("%d variants, skipped %v", len(res.Variants), res.Skipped)
	}
	for v, u := range res.Unmatched {
		if u != 0 {
			t.Errorf("%s: %d context rows match no recorded token", res.Variants[v].Label, u)
		}
	}
	t.Logf("value-row hash collisions: %d", res.Collisions)
	z := len(res.Horizons) - 1
	for v, vr := range res.Variants {
		e := res.Mean(v, z, func(m eval.Metrics) float64 { return m.RelErr })
		if !(e >= 0 && e < 10) {
			t.Errorf("%s: relative error %v", vr.Label, e)
		}
	}
}
