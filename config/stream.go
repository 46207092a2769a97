package config

import "github.com/densitykv/densitykv/synth"

// SynthParams are the scene parameters of the built-in synthetic stream
// (see package synth: background regions, moving objects that leave and
// return, camera pan, a scene cut and return, appearance drift, noise).
type SynthParams struct {
	Channels     int     `yaml:"channels"`      // latent channels C
	Hidden       int     `yaml:"hidden"`        // width of the residual feature stack
	Objects      int     `yaml:"objects"`       // moving objects per scene
	Regions      int     `yaml:"regions"`       // background regions per scene
	PanAmplitude float64 `yaml:"pan_amplitude"` // camera pan amplitude, tokens
	PanPeriod    float64 `yaml:"pan_period"`    // camera pan period, frames
	CutAt        float64 `yaml:"cut_at"`        // fraction of the stream where the scene cuts (≥ 1: never)
	ReturnAt     float64 `yaml:"return_at"`     // fraction where it cuts back (≤ cut_at or ≥ 1: never)
	Drift        float64 `yaml:"drift"`         // appearance drift, radians per frame
	Noise        float64 `yaml:"noise"`         // per-token feature noise std
	KeyNoise     float64 `yaml:"key_noise"`     // per-head key noise std
	ValueNoise   float64 `yaml:"value_noise"`   // per-head value noise std
}

// SynthParamsOf returns the scene parameters of a generator configuration.
func SynthParamsOf(c synth.Config) SynthParams {
	return SynthParams{Channels: c.Channels, Hidden: c.Hidden, Objects: c.Objects, Regions: c.Regions,
		PanAmplitude: c.PanAmplitude, PanPeriod: c.PanPeriod, CutAt: c.CutAt, ReturnAt: c.ReturnAt,
		Drift: c.Drift, Noise: c.Noise, KeyNoise: c.KeyNoise, ValueNoise: c.ValueNoise}
}

// Synth returns the generator configuration of a run's synthetic stream.
func (c Config) Synth() synth.Config {
	p := c.Stream.Synth
	l := c.Memory.Layout
	l.Layers += c.Stream.FirstLayer // the generator builds every layer up to the last simulated
	return synth.Config{Layout: l, Blocks: c.Blocks(), Seed: uint64(c.Run.Seed),
		Channels: p.Channels, Hidden: p.Hidden, Objects: p.Objects, Regions: p.Regions,
		PanAmplitude: p.PanAmplitude, PanPeriod: p.PanPeriod, CutAt: p.CutAt, ReturnAt: p.ReturnAt,
		Drift: p.Drift, Noise: p.Noise, KeyNoise: p.KeyNoise, ValueNoise: p.ValueNoise}
}
