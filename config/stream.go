package config

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/synth"
)

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

// Stream is a run's KV stream: the stream's layers [FirstLayer,
// FirstLayer + memory.layout.layers) of every block, presented as layers
// 0, 1, … of memory.layout, so that a run's policies see the layout they
// were built with.
type Stream struct {
	synth.Reader
	first  int
	layout memory.Layout
	closer io.Closer
}

// Layout returns the run's layout.
func (s Stream) Layout() memory.Layout { return s.layout }

// Layer returns layer l of the run (layer FirstLayer + l of the stream).
func (s Stream) Layer(l int) (q, k, v []float32, err error) {
	if l < 0 || l >= s.layout.Layers {
		return nil, nil, nil, fmt.Errorf("config: stream: layer %d outside the run's %d layers", l, s.layout.Layers)
	}
	return s.Reader.Layer(s.first + l)
}

// Close closes the stream file, if any.
func (s Stream) Close() error {
	if s.closer != nil {
		return s.closer.Close()
	}
	return nil
}

// OpenStream opens the run's KV stream: the synthetic generator, or a
// recorded stream file whose layout must equal the run's.
func OpenStream(c Config) (Stream, error) {
	switch c.Stream.Kind {
	case "synthetic":
		g, err := synth.NewGenerator(c.Synth())
		if err != nil {
			return Stream{}, fmt.Errorf("stream: %w", err)
		}
		return Stream{Reader: g, first: c.Stream.FirstLayer, layout: c.Memory.Layout}, nil
	case "file":
		f, err := os.Open(c.Stream.Path)
		if err != nil {
			return Stream{}, fmt.Errorf("stream.path (--stream-file): %w", err)
		}
		r, err := synth.NewFileReader(bufio.NewReaderSize(f, 1<<20))
		if err != nil {
			f.Close()
			return Stream{}, fmt.Errorf("stream.path (--stream-file) %s: %w", c.Stream.Path, err)
		}
		if r.Layout() != c.Memory.Layout {
			f.Close()
			return Stream{}, fmt.Errorf("stream.path (--stream-file) %s: layout %+v differs from memory.layout %+v", c.Stream.Path, r.Layout(), c.Memory.Layout)
		}
		return Stream{Reader: r, layout: r.Layout(), closer: f}, nil
	}
	return Stream{}, fmt.Errorf("stream.kind %q unknown", c.Stream.Kind)
}

// StreamLayout reads only the header of a stream file: its layout and
// block count.
func StreamLayout(path string) (memory.Layout, int, error) {
	h, err := StreamHeader(path)
	return h.Layout, h.Blocks, err
}

// StreamHeader reads only the header of a stream file.
func StreamHeader(path string) (synth.Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return synth.Header{}, err
	}
	defer f.Close()
	r, err := synth.NewFileReader(bufio.NewReader(f))
	if err != nil {
		return synth.Header{}, err
	}
	return r.Header(), nil
}

// StreamDefaults returns base with what a replay of the stream file at
// path starts from: the stream's layout and, when the stream recorded it
// (generate --record-stream), the recording run's attention budget (sink,
// cache and window frames, capacity M), so that a stream recorded with
// --capacity 24 is replayed at M = 24 unless a flag or the --config file
// says otherwise.
func StreamDefaults(base Config, path string) (Config, error) {
	h, err := StreamHeader(path)
	if err != nil {
		return base, fmt.Errorf("stream.path (--stream-file) %s: %w", path, err)
	}
	base.Memory.Layout = h.Layout
	if h.Memory != nil {
		h.Memory.Apply(&base.Memory)
	}
	return base, nil
}
