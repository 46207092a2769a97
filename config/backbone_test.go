package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/schedule"
)

// The presets are the authors' paper_cases.yaml: entry per backbone (use_ema
// for Self-Forcing, the LoRA for LongLive), 3 frames per block, sink 1,
// local_attn_size 12 and the common schedule; ApplyPreset fills only the
// keys not given explicitly.
func TestBackbonePresets(t *testing.T) {
	for _, c := range []struct {
		b     Backbone
		name  string
		entry string
		lora  bool
	}{
		{BackboneSelfForcing, "self-forcing", "generator_ema", false},
		{BackboneCausalForcing, "causal-forcing", "generator", false},
		{BackboneLongLive, "longlive", "generator", true},
	} {
		p, ok := c.b.Preset()
		if !ok || c.b.String() != c.name || p.Entry != c.entry || p.NeedsLoRA != c.lora || p.FramesPerBlock != 3 || p.SinkFrames != 1 || p.CacheFrames != 12 ||
			!slices.Equal(p.Schedule.Steps, []int{1000, 750, 500, 250}) || !p.Schedule.Warp || p.Schedule.Shift != 5 || p.Schedule.Update != schedule.UpdateX0Renoise {
			t.Fatalf("%s preset %+v", c.name, p)
		}
		var b Backbone
		if err := b.UnmarshalText([]byte(c.name)); err != nil || b != c.b {
			t.Fatalf("%s: parsed %v, %v", c.name, b, err)
		}
	}
	if _, ok := BackboneNone.Preset(); ok {
		t.Fatal("none has a preset")
	}
	gc := GenerateDefaults()
	gc.Generate.Backbone, gc.Generate.Entry, gc.Generate.Schedule.Shift, gc.Memory.SinkFrames = BackboneSelfForcing, "generator", 3, 2
	explicit := map[string]bool{"generate.entry": true, "generate.schedule.shift": true}
	if err := gc.ApplyPreset(func(k string) bool { return explicit[k] }); err != nil {
		t.Fatal(err)
	}
	if gc.Generate.Entry != "generator" || gc.Generate.Schedule.Shift != 3 || gc.Memory.SinkFrames != 1 || gc.Generate.FramesPerBlock != 3 {
		t.Fatalf("explicit keys overridden or preset not applied: %+v, sink %d", gc.Generate, gc.Memory.SinkFrames)
	}
	gc = GenerateDefaults()
	gc.Generate.Backbone = BackboneLongLive
	if err := gc.ApplyPreset(func(string) bool { return false }); err == nil || !strings.Contains(err.Error(), "--lora") {
		t.Fatalf("longlive without a LoRA: %v", err)
	}
	for _, k := range PresetKeys() {
		if !strings.HasPrefix(k, "generate.") && !strings.HasPrefix(k, "memory.") {
			t.Fatalf("preset key %q", k)
		}
	}
}

func TestParseIndexList(t *testing.T) {
	for _, c := range []struct {
		spec string
		want []int
	}{{"all", []int{0, 1, 2}}, {"none", []int{}}, {"2, 0,2", []int{0, 2}}, {"1", []int{1}}} {
		got, err := ParseIndexList(c.spec, "x", 3)
		if err != nil || !slices.Equal(got, c.want) {
			t.Fatalf("%q: %v %v, want %v", c.spec, got, err, c.want)
		}
	}
	for _, bad := range []string{"3", "-1", "a", "0,,1"} {
		if _, err := ParseIndexList(bad, "--lineage-layers", 3); err == nil || !strings.Contains(err.Error(), "--lineage-layers") {
			t.Fatalf("%q accepted or unnamed: %v", bad, err)
		}
	}
}
