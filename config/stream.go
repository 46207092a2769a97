package config

import "github.com/densitykv/densitykv/memory"

// SynthParams are the scene parameters of the built-in synthetic stream
// (see package synth: background regions, moving objects that leave and
// return, camera pan, a scene cut and return, appearance drift, noise);
// runinput.SynthConfig makes the generator's configuration of them, and
// runinput.Resolve checks them.
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

// paperSynth are the scene parameters of synth.PaperConfig (runinput's
// tests check that they are), and demoSynth those of synth.DefaultConfig,
// whose layout is demoLayout.
var (
	paperSynth = SynthParams{Channels: 16, Hidden: 32, Objects: 5, Regions: 6, PanAmplitude: 26, PanPeriod: 240,
		CutAt: 0.45, ReturnAt: 0.75, Drift: 0.002, Noise: 0.1, KeyNoise: 0.05, ValueNoise: 0.05}
	demoSynth = SynthParams{Channels: 16, Hidden: 32, Objects: 3, Regions: 4, PanAmplitude: 8, PanPeriod: 60,
		CutAt: 0.45, ReturnAt: 0.75, Drift: 0.002, Noise: 0.1, KeyNoise: 0.05, ValueNoise: 0.05}
	demoLayout = memory.Layout{Height: 10, Width: 16, FramesPerBlock: 3, Layers: 4, Heads: 4, HeadDim: 64}
)
