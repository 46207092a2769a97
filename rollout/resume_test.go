package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/memory"
)

// stopAfter returns a context that is cancelled once block last is done,
// and the BlockDone callback that does it (chained before done).
func stopAfter(last int, done func(int, []float32, BlockLog)) (context.Context, func(int, []float32, BlockLog) error) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, func(b int, x []float32, l BlockLog) error {
		done(b, x, l)
		if b == last {
			cancel()
		}
		return nil
	}
}

// untimed is a memory-log line without its wall-clock fields.
func untimed(t *testing.T, log []byte) []string {
	t.Helper()
	var out []string
	for _, ln := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var l BlockLog
		if err := json.Unmarshal([]byte(ln), &l); err != nil {
			t.Fatal(err)
		}
		l.Seconds, l.UpdateSeconds = 0, 0
		b, _ := json.Marshal(l)
		out = append(out, string(b))
	}
	return out
}

// TestStartContinuesEveryPolicy stops a rollout after block 4 of 8 (Stop),
// snapshots the policy, restores it into a fresh one and continues with
// Start = 5, a resumed Writer and the same memory log: the latent shards
// are byte-identical to an uninterrupted rollout's, and so are the memory
// log (but for timings) and the manifest (but for timings and creation time).
func TestStartContinuesEveryPolicy(t *testing.T) {
	m := goldenModel(t)
	g := openGolden(t, "rollout_native.safetensors")
	txt, err := m.EmbedText(g.F32("context"), 8)
	if err != nil {
		t.Fatal(err)
	}
	const blocks, stop = 8, 4 // resume at block 5, past the 12-frame cache
	for _, name := range memory.Names() {
		t.Run(name, func(t *testing.T) {
			cfg := memory.Config{Layout: m.Cfg.Layout(6, 8, 3), Capacity: 30}
			cfg.Bank.Sigma = 4
			newPol := func() memory.Policy {
				p, err := memory.New(name, cfg)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			opts := func(dir string, log *bytes.Buffer) Options {
				w, err := NewWriter(dir, Manifest{Policy: name, Channels: 16, Height: 6, Width: 8, FramesPerBlock: 3, BlocksPlanned: blocks})
				if err != nil {
					t.Fatal(err)
				}
				return Options{Blocks: blocks, Height: 6, Width: 8, Schedule: DefaultSchedule(), Noise: Seeded{Seed: 5, StepsPerBlock: 3},
					Prompts: []Prompt{{Text: txt}}, Writer: w, MemLog: log}
			}
			root := t.TempDir()
			full, part := filepath.Join(root, "full"), filepath.Join(root, "part")
			var fullLog, partLog bytes.Buffer
			o := opts(full, &fullLog)
			var want [][]float32
			o.BlockDone = func(_ int, x []float32, _ BlockLog) error {
				want = append(want, append([]float32(nil), x...))
				return nil
			}
			if err := Run(m, newPol(), o); err != nil {
				t.Fatal(err)
			}

			a := newPol()
			o = opts(part, &partLog)
			n := 0
			o.Stop, o.BlockDone = stopAfter(stop, func(int, []float32, BlockLog) { n++ })
			if err := Run(m, a, o); !errors.Is(err, context.Canceled) || n != stop+1 {
				t.Fatalf("stopped rollout: %d blocks, error %v", n, err)
			}
			var snap bytes.Buffer
			if err := a.(memory.Snapshotter).Save(&snap); err != nil {
				t.Fatal(err)
			}
			b := newPol()
			if err := b.(memory.Snapshotter).Load(&snap); err != nil {
				t.Fatal(err)
			}
			w, err := ResumeWriter(part, stop+1)
			if err != nil {
				t.Fatal(err)
			}
			o = Options{Blocks: blocks, Height: 6, Width: 8, Schedule: DefaultSchedule(), Noise: Seeded{Seed: 5, StepsPerBlock: 3},
				Prompts: []Prompt{{Text: txt}}, Writer: w, MemLog: &partLog, Start: stop + 1}
			o.BlockDone = func(blk int, x []float32, _ BlockLog) error {
				if !bytes.Equal(f32b(x), f32b(want[blk])) {
					t.Errorf("block %d differs from the uninterrupted rollout", blk)
				}
				n++
				return nil
			}
			if err := Run(m, b, o); err != nil {
				t.Fatal(err)
			}
			if n != blocks {
				t.Fatalf("%d blocks after resuming, want %d", n, blocks)
			}
			for blk := 0; blk < blocks; blk++ {
				f := fmt.Sprintf("%s/block_%05d.safetensors", LatentDir, blk)
				x, _ := os.ReadFile(filepath.Join(full, f))
				y, _ := os.ReadFile(filepath.Join(part, f))
				if len(x) == 0 || !bytes.Equal(x, y) {
					t.Errorf("%s differs", f)
				}
			}
			mf, _ := ReadManifest(full)
			mp, _ := ReadManifest(part)
			for _, man := range []*Manifest{&mf, &mp} {
				man.Created = ""
				for i := range man.Shards {
					man.Shards[i].Seconds = 0
				}
			}
			x, _ := json.Marshal(mf)
			y, _ := json.Marshal(mp)
			if !bytes.Equal(x, y) || !mp.Complete {
				t.Errorf("manifests differ:\n%s\n%s", x, y)
			}
			if fl, pl := untimed(t, fullLog.Bytes()), untimed(t, partLog.Bytes()); strings.Join(fl, "\n") != strings.Join(pl, "\n") {
				t.Errorf("memory logs differ:\n%s\n%s", strings.Join(fl, "\n"), strings.Join(pl, "\n"))
			}
		})
	}
}

// TestStartGoldenDensityKV resumes the golden density-bank rollout (the
// supplied noise sequence) at block 4 and checks the latents against the
// reference.
func TestStartGoldenDensityKV(t *testing.T) {
	m := goldenModel(t)
	g := openGolden(t, "rollout_densitykv_cap60.safetensors")
	cfg := memory.Config{Layout: m.Cfg.Layout(6, 8, 3), SinkFrames: 1, CacheFrames: 12, WindowFrames: 5, Capacity: 60}
	cfg.Bank.Ordering, cfg.Bank.Sigma, cfg.Bank.Payload = bank.OrderMax, 4, bank.PayloadF32
	a, err := memory.New(memory.NameDensityKV, cfg)
	if err != nil {
		t.Fatal(err)
	}
	opt := goldenOptions(t, m, g)
	opt.Stop, opt.BlockDone = stopAfter(3, func(int, []float32, BlockLog) {})
	if err := Run(m, a, opt); !errors.Is(err, context.Canceled) {
		t.Fatalf("stop: %v", err)
	}
	var snap bytes.Buffer
	if err := a.(memory.Snapshotter).Save(&snap); err != nil {
		t.Fatal(err)
	}
	b, _ := memory.New(memory.NameDensityKV, cfg)
	if err := b.(memory.Snapshotter).Load(&snap); err != nil {
		t.Fatal(err)
	}
	opt = goldenOptions(t, m, g)
	opt.Start = 4
	lat := g.F64("latents")
	bs := 3 * 16 * 6 * 8
	n := 0
	opt.BlockDone = func(blk int, x []float32, _ BlockLog) error {
		n++
		if e := relErr(x, lat[blk*bs:(blk+1)*bs]); e > goldenTol {
			t.Errorf("block %d latents: relative error %.3g", blk, e)
		}
		return nil
	}
	if err := Run(m, b, opt); err != nil || n != 4 {
		t.Fatalf("resumed rollout: %d blocks, %v", n, err)
	}
}

// TestResumeWriterChecks: the resumed writer drops shards beyond the resume
// point and refuses missing or altered shards of completed blocks; Run
// refuses a start that does not match the writer.
func TestResumeWriterChecks(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir, Manifest{Policy: "native", Channels: 2, Height: 2, Width: 2, FramesPerBlock: 1, BlocksPlanned: 4})
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 3; b++ {
		if err := w.WriteBlock(b, make([]float32, 8), 0); err != nil {
			t.Fatal(err)
		}
	}
	// A shard the manifest never listed (crash before the manifest).
	os.WriteFile(filepath.Join(dir, LatentDir, "block_00003.safetensors"), []byte("x"), 0o644)
	if _, err := ResumeWriter(dir, 4); err == nil {
		t.Fatal("resume beyond the listed shards accepted")
	}
	w, err = ResumeWriter(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	if w.Next() != 2 {
		t.Fatalf("next %d", w.Next())
	}
	m, _ := ReadManifest(dir)
	if len(m.Shards) != 2 || m.Complete {
		t.Fatalf("manifest after resume: %+v", m)
	}
	for _, b := range []int{2, 3} {
		if _, err := os.Stat(filepath.Join(dir, LatentDir, fmt.Sprintf("block_%05d.safetensors", b))); err == nil {
			t.Errorf("stale shard of block %d kept", b)
		}
	}
	shard := filepath.Join(dir, LatentDir, "block_00001.safetensors")
	data, _ := os.ReadFile(shard)
	data[len(data)-1] ^= 1
	os.WriteFile(shard, data, 0o644)
	if _, err := ResumeWriter(dir, 2); err == nil || !strings.Contains(err.Error(), "block 1") || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("altered shard: %v", err)
	}
	os.Remove(shard)
	if _, err := ResumeWriter(dir, 2); err == nil || !strings.Contains(err.Error(), "block 1") {
		t.Fatalf("missing shard: %v", err)
	}
	if _, err := ResumeWriter(dir, 1); err != nil {
		t.Fatal(err)
	}

	m2 := goldenModel(t)
	txt, _ := m2.EmbedText(make([]float32, 8*32), 8)
	w, _ = NewWriter(t.TempDir(), Manifest{Policy: "native", Channels: 16, Height: 6, Width: 8, FramesPerBlock: 3, BlocksPlanned: 2})
	for _, o := range []Options{
		{Blocks: 2, Start: 1, Writer: w},
		{Blocks: 2, Start: 3},
		{Blocks: 2, Start: -1},
	} {
		o.Height, o.Width, o.Schedule, o.Noise, o.Prompts = 6, 8, DefaultSchedule(), Seeded{}, []Prompt{{Text: txt}}
		if err := Run(m2, tinyNative(t, m2), o); err == nil || !strings.Contains(err.Error(), "start") {
			t.Errorf("start %d (writer %v) accepted: %v", o.Start, o.Writer != nil, err)
		}
	}
}
