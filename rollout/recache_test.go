package rollout

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/memory"
)

// TestRecacheAtPromptSwitch runs the tiny model with a prompt switch,
// with and without LongLive's recache: blocks before the switch are
// bit-identical; the recache recomputes the resident frames (block 5,
// start 15: the 11 non-sink frames 4–14 of the native cache; block 2,
// start 6: every frame 0–5, the sink included) and changes the switching
// block; a rollout without a switch is the same with or without a
// recacher; and a resumed rollout (its latents read back from the
// writer's folder) recaches exactly like an uninterrupted one.
func TestRecacheAtPromptSwitch(t *testing.T) {
	m := goldenModel(t)
	g := openGolden(t, "rollout_native.safetensors")
	ctx := g.F32("context")
	neg := append([]float32(nil), ctx...)
	for i := range neg {
		neg[i] = -neg[i]
	}
	t1, _ := m.EmbedText(ctx, 8)
	t2, _ := m.EmbedText(neg, 8)
	type result struct {
		lat  [][]float32
		logs []BlockLog
	}
	const blocks = 7
	run := func(name string, switchAt int, recache bool, o func(*Options)) result {
		t.Helper()
		pol, err := memory.New(name, memory.Config{Layout: m.Cfg.Layout(6, 8, 3), Capacity: 24})
		if err != nil {
			t.Fatal(err)
		}
		prompts := []Prompt{{Text: t1}}
		if switchAt > 0 {
			prompts = append(prompts, Prompt{FromBlock: switchAt, Text: t2})
		}
		var r result
		opt := Options{Blocks: blocks, Height: 6, Width: 8, Schedule: DefaultSchedule(), Noise: Seeded{Seed: 3, StepsPerBlock: 3},
			Prompts: prompts, BlockDone: func(b int, x []float32, l BlockLog) error {
				r.lat = append(r.lat, append([]float32(nil), x...))
				r.logs = append(r.logs, l)
				return nil
			}}
		if recache {
			opt.Recacher = pol.(memory.Recacher)
		}
		if o != nil {
			o(&opt)
		}
		if err := Run(m, pol, opt); err != nil {
			t.Fatal(err)
		}
		return r
	}
	span := func(a, b int) []int {
		var out []int
		for f := a; f <= b; f++ {
			out = append(out, f)
		}
		return out
	}
	for _, c := range []struct {
		policy   string
		switchAt int
		frames   []int
	}{
		{memory.NameNative, 5, span(4, 14)},
		{memory.NameNative, 2, span(0, 5)},
		{memory.NameDensityKV, 5, span(10, 14)},
	} {
		plain := run(c.policy, c.switchAt, false, nil)
		re := run(c.policy, c.switchAt, true, nil)
		for b := 0; b < c.switchAt; b++ {
			if !bytes.Equal(f32b(plain.lat[b]), f32b(re.lat[b])) || re.logs[b].Recached != nil {
				t.Fatalf("%s switch %d: block %d changed before the switch", c.policy, c.switchAt, b)
			}
		}
		if got := re.logs[c.switchAt].Recached; !slices.Equal(got, c.frames) {
			t.Fatalf("%s switch at %d: recached %v, want %v", c.policy, c.switchAt, got, c.frames)
		}
		if bytes.Equal(f32b(plain.lat[c.switchAt]), f32b(re.lat[c.switchAt])) {
			t.Fatalf("%s: the recache did not change block %d", c.policy, c.switchAt)
		}
	}
	a, b := run(memory.NameNative, 0, false, nil), run(memory.NameNative, 0, true, nil)
	for i := range a.lat {
		if !bytes.Equal(f32b(a.lat[i]), f32b(b.lat[i])) {
			t.Fatalf("block %d: a recacher without a prompt switch changed the rollout", i)
		}
	}
	// Resume at block 4 (the switch at 5 needs frames 4–14: blocks 1–3 are read back).
	dir := t.TempDir()
	full := run(memory.NameNative, 5, true, nil)
	pol, _ := memory.New(memory.NameNative, memory.Config{Layout: m.Cfg.Layout(6, 8, 3), Capacity: 24})
	w, err := NewWriter(filepath.Join(dir, "r"), Manifest{Policy: "native", Channels: 16, Height: 6, Width: 8, FramesPerBlock: 3, BlocksPlanned: blocks})
	if err != nil {
		t.Fatal(err)
	}
	stop, done := stopAfter(3, func(int, []float32, BlockLog) {})
	err = Run(m, pol, Options{Blocks: blocks, Height: 6, Width: 8, Schedule: DefaultSchedule(), Noise: Seeded{Seed: 3, StepsPerBlock: 3},
		Prompts: []Prompt{{Text: t1}, {FromBlock: 5, Text: t2}}, Writer: w, Stop: stop, BlockDone: done, Recacher: pol.(memory.Recacher)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped rollout: %v", err)
	}
	var snap bytes.Buffer
	if err := pol.(memory.Snapshotter).Save(&snap); err != nil {
		t.Fatal(err)
	}
	res, _ := memory.New(memory.NameNative, memory.Config{Layout: m.Cfg.Layout(6, 8, 3), Capacity: 24})
	if err := res.(memory.Snapshotter).Load(&snap); err != nil {
		t.Fatal(err)
	}
	w, err = ResumeWriter(filepath.Join(dir, "r"), 4)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]float32
	err = Run(m, res, Options{Blocks: blocks, Height: 6, Width: 8, Schedule: DefaultSchedule(), Noise: Seeded{Seed: 3, StepsPerBlock: 3},
		Prompts: []Prompt{{Text: t1}, {FromBlock: 5, Text: t2}}, Writer: w, Start: 4, Recacher: res.(memory.Recacher),
		BlockDone: func(_ int, x []float32, _ BlockLog) error {
			got = append(got, append([]float32(nil), x...))
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range got {
		if !bytes.Equal(f32b(x), f32b(full.lat[4+i])) {
			t.Fatalf("resumed block %d differs from the uninterrupted recache rollout", 4+i)
		}
	}
	// Without the writer a resumed recache cannot find the earlier latents.
	if err := Run(m, res, Options{Blocks: blocks, Height: 6, Width: 8, Schedule: DefaultSchedule(), Noise: Seeded{Seed: 3},
		Prompts: []Prompt{{Text: t1}}, Start: 4, Recacher: res.(memory.Recacher)}); err == nil {
		t.Fatal("a resumed recache rollout without its writer was accepted")
	}
}
