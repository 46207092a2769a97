package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/internal/torchtest"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
)

// writeTwoEntryCheckpoint writes the tiny golden generator as a PyTorch
// checkpoint with a generator entry (the golden weights) and a
// generator_ema entry whose weights differ (every value ×1.01), as the
// released Self-Forcing / Causal-Forcing checkpoints hold both.
func writeTwoEntryCheckpoint(t *testing.T, path string) {
	t.Helper()
	sd, err := checkpoint.LoadFile(filepath.Join(golden.Wan(t), "weights.safetensors"), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var gen, ema torchtest.Dict
	for _, n := range sd.Names() {
		x := sd[n]
		scaled := make([]float32, len(x.Data))
		for i, v := range x.Data {
			scaled[i] = v * 1.01
		}
		gen = append(gen, torchtest.KV{Key: "model." + n, Value: &torchtest.Tensor{Shape: x.Shape, Data: x.Data}})
		ema = append(ema, torchtest.KV{Key: "model._fsdp_wrapped_module." + n, Value: &torchtest.Tensor{Shape: x.Shape, Data: scaled}})
	}
	b := torchtest.Bytes(torchtest.Dict{{Key: "generator", Value: gen}, {Key: "generator_ema", Value: ema}}, torchtest.Options{})
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeTinyLoRA writes a LongLive-style LoRA checkpoint (generator_lora,
// rank 256 as LongLive's: --backbone longlive refuses another rank)
// adapting every block Linear of the tiny model.
func writeTinyLoRA(t *testing.T, path string) {
	t.Helper()
	const r = 256
	var gen torchtest.Dict
	for l := 0; l < 2; l++ {
		for _, s := range []string{"self_attn.q", "self_attn.k", "self_attn.v", "self_attn.o", "cross_attn.q", "cross_attn.k", "cross_attn.v", "cross_attn.o", "ffn.0", "ffn.2"} {
			in, out := 64, 64
			switch s {
			case "ffn.0":
				out = 128
			case "ffn.2":
				in = 128
			}
			a := &torchtest.Tensor{Shape: []int{r, in}, Data: make([]float32, r*in)}
			b := &torchtest.Tensor{Shape: []int{out, r}, Data: make([]float32, r*out)}
			for i := range a.Data {
				a.Data[i] = float32(i%7) * 0.01
			}
			for i := range b.Data {
				b.Data[i] = float32(i%5) * 0.01
			}
			k := "base_model.model.blocks." + strconv.Itoa(l) + "." + s
			gen = append(gen, torchtest.KV{Key: k + ".lora_A.weight", Value: a}, torchtest.KV{Key: k + ".lora_B.weight", Value: b})
		}
	}
	if err := os.WriteFile(path, torchtest.Bytes(torchtest.Dict{{Key: "generator_lora", Value: gen}}, torchtest.Options{}), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBackbonePresets checks --backbone against the authors'
// configs/examples/paper_cases.yaml: Self-Forcing loads generator_ema,
// Causal-Forcing generator, LongLive generator plus its LoRA; all three
// run 3 frames per block, sink 1, cache 12 and the released schedule; the
// resolved config records the entry loaded; --entry and the other flags
// override the preset; LongLive's own setting (6 frames per block, sink 3)
// is reachable by flags.
func TestBackbonePresets(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "two.pt")
	writeTwoEntryCheckpoint(t, ckpt)
	lora := filepath.Join(dir, "lora.pt")
	writeTinyLoRA(t, lora)
	text := tinyText(t, dir)
	base := func(name string, extra ...string) []string {
		return append([]string{"generate", "--arch", "tiny", "--checkpoint", ckpt, "--text", text, "--latent-height", "6", "--latent-width", "8",
			"--blocks", "2", "--out", dir, "--name", name, "--quiet", "--preview=false", "--trace-step", "-1", "--policy", "native"}, extra...)
	}
	runOK := func(name string, extra ...string) (config.GenerateConfig, []byte) {
		t.Helper()
		if code, _, errs := run(t, context.Background(), base(name, extra...)...); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errs)
		}
		var gc config.GenerateConfig
		if err := runfolder.LoadConfig(filepath.Join(dir, name), &gc); err != nil {
			t.Fatal(err)
		}
		man, err := rollout.ReadManifest(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var lat []byte
		for b := range man.Shards {
			x, err := rollout.ReadBlock(filepath.Join(dir, name), man, b)
			if err != nil {
				t.Fatal(err)
			}
			lat = append(lat, f32bytes(x)...)
		}
		return gc, lat
	}
	sf, sfLat := runOK("sf", "--backbone", "self-forcing")
	cf, cfLat := runOK("cf", "--backbone", "causal-forcing")
	_, emaLat := runOK("ema", "--entry", "generator_ema")
	autoCfg, autoLat := runOK("auto")
	over, overLat := runOK("sf-gen", "--backbone", "self-forcing", "--entry", "generator")
	if sf.Generate.Entry != "generator_ema" || cf.Generate.Entry != "generator" || autoCfg.Generate.Entry != "generator" || over.Generate.Entry != "generator" {
		t.Fatalf("recorded entries: self-forcing %q, causal-forcing %q, automatic %q, self-forcing --entry generator %q",
			sf.Generate.Entry, cf.Generate.Entry, autoCfg.Generate.Entry, over.Generate.Entry)
	}
	if !bytes.Equal(sfLat, emaLat) || !bytes.Equal(cfLat, autoLat) || !bytes.Equal(overLat, cfLat) || bytes.Equal(sfLat, cfLat) {
		t.Fatal("the latents do not follow the entry loaded (self-forcing = generator_ema ≠ causal-forcing = generator = automatic)")
	}
	for _, gc := range []config.GenerateConfig{sf, cf} {
		G := gc.Generate
		if G.FramesPerBlock != 3 || gc.Memory.SinkFrames != 1 || gc.Memory.CacheFrames != 12 || !slices.Equal(G.Schedule.Steps, []int{1000, 750, 500, 250}) ||
			!G.Schedule.Warp || G.Schedule.Shift != 5 || G.Schedule.Update != rollout.UpdateX0Renoise || len(G.Schedule.FirstChunkSteps) != 0 {
			t.Fatalf("%s preset: %+v, sink %d, cache %d", G.Backbone, G, gc.Memory.SinkFrames, gc.Memory.CacheFrames)
		}
	}
	// The automatic choice between generator and generator_ema is announced.
	if _, _, errs := run(t, context.Background(), base("warn")...); !strings.Contains(errs, "generator_ema") {
		t.Errorf("no warning about the two entries: %q", errs)
	}
	// LongLive needs its LoRA; with it, the paper's setting and, by flags, its own.
	if code, _, errs := run(t, context.Background(), base("ll-missing", "--backbone", "longlive")...); code != exitUsage || !strings.Contains(errs, "--lora") {
		t.Errorf("longlive without --lora: exit %d, %q", code, errs)
	}
	ll, llLat := runOK("ll", "--backbone", "longlive", "--lora", lora)
	if ll.Generate.Entry != "generator" || ll.Generate.LoRA != lora || ll.Generate.LoRAAlpha != 256 || ll.Generate.FramesPerBlock != 3 || ll.Memory.SinkFrames != 1 {
		t.Fatalf("longlive preset %+v sink %d", ll.Generate, ll.Memory.SinkFrames)
	}
	if bytes.Equal(llLat, cfLat) {
		t.Fatal("the LoRA did not change the latents")
	}
	up, upLat := runOK("ll-up", append([]string{"--lora", lora}, strings.Fields(config.LongLiveUpstream)...)...)
	if up.Generate.FramesPerBlock != 6 || up.Memory.SinkFrames != 3 || up.Memory.Layout.FramesPerBlock != 6 || len(upLat) != 2*6*16*6*8*4 {
		t.Fatalf("LongLive upstream setting: %d frames per block, sink %d, layout %+v, %d latent bytes", up.Generate.FramesPerBlock, up.Memory.SinkFrames, up.Memory.Layout, len(upLat))
	}
	// A --config file that names the backbone gets its preset; its own keys win.
	cfgFile := filepath.Join(dir, "sf.yaml")
	os.WriteFile(cfgFile, []byte("generate:\n  backbone: self-forcing\n  schedule:\n    shift: 3\n"), 0o644)
	fc, _ := runOK("file", "--config", cfgFile)
	if fc.Generate.Entry != "generator_ema" || fc.Generate.Schedule.Shift != 3 || !fc.Generate.Schedule.Warp {
		t.Fatalf("config-file backbone: %+v", fc.Generate)
	}
	if code, _, errs := run(t, context.Background(), base("bad", "--backbone", "wan")...); code != exitUsage || !strings.Contains(errs, "self-forcing") {
		t.Errorf("unknown backbone: exit %d, %q", code, errs)
	}
}

// TestGenerateScheduleFlags checks that the schedule flags reach the
// rollout (the manifest's timesteps) and the resolved config, and that bad
// lists are usage errors naming the flags.
func TestGenerateScheduleFlags(t *testing.T) {
	dir := t.TempDir()
	g := golden.Wan(t)
	text := tinyText(t, dir)
	base := func(name string, extra ...string) []string {
		return append([]string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"), "--text", text,
			"--latent-height", "6", "--latent-width", "8", "--blocks", "2", "--out", dir, "--name", name, "--quiet", "--preview=false", "--trace-step", "-1"}, extra...)
	}
	if code, _, errs := run(t, context.Background(), base("s", "--steps", "1000,500", "--first-chunk-steps", "1000,750,500", "--warp=false", "--shift", "3", "--update", "flow_euler")...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	man, err := rollout.ReadManifest(filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(man.Timesteps, []float32{1000, 500}) || !slices.Equal(man.FirstTimesteps, []float32{1000, 750, 500}) || man.Update != "flow_euler" {
		t.Fatalf("manifest schedule %v, first %v, update %q", man.Timesteps, man.FirstTimesteps, man.Update)
	}
	var gc config.GenerateConfig
	if err := runfolder.LoadConfig(filepath.Join(dir, "s"), &gc); err != nil {
		t.Fatal(err)
	}
	if s := gc.Generate.Schedule; s.Warp || s.Shift != 3 || s.Update != rollout.UpdateFlowEuler {
		t.Fatalf("recorded schedule %+v", s)
	}
	// Without --trace-step the traced step follows the schedule: the last of
	// a 2-step schedule (the authors' call 3 does not exist there), and the
	// authors' 3 of the default 4-step one.
	for _, c := range []struct {
		steps string
		want  int
	}{{"1000,500", 1}, {"1000", 0}, {"1000,750,500,250", 3}} {
		name := "trace" + strings.ReplaceAll(c.steps, ",", "_")
		args := slices.DeleteFunc(base(name, "--steps", c.steps), func(a string) bool { return a == "--trace-step" || a == "-1" })
		if code, _, errs := run(t, context.Background(), args...); code != 0 {
			t.Fatalf("--steps %s without --trace-step: exit %d: %s", c.steps, code, errs)
		}
		var tf struct {
			Step int `json:"step"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, name, runfolder.FileTrace)); err != nil {
			t.Fatal(err)
		} else if err := json.Unmarshal(b, &tf); err != nil || tf.Step != c.want {
			t.Errorf("--steps %s: traced step %d (%v), want %d", c.steps, tf.Step, err, c.want)
		}
		var rc config.GenerateConfig
		if err := runfolder.LoadConfig(filepath.Join(dir, name), &rc); err != nil || rc.Generate.TraceStep != c.want {
			t.Errorf("--steps %s: recorded trace_step %d (%v), want %d", c.steps, rc.Generate.TraceStep, err, c.want)
		}
	}
	for _, c := range []struct{ args, want string }{
		{"--steps 500,750", "must decrease"},
		{"--update euler", "--update"},
		{"--frames-per-block 0", "--frames-per-block"},
		{"--trace-step 2 --steps 1000,500", "--trace-step"},
	} {
		code, _, errs := run(t, context.Background(), base("bad", strings.Fields(c.args)...)...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, %q (want %q)", c.args, code, errs, c.want)
		}
	}
}

// f32bytes returns x's little-endian bytes.
func f32bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		u := math.Float32bits(v)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}
