package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/synth"
)

func testStream(t *testing.T, blocks int) *synth.Generator {
	t.Helper()
	c := synth.DefaultConfig()
	c.Layout = memory.Layout{Height: 4, Width: 6, FramesPerBlock: 2, Layers: 2, Heads: 2, HeadDim: 16}
	c.Blocks = blocks
	g, err := synth.NewGenerator(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func newPolicy(t *testing.T, name string, l memory.Layout) memory.Policy {
	t.Helper()
	cfg := memory.Config{Layout: l, CacheFrames: 6, WindowFrames: 4, LongLiveRAG: memory.LongLiveRAGConfig{LatentChannels: 16}}
	p, err := memory.New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// failing wraps a policy and fails Attend at a given block.
type failing struct {
	memory.Policy
	block, cur int
}

func (f *failing) Begin(c memory.Call) error { f.cur = c.Block; return f.Policy.Begin(c) }
func (f *failing) Attend(layer int, q, k, v []float32) (memory.Context, error) {
	if f.cur == f.block {
		return memory.Context{}, errors.New("boom")
	}
	return f.Policy.Attend(layer, q, k, v)
}

// scribbler overwrites its inputs; other policies must not notice.
type scribbler struct{ memory.Policy }

func (s scribbler) Attend(layer int, q, k, v []float32) (memory.Context, error) {
	c, err := s.Policy.Attend(layer, q, k, v)
	for i := range k {
		q[i], k[i], v[i] = 7, 7, 7
	}
	return c, err
}

type trace struct {
	layers []LayerRecord
	blocks []BlockRecord
	sums   []float64 // Σ of every context's K per (policy, block, layer)
}

func run(t *testing.T, names []string, blocks int, opt Options) (Summary, trace) {
	t.Helper()
	g := testStream(t, blocks)
	var ps []memory.Policy
	for _, n := range names {
		ps = append(ps, newPolicy(t, n, g.Layout()))
	}
	var tr trace
	s, err := Run(g, ps, tr.record(t, opt, len(ps)))
	if err != nil {
		t.Fatal(err)
	}
	return s, tr
}

// record returns opt with callbacks that record a run of n policies into
// tr (without wall times).
func (tr *trace) record(t *testing.T, opt Options, n int) Options {
	opt.OnLayer = func(r LayerRecord) error { r.AttendSeconds = 0; tr.layers = append(tr.layers, r); return nil }
	opt.OnBlock = func(r BlockRecord) error {
		r.Seconds, r.UpdateSeconds = 0, 0
		tr.blocks = append(tr.blocks, r)
		return nil
	}
	opt.ObserveLayer = func(v LayerView) error {
		if len(v.Contexts) != n {
			t.Fatalf("observer got %d contexts, want %d", len(v.Contexts), n)
		}
		for _, c := range v.Contexts {
			var s float64
			for _, x := range c.K {
				s += float64(x)
			}
			tr.sums = append(tr.sums, s)
		}
		return nil
	}
	return opt
}

func TestRunDeterministic(t *testing.T) {
	names := []string{memory.NameNative, memory.NameInfinityRoPE}
	s1, t1 := run(t, names, 6, Options{})
	s2, t2 := run(t, names, 6, Options{})
	if !reflect.DeepEqual(t1, t2) {
		t.Fatal("two runs of the same stream and policies differ")
	}
	for i := range s1.Policies {
		s1.Policies[i].Seconds, s1.Policies[i].UpdateSeconds = 0, 0
		s2.Policies[i].Seconds, s2.Policies[i].UpdateSeconds = 0, 0
	}
	if !reflect.DeepEqual(s1, s2) {
		t.Fatalf("summaries differ: %+v vs %+v", s1, s2)
	}
	if s1.Blocks != 6 || len(t1.layers) != 6*2*2 || len(t1.blocks) != 6*2 {
		t.Fatalf("got %d blocks, %d layer records, %d block records", s1.Blocks, len(t1.layers), len(t1.blocks))
	}
}

func TestRunNativeWindow(t *testing.T) {
	// 24 tokens per frame, 2 frames per block, cache of 6 frames with one
	// sink frame: block b attends min(2b+2, 6) frames.
	_, tr := run(t, []string{memory.NameNative}, 5, Options{})
	for _, r := range tr.layers {
		want := min(2*r.Block+2, 6) * 24
		if r.Parts.Total() != want || r.Parts.Sink != 24 {
			t.Errorf("block %d layer %d: parts %+v, want total %d with a 24-token sink", r.Block, r.Layer, r.Parts, want)
		}
	}
	for _, r := range tr.blocks {
		if r.Bytes <= 0 {
			t.Errorf("block %d: bytes %d", r.Block, r.Bytes)
		}
	}
}

func TestRunStepsAndMaxBlocks(t *testing.T) {
	var prog [][2]int
	s, tr := run(t, []string{memory.NameNative}, 6, Options{Steps: 2, MaxBlocks: 3, Progress: func(d, n int) { prog = append(prog, [2]int{d, n}) }})
	if s.Blocks != 3 || len(tr.blocks) != 3 {
		t.Fatalf("ran %d blocks, want 3", s.Blocks)
	}
	if !reflect.DeepEqual(prog, [][2]int{{1, 3}, {2, 3}, {3, 3}}) {
		t.Fatalf("progress %v", prog)
	}
	// Denoising calls are read-only: parts equal the single-call run.
	_, one := run(t, []string{memory.NameNative}, 3, Options{})
	for i := range one.layers {
		if one.layers[i].Parts != tr.layers[i].Parts {
			t.Fatalf("record %d: parts %+v with steps, %+v without", i, tr.layers[i].Parts, one.layers[i].Parts)
		}
	}
}

func TestRunIsolatesPolicies(t *testing.T) {
	g := testStream(t, 4)
	l := g.Layout()
	ps := []memory.Policy{scribbler{newPolicy(t, memory.NameNative, l)}, newPolicy(t, memory.NameNative, l)}
	var last []float32
	_, err := Run(g, ps, Options{ObserveLayer: func(v LayerView) error {
		last = append(last[:0], v.Contexts[1].K...)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, ref := run(t, []string{memory.NameNative}, 4, Options{})
	var s float64
	for _, x := range last {
		s += float64(x)
	}
	if want := ref.sums[len(ref.sums)-1]; s != want {
		t.Fatalf("second policy's context changed by the first policy's writes: %v vs %v", s, want)
	}
}

func TestRunErrors(t *testing.T) {
	g := testStream(t, 5)
	l := g.Layout()
	_, err := Run(g, []memory.Policy{&failing{Policy: newPolicy(t, memory.NameNative, l), block: 2}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "sim: block 2") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("error %v, want a sim error naming block 2", err)
	}
	other := l
	other.Heads = 3
	for name, tc := range map[string]struct {
		ps  []memory.Policy
		opt Options
	}{
		"none":   {nil, Options{}},
		"nil":    {[]memory.Policy{nil}, Options{}},
		"layout": {[]memory.Policy{newPolicy(t, memory.NameNative, other)}, Options{}},
		"steps":  {[]memory.Policy{newPolicy(t, memory.NameNative, l)}, Options{Steps: -1}},
	} {
		if _, err := Run(testStream(t, 2), tc.ps, tc.opt); err == nil || !strings.HasPrefix(err.Error(), "sim: ") {
			t.Errorf("%s: error %v, want a sim error", name, err)
		}
	}
	stop := errors.New("stop")
	_, err = Run(testStream(t, 3), []memory.Policy{newPolicy(t, memory.NameNative, l)}, Options{OnBlock: func(BlockRecord) error { return stop }})
	if !errors.Is(err, stop) {
		t.Fatalf("callback error %v not wrapped", err)
	}
}

// A run stopped through its context between blocks continues, from a
// snapshot of the policies and FirstBlock, exactly as the uninterrupted
// run: the same records, block indices counting on; EndBlock sees every
// block once, after its records.
func TestRunStopAndContinue(t *testing.T) {
	names := []string{memory.NameDensityKV, memory.NameFIFO}
	full, whole := run(t, names, 6, Options{})
	l := testStream(t, 6).Layout()
	pols := func() []memory.Policy {
		var ps []memory.Policy
		for _, n := range names {
			ps = append(ps, newPolicy(t, n, l))
		}
		return ps
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tr trace
	var ended []int
	g := testStream(t, 6)
	a := pols()
	opt := tr.record(t, Options{Context: ctx}, len(names))
	opt.EndBlock = func(b int) error {
		ended = append(ended, b)
		if len(tr.blocks) != (b+1)*len(names) {
			return fmt.Errorf("block %d ended with %d block records", b, len(tr.blocks))
		}
		if b == 2 {
			cancel()
		}
		return nil
	}
	s, err := Run(g, a, opt)
	if !errors.Is(err, context.Canceled) || s.Blocks != 3 || !reflect.DeepEqual(ended, []int{0, 1, 2}) {
		t.Fatalf("stopped run: %d blocks, ended %v, error %v", s.Blocks, ended, err)
	}
	b := pols()
	for i := range a {
		var buf bytes.Buffer
		if err := a[i].(memory.Snapshotter).Save(&buf); err != nil {
			t.Fatal(err)
		}
		if err := b[i].(memory.Snapshotter).Load(&buf); err != nil {
			t.Fatal(err)
		}
	}
	opt = tr.record(t, Options{FirstBlock: 3}, len(names))
	opt.EndBlock = func(b int) error { ended = append(ended, b); return nil }
	if s, err := Run(g, b, opt); err != nil || s.Blocks != 3 {
		t.Fatalf("continued run: %d blocks, %v", s.Blocks, err)
	}
	if !reflect.DeepEqual(ended, []int{0, 1, 2, 3, 4, 5}) || full.Blocks != 6 {
		t.Fatalf("ended %v", ended)
	}
	if !reflect.DeepEqual(tr.layers, whole.layers) || !reflect.DeepEqual(tr.blocks, whole.blocks) || !reflect.DeepEqual(tr.sums, whole.sums) {
		t.Fatal("the stopped and continued run differs from the uninterrupted one")
	}
	if _, err := Run(testStream(t, 2), pols(), Options{FirstBlock: -1}); err == nil {
		t.Fatal("negative first block accepted")
	}
}
