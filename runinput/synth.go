package runinput

import (
	"fmt"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/synth"
)

// SynthParamsOf returns the scene parameters of a generator configuration.
func SynthParamsOf(c synth.Config) config.SynthParams {
	return config.SynthParams{Channels: c.Channels, Hidden: c.Hidden, Objects: c.Objects, Regions: c.Regions,
		PanAmplitude: c.PanAmplitude, PanPeriod: c.PanPeriod, CutAt: c.CutAt, ReturnAt: c.ReturnAt,
		Drift: c.Drift, Noise: c.Noise, KeyNoise: c.KeyNoise, ValueNoise: c.ValueNoise}
}

// SynthConfig returns the generator configuration of a run's synthetic
// stream.
func SynthConfig(c config.Config) synth.Config {
	p := c.Stream.Synth
	l := c.Memory.Layout
	l.Layers += c.Stream.FirstLayer // the generator builds every layer up to the last simulated
	return synth.Config{Layout: l, Blocks: c.Blocks(), Seed: uint64(c.Run.Seed),
		Channels: p.Channels, Hidden: p.Hidden, Objects: p.Objects, Regions: p.Regions,
		PanAmplitude: p.PanAmplitude, PanPeriod: p.PanPeriod, CutAt: p.CutAt, ReturnAt: p.ReturnAt,
		Drift: p.Drift, Noise: p.Noise, KeyNoise: p.KeyNoise, ValueNoise: p.ValueNoise}
}

// checkSynth checks a resolved run's synthetic stream parameters (the
// generator's own checks: synth.Config.Validate).
func checkSynth(c config.Config) error {
	if c.Stream.Kind != "synthetic" {
		return nil
	}
	sc := SynthConfig(c)
	sc.Blocks = max(sc.Blocks, 1)
	if err := sc.Validate(); err != nil {
		return fmt.Errorf("config: stream.synth: %w", err)
	}
	return nil
}
