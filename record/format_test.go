package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/synth"
	"github.com/densitykv/densitykv/synth/synthtest"
)

// The small stream, its generator and the bit comparison of these tests.
var (
	smallConfig = synthtest.SmallConfig
	mustGen     = synthtest.MustGen
	equal       = synthtest.Equal
)

func writeStream(t testing.TB, c synth.Config, d DType) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Layout: c.Layout, DType: d, Blocks: c.Blocks, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Copy(w, mustGen(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if n != c.Blocks {
		t.Fatalf("copied %d blocks, want %d", n, c.Blocks)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFileRoundTrip(t *testing.T) {
	c := smallConfig()
	infos, want := synthtest.ReadAll(t, mustGen(t, c))
	for _, d := range []DType{Float32, BFloat16} {
		data := writeStream(t, c, d)
		r, err := NewFileReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if r.Layout() != c.Layout || r.Blocks() != c.Blocks || r.Header().Source != "test" {
			t.Fatalf("%s: header %+v", d, r.Header())
		}
		ginfos, got := synthtest.ReadAll(t, r)
		if len(got) != len(want) {
			t.Fatalf("%s: %d blocks, want %d", d, len(got), len(want))
		}
		for b := range want {
			if ginfos[b].Index != infos[b].Index || ginfos[b].LatentShape != infos[b].LatentShape || !equal(ginfos[b].Latent, infos[b].Latent) {
				t.Fatalf("%s: block %d info differs", d, b)
			}
			for l := range want[b] {
				for i, pair := range [][2][]float32{{got[b][l].Q, want[b][l].Q}, {got[b][l].K, want[b][l].K}, {got[b][l].V, want[b][l].V}} {
					for j := range pair[1] {
						g, w := pair[0][j], pair[1][j]
						if d == Float32 && math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("f32 block %d layer %d tensor %d value %d: %v != %v", b, l, i, j, g, w)
						}
						if d == BFloat16 && math.Abs(float64(g-w)) > math.Abs(float64(w))/128 {
							t.Fatalf("bf16 block %d layer %d tensor %d value %d: %v vs %v", b, l, i, j, g, w)
						}
					}
				}
			}
		}
	}
}

func TestFileReaderSkipsLayers(t *testing.T) {
	c := smallConfig()
	_, want := synthtest.ReadAll(t, mustGen(t, c))
	r, err := NewFileReader(bytes.NewReader(writeStream(t, c, Float32)))
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < c.Blocks; b++ {
		if _, err := r.NextBlock(); err != nil {
			t.Fatal(err)
		}
		if b%2 == 0 {
			continue // read nothing of this block
		}
		_, k, _, err := r.Layer(1)
		if err != nil {
			t.Fatal(err)
		}
		if !equal(k, want[b][1].K) {
			t.Fatalf("block %d layer 1 differs after skipping", b)
		}
	}
	if _, err := r.NextBlock(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

func TestFileCorruption(t *testing.T) {
	c := smallConfig()
	data := writeStream(t, c, BFloat16)
	for name, mut := range map[string]func([]byte) []byte{
		"flip payload byte": func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b },
		"truncate":          func(b []byte) []byte { return b[:len(b)-100] },
		"drop end record":   func(b []byte) []byte { return b[:len(b)-13] },
		"bad magic":         func(b []byte) []byte { b[0] = 'X'; return b },
	} {
		b := mut(append([]byte(nil), data...))
		err := func() error {
			r, err := NewFileReader(bytes.NewReader(b))
			if err != nil {
				return err
			}
			for {
				if _, err := r.NextBlock(); err != nil {
					if err == io.EOF {
						return nil
					}
					return err
				}
				for l := 0; l < c.Layout.Layers; l++ {
					if _, _, _, err := r.Layer(l); err != nil {
						return err
					}
				}
			}
		}()
		if err == nil || !strings.HasPrefix(err.Error(), "record: ") {
			t.Errorf("%s: error %v, want a synth error", name, err)
		}
	}
}

func TestWriterMisuse(t *testing.T) {
	l := smallConfig().Layout
	n := l.TokensPerBlock() * l.Heads * l.HeadDim
	x := make([]float32, n)
	w, err := NewWriter(io.Discard, Header{Layout: l, Blocks: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteLayer(0, x, x, x); err == nil {
		t.Error("layer before block accepted")
	}
	if err := w.BeginBlock(0, nil, [4]int{}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteLayer(1, x, x, x); err == nil {
		t.Error("layer 1 before layer 0 accepted")
	}
	if err := w.WriteLayer(0, x[:1], x, x); err == nil {
		t.Error("short q accepted")
	}
	if err := w.BeginBlock(1, nil, [4]int{}); err == nil {
		t.Error("new block with missing layers accepted")
	}
	if err := w.Close(); err == nil {
		t.Error("close with an incomplete block accepted")
	}
	for i := 0; i < l.Layers; i++ {
		if err := w.WriteLayer(i, x, x, x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.BeginBlock(5, nil, [4]int{}); err == nil {
		t.Error("block 5 after block 0 accepted")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewWriter(io.Discard, Header{Layout: l, DType: "f16"}); err == nil {
		t.Error("dtype f16 accepted")
	}
}

func TestBF16(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{{0, 0}, {1, 0x3f80}, {-2, 0xc000}, {1.00390625, 0x3f80}, {1.01171875, 0x3f82}, {float32(math.Inf(1)), 0x7f80}} {
		if got := ToBF16(tc.in); got != tc.want {
			t.Errorf("ToBF16(%v) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
	if x := FromBF16(ToBF16(float32(math.NaN()))); x == x {
		t.Error("NaN did not survive bf16")
	}
}

// fakePolicy counts calls and returns an empty context.
type fakePolicy struct {
	layout       memory.Layout
	begins, ends int
	attends      int
}

func (f *fakePolicy) Name() string              { return "fake" }
func (f *fakePolicy) Layout() memory.Layout     { return f.layout }
func (f *fakePolicy) Begin(c memory.Call) error { f.begins++; return nil }
func (f *fakePolicy) End() error                { f.ends++; return nil }
func (f *fakePolicy) Bytes() int64              { return 7 }
func (f *fakePolicy) Attend(layer int, q, k, v []float32) (memory.Context, error) {
	f.attends++
	return memory.Context{Q: q}, nil
}

func TestRecorder(t *testing.T) {
	c := smallConfig()
	g := mustGen(t, c)
	_, want := synthtest.ReadAll(t, mustGen(t, c))
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Layout: c.Layout, Blocks: -1})
	if err != nil {
		t.Fatal(err)
	}
	inner := &fakePolicy{layout: c.Layout}
	rec, err := NewRecorder(inner, w)
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < c.Blocks; b++ {
		info, err := g.NextBlock()
		if err != nil {
			t.Fatal(err)
		}
		// Two noisy passes (not recorded), then the clean pass.
		for step := 0; step <= 2; step++ {
			clean := step == 2
			if err := rec.Begin(memory.Call{Block: b, Step: step, Clean: clean, First: step == 0, Latent: info.Latent}); err != nil {
				t.Fatal(err)
			}
			for l := 0; l < c.Layout.Layers; l++ {
				q, k, v := want[b][l].Q, want[b][l].K, want[b][l].V
				if step == 0 { // a noisy pass sees other projections
					var err error
					if q, k, v, err = g.Layer(l); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := rec.Attend(l, q, k, v); err != nil {
					t.Fatal(err)
				}
			}
			if err := rec.End(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if inner.begins != 3*c.Blocks || inner.attends != 3*c.Blocks*c.Layout.Layers || rec.Bytes() != 7 || rec.Name() != "fake" {
		t.Fatalf("inner policy saw begins %d attends %d", inner.begins, inner.attends)
	}
	r, err := NewFileReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	infos, got := synthtest.ReadAll(t, r)
	if len(got) != c.Blocks {
		t.Fatalf("recorded %d blocks, want %d", len(got), c.Blocks)
	}
	for b := range got {
		if infos[b].LatentShape != [4]int{c.Layout.FramesPerBlock, c.Channels, 2 * c.Layout.Height, 2 * c.Layout.Width} {
			t.Fatalf("block %d latent shape %v", b, infos[b].LatentShape)
		}
		for l := range got[b] {
			if !equal(got[b][l].K, want[b][l].K) || !equal(got[b][l].V, want[b][l].V) {
				t.Fatalf("block %d layer %d: recording differs from the clean pass", b, l)
			}
		}
	}
	if _, err := NewRecorder(&fakePolicy{layout: memory.DefaultLayout()}, w); err == nil {
		t.Error("layout mismatch accepted")
	}
}

func FuzzFileReader(f *testing.F) {
	c := smallConfig() // tiny seeds keep the fuzzer fast
	c.Layout = memory.Layout{Height: 2, Width: 2, FramesPerBlock: 1, Layers: 2, Heads: 1, HeadDim: 6}
	c.Blocks = 2
	f.Add(writeStream(f, c, Float32))
	f.Add(writeStream(f, c, BFloat16))
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewFileReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		for i := 0; i < 100; i++ {
			if _, err := r.NextBlock(); err != nil {
				if !errors.Is(err, io.EOF) && !strings.HasPrefix(err.Error(), "record: ") {
					t.Fatalf("unprefixed error %v", err)
				}
				return
			}
			for l := 0; l < r.Layout().Layers; l++ {
				if _, _, _, err := r.Layer(l); err != nil {
					return
				}
			}
		}
	})
}

// TestResumeWriter writes part of a stream, flushes (the resume point),
// closes it as a stopped run would, truncates back to the resume point and
// continues with ResumeWriter: the file equals a stream written in one go.
func TestResumeWriter(t *testing.T) {
	c := smallConfig()
	want := writeStream(t, c, Float32)
	h := Header{Layout: c.Layout, Blocks: c.Blocks, Source: "test"}
	for _, k := range []int{0, 2} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, h)
		if err != nil {
			t.Fatal(err)
		}
		g := mustGen(t, c)
		copyBlocks := func(w *Writer, n int) {
			for b := 0; b < n; b++ {
				info, err := g.NextBlock()
				if err != nil {
					t.Fatal(err)
				}
				if err := w.BeginBlock(info.Index, info.Latent, info.LatentShape); err != nil {
					t.Fatal(err)
				}
				for l := 0; l < c.Layout.Layers; l++ {
					q, k, v, _ := g.Layer(l)
					if err := w.WriteLayer(l, q, k, v); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		copyBlocks(w, k)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		at := buf.Len()
		if err := w.Close(); err != nil { // the stopped run ends its file
			t.Fatal(err)
		}
		buf.Truncate(at)
		r, err := ResumeWriter(&buf, h, 0, k)
		if err != nil {
			t.Fatal(err)
		}
		if k > 0 && r.BeginBlock(k+1, nil, [4]int{}) == nil {
			t.Fatal("resumed writer accepted a gap")
		}
		copyBlocks(r, c.Blocks-k)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("resumed after %d blocks: %d bytes differ from the %d of a stream written at once", k, buf.Len(), len(want))
		}
	}
	if _, err := ResumeWriter(io.Discard, h, 2, 1); err == nil {
		t.Fatal("resume with next < first accepted")
	}
}

// The header's attention budget round-trips, is optional (older streams
// have none), and a nonsensical one is refused on writing and on reading.
func TestHeaderBudget(t *testing.T) {
	l := memory.Layout{Height: 2, Width: 2, FramesPerBlock: 1, Layers: 1, Heads: 1, HeadDim: 4}
	for _, b := range []*Budget{nil, {SinkFrames: 1, CacheFrames: 12, WindowFrames: 5, Capacity: 24}} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, Header{Layout: l, Blocks: 0, Memory: b})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := NewFileReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Header().Memory; (got == nil) != (b == nil) || (b != nil && *got != *b) {
			t.Errorf("budget %+v read back as %+v", b, got)
		}
	}
	for _, b := range []Budget{{SinkFrames: 1, CacheFrames: 12, WindowFrames: 5, Capacity: 0}, {SinkFrames: -1, CacheFrames: 12, WindowFrames: 5, Capacity: 3},
		{SinkFrames: 1, CacheFrames: 0, WindowFrames: 5, Capacity: 3}, {SinkFrames: 1, CacheFrames: 12, WindowFrames: 5, Capacity: 1 << 31}} {
		if _, err := NewWriter(io.Discard, Header{Layout: l, Memory: &b}); err == nil || !strings.Contains(err.Error(), "memory budget") {
			t.Errorf("budget %+v: error %v", b, err)
		}
		var buf bytes.Buffer
		js, err := json.Marshal(Header{Layout: l, DType: Float32, Memory: &b})
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString(Magic)
		buf.Write([]byte{byte(len(js)), byte(len(js) >> 8), 0, 0})
		buf.Write(js)
		if _, err := NewFileReader(&buf); err == nil || !strings.Contains(err.Error(), "memory budget") {
			t.Errorf("reading budget %+v: error %v", b, err)
		}
	}
}
