package runinput

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/record"
	"github.com/densitykv/densitykv/synth"
)

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
		return nil, nil, nil, fmt.Errorf("runinput: stream: layer %d outside the run's %d layers", l, s.layout.Layers)
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
func OpenStream(c config.Config) (Stream, error) {
	switch c.Stream.Kind {
	case "synthetic":
		g, err := synth.NewGenerator(SynthConfig(c))
		if err != nil {
			return Stream{}, fmt.Errorf("stream: %w", err)
		}
		return Stream{Reader: g, first: c.Stream.FirstLayer, layout: c.Memory.Layout}, nil
	case "file":
		f, err := os.Open(c.Stream.Path)
		if err != nil {
			return Stream{}, fmt.Errorf("stream.path (--stream-file): %w", err)
		}
		r, err := record.NewFileReader(bufio.NewReaderSize(f, 1<<20))
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

// StreamHeader reads only the header of a stream file.
func StreamHeader(path string) (record.Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return record.Header{}, err
	}
	defer f.Close()
	r, err := record.NewFileReader(bufio.NewReader(f))
	if err != nil {
		return record.Header{}, err
	}
	return r.Header(), nil
}

// StreamDefaults returns base with what a replay of the stream file at
// path starts from: the stream's layout and, when the stream recorded it
// (generate --record-stream), the recording run's attention budget (sink,
// cache and window frames, capacity M), so that a stream recorded with
// --capacity 24 is replayed at M = 24 unless a flag or the --config file
// says otherwise.
func StreamDefaults(base config.Config, path string) (config.Config, error) {
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

// Resolve is c.Resolve for a run that reads its stream: a recorded stream
// file's layout replaces memory.layout (config.Config.Resolve reads no
// file), then every default is filled and c validated, a synthetic
// stream's parameters by the generator's own checks.
func Resolve(c config.Config) (config.Config, error) {
	if c.Stream.Kind == "file" && c.Stream.Path != "" {
		h, err := StreamHeader(c.Stream.Path)
		if err != nil {
			return c, fmt.Errorf("config: stream.path (--stream-file) %s: %w", c.Stream.Path, err)
		}
		c.Memory.Layout = h.Layout
	}
	r, err := c.Resolve()
	if err != nil {
		return r, err
	}
	return r, checkSynth(r)
}
