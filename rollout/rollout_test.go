package rollout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/wan"
)

func TestScheduleErrorsAndShapes(t *testing.T) {
	for _, c := range []struct {
		steps []int
		shift float64
		n     int
	}{{nil, 5, 1000}, {[]int{1000, 1000}, 5, 1000}, {[]int{1001}, 5, 1000}, {[]int{500}, 0, 1000}, {[]int{-1}, 5, 1000}} {
		if _, err := NewSchedule(c.steps, c.shift, c.n); err == nil {
			t.Errorf("NewSchedule(%v, %v, %d) accepted", c.steps, c.shift, c.n)
		}
	}
	s, err := NewSchedule([]int{1000, 500}, 1, 1000) // no shift: t = σ·1000
	if err != nil || s.Timesteps[1] != 500 || s.Sigmas[1] != 0.5 {
		t.Fatalf("unshifted schedule %+v %v", s, err)
	}
	// σ(t) is monotone in t and Sigma picks the nearest entry.
	d := DefaultSchedule()
	prev := float32(-1)
	for tt := float32(0); tt <= 1000; tt += 37 {
		if sg := d.Sigma(tt); sg < prev {
			t.Fatalf("Sigma not monotone at %v", tt)
		} else {
			prev = sg
		}
	}
}

func TestNoiseSources(t *testing.T) {
	s := Seeded{Seed: 7, StepsPerBlock: 3}
	a, b, c := make([]float32, 100), make([]float32, 100), make([]float32, 100)
	s.Initial(3, a)
	s.Initial(3, b)
	s.Initial(4, c)
	if !bytes.Equal(f32b(a), f32b(b)) || bytes.Equal(f32b(a), f32b(c)) {
		t.Fatal("seeded initial noise not deterministic per frame or not distinct across frames")
	}
	s.Renoise(1, 0, c)
	if bytes.Equal(f32b(a), f32b(c)) {
		t.Fatal("renoise draw equals an initial draw")
	}
	var mean, sq float64
	big := make([]float32, 100000)
	Seeded{Seed: 1}.Initial(0, big)
	for _, v := range big {
		mean += float64(v)
		sq += float64(v) * float64(v)
	}
	mean /= float64(len(big))
	if vr := sq/float64(len(big)) - mean*mean; math.Abs(mean) > 0.02 || math.Abs(vr-1) > 0.03 {
		t.Fatalf("seeded noise mean %v variance %v", mean, vr)
	}
	if s.Renoise(0, 3, c) == nil || s.Initial(-1, c) == nil {
		t.Fatal("out-of-range draws accepted")
	}
	seq := &Sequence{InitialValues: make([]float32, 4), RenoiseValues: make([]float32, 12), FrameSize: 2, BlockSize: 6, PerBlock: 2}
	if seq.Initial(1, make([]float32, 2)) != nil || seq.Initial(2, make([]float32, 2)) == nil {
		t.Fatal("sequence initial bounds")
	}
	if seq.Renoise(0, 1, make([]float32, 6)) != nil || seq.Renoise(1, 0, make([]float32, 6)) == nil || seq.Renoise(0, 2, make([]float32, 6)) == nil {
		t.Fatal("sequence renoise bounds")
	}
}

func f32b(x []float32) []byte {
	var b []byte
	for _, v := range x {
		u := math.Float32bits(v)
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	return b
}

func TestWriterRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir, Manifest{Policy: "native", Channels: 2, Height: 2, Width: 2, FramesPerBlock: 1, BlocksPlanned: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBlock(1, make([]float32, 8), 0); err == nil {
		t.Fatal("out-of-order block accepted")
	}
	if err := w.WriteBlock(0, make([]float32, 7), 0); err == nil {
		t.Fatal("wrong size accepted")
	}
	for b := 0; b < 2; b++ {
		x := make([]float32, 8)
		for i := range x {
			x[i] = float32(b*10 + i)
		}
		if err := w.WriteBlock(b, x, 0.5); err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(dir)
		if err != nil || len(m.Shards) != b+1 || m.Complete != (b == 1) {
			t.Fatalf("manifest after block %d: %+v %v", b, m, err)
		}
	}
	m, _ := ReadManifest(dir)
	x, err := ReadBlock(dir, m, 1)
	if err != nil || x[3] != 13 {
		t.Fatalf("block 1 = %v, %v", x, err)
	}
	if _, err := ReadBlock(dir, m, 2); err == nil {
		t.Fatal("block 2 readable")
	}
}

func tinyNative(t *testing.T, m *wan.Model) memory.Policy {
	p, err := memory.New(memory.NameNative, memory.Config{Layout: m.Cfg.Layout(6, 8, 3)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPromptScheduleSwitch checks that a prompt switch at block 2 leaves
// blocks 0–1 bit-identical to a single-prompt run and changes block 2.
func TestPromptScheduleSwitch(t *testing.T) {
	m := goldenModel(t)
	g := openGolden(t, "rollout_native.safetensors")
	ctx := g.F32("context")
	neg := append([]float32(nil), ctx...)
	for i := range neg {
		neg[i] = -neg[i]
	}
	t1, _ := m.EmbedText(ctx, 8)
	t2, _ := m.EmbedText(neg, 8)
	run := func(prompts []Prompt) [][]float32 {
		var out [][]float32
		err := Run(m, tinyNative(t, m), Options{Blocks: 3, Height: 6, Width: 8, Schedule: DefaultSchedule(), Noise: Seeded{Seed: 3, StepsPerBlock: 3},
			Prompts: prompts, BlockDone: func(b int, x []float32, _ BlockLog) error {
				out = append(out, append([]float32(nil), x...))
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a := run([]Prompt{{Text: t1}})
	b := run([]Prompt{{Text: t1}, {FromBlock: 2, Text: t2}})
	for i := 0; i < 2; i++ {
		if !bytes.Equal(f32b(a[i]), f32b(b[i])) {
			t.Fatalf("block %d changed before the prompt switch", i)
		}
	}
	if bytes.Equal(f32b(a[2]), f32b(b[2])) {
		t.Fatal("prompt switch did not change block 2")
	}
	// Option validation.
	for _, o := range []Options{
		{Blocks: 0, Height: 6, Width: 8, Schedule: DefaultSchedule(), Noise: Seeded{}, Prompts: []Prompt{{Text: t1}}},
		{Blocks: 1, Height: 6, Width: 8, Schedule: DefaultSchedule(), Noise: Seeded{}, Prompts: []Prompt{{FromBlock: 1, Text: t1}}},
		{Blocks: 1, Height: 6, Width: 8, Schedule: DefaultSchedule(), Prompts: []Prompt{{Text: t1}}},
		{Blocks: 1, Height: 8, Width: 8, Schedule: DefaultSchedule(), Noise: Seeded{}, Prompts: []Prompt{{Text: t1}}},
	} {
		if err := Run(m, tinyNative(t, m), o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

// TestGenerateEndToEnd rolls a Generator of the tiny model out with
// DensityKV into a folder of latent shards and a memory log, and checks the
// streamed outputs, the memory log, seed reproducibility and a text of the
// wrong width.
func TestGenerateEndToEnd(t *testing.T) {
	dir := t.TempDir()
	g := openGolden(t, "rollout_native.safetensors")
	textPath := filepath.Join(dir, "text.safetensors")
	if err := checkpoint.WriteSafetensorsFile(textPath, []checkpoint.WriteTensor{{Name: "context", Shape: []int{1, 5, 32}, Data: g.F32("context")[:5*32]}}, nil); err != nil {
		t.Fatal(err)
	}
	m, err := wan.Load(filepath.Join(golden.Wan(t), "weights_generator.pt"), wan.TinyConfig(), wan.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sch, first, err := ScheduleOptions{}.Build()
	if err != nil {
		t.Fatal(err)
	}
	gen, err := NewGeneratorFor(m, sch, []PromptText{{Text: TextFile{Path: textPath}}})
	if err != nil {
		t.Fatal(err)
	}
	gen.FirstSchedule = first
	mc := memory.Config{Capacity: 60}
	mc.Bank.Ordering, mc.Bank.Sigma = bank.OrderMax, 4
	if mc, err = m.Cfg.Memory(mc, 6, 8, 3); err != nil {
		t.Fatal(err)
	}
	var calls int
	ro := RunOptions{Blocks: 5, Height: 6, Width: 8, Seed: 11, Progress: func(Progress) { calls++ }}
	var lat [2][][]float32
	for r := 0; r < 2; r++ {
		pol, err := memory.New("densitykv", mc)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out", string(rune('a'+r)))
		w, err := NewWriter(out, gen.Manifest(pol, ro, nil))
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		ro.Writer, ro.MemLog = w, &log
		if err := gen.Run(pol, ro); err != nil {
			t.Fatal(err)
		}
		man := w.Manifest()
		if !man.Complete || len(man.Shards) != 5 || man.Policy != "densitykv" {
			t.Fatalf("manifest %+v", man)
		}
		for b := range man.Shards {
			x, err := ReadBlock(out, man, b)
			if err != nil {
				t.Fatal(err)
			}
			lat[r] = append(lat[r], x)
		}
		sc := bufio.NewScanner(&log)
		var logs []BlockLog
		for sc.Scan() {
			var l BlockLog
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			logs = append(logs, l)
		}
		if len(logs) != 5 || logs[2].Admitted[0] != 36 || logs[4].Occupancy[0][0] == 0 || logs[4].Attention[0].Memory == 0 || logs[4].Bytes <= 0 {
			t.Fatalf("memory log %+v", logs)
		}
	}
	if calls != 2*5*5 {
		t.Fatalf("%d progress calls, want 50", calls)
	}
	for b := range lat[0] {
		if !bytes.Equal(f32b(lat[0][b]), f32b(lat[1][b])) {
			t.Fatalf("block %d not reproducible for the same seed", b)
		}
	}
	wide := filepath.Join(dir, "wide.safetensors")
	checkpoint.WriteSafetensorsFile(wide, []checkpoint.WriteTensor{{Name: "x", Shape: []int{2, 33}, Data: make([]float32, 66)}}, nil)
	var ie *InputError
	if _, err := NewGeneratorFor(m, sch, []PromptText{{Text: TextFile{Path: wide}}}); !errors.As(err, &ie) || !strings.Contains(err.Error(), "33") {
		t.Fatalf("wide text: %v", err)
	}
}
