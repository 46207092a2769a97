package vae

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/torchtest"
)

// tinyModel is a random model of the tiny golden configuration.
func tinyModel(t testing.TB, z int) *Model {
	t.Helper()
	m, err := Random(TinyConfig(z), 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tinyStats are latent statistics for z channels.
func tinyStats(z int) Options {
	o := Options{Mean: make([]float32, z), Std: make([]float32, z)}
	for i := range o.Mean {
		o.Mean[i], o.Std[i] = 0.2*float32(i%3)-0.2, 0.75+0.5*float32(i%2)
	}
	return o
}

// TestStreamEqualsWhole checks, on random latents, that every chunking of a
// stream gives the whole-video decode bit for bit, and that the result does
// not depend on the number of threads.
func TestStreamEqualsWhole(t *testing.T) {
	m := tinyModel(t, 4)
	const T, h, w = 5, 2, 3
	z := randLatents(T*4*h*w, 1)
	whole, err := m.Decode(z, T, 4, h, w, tinyStats(4))
	if err != nil {
		t.Fatal(err)
	}
	if F := len(whole) / 3 / (h * 8 * w * 8); F != 1+4*(T-1) {
		t.Fatalf("%d frames, want %d", F, 1+4*(T-1))
	}
	for _, sizes := range [][]int{{1, 1, 1, 1, 1}, {3, 2}, {1, 4}} {
		got, err := decodeChunks(m, tinyStats(4), z, sizes, 4, h, w)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, whole) {
			t.Errorf("chunks %v differ from the whole decode", sizes)
		}
	}
	for _, th := range []int{1, 3} {
		prev := gemm.SetThreads(th)
		got, err := m.Decode(z, T, 4, h, w, tinyStats(4))
		gemm.SetThreads(prev)
		if err != nil || !slices.Equal(got, whole) {
			t.Errorf("%d threads: the decode differs (%v)", th, err)
		}
	}
	for _, v := range whole {
		if !(v >= -1 && v <= 1) {
			t.Fatalf("value %v outside [-1, 1]", v)
		}
	}
}

// FuzzChunking decodes a stream in fuzzer-chosen chunks (each byte a
// chunk of 1 + b%4 latent frames) and requires the whole-video decode.
func FuzzChunking(f *testing.F) {
	f.Add([]byte{2, 0, 1})
	f.Add([]byte{0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 3})
	m := tinyModel(f, 4)
	const h, w = 2, 2
	z := randLatents(16*4*h*w, 2)
	wholes := map[int][]float32{}
	f.Fuzz(func(t *testing.T, b []byte) {
		var sizes []int
		T := 0
		for _, c := range b {
			if T+1+int(c%4) > 16 {
				break
			}
			sizes = append(sizes, 1+int(c%4))
			T += sizes[len(sizes)-1]
		}
		if T == 0 {
			return
		}
		zz := z[:T*4*h*w]
		whole, ok := wholes[T]
		if !ok {
			var err error
			if whole, err = m.Decode(zz, T, 4, h, w, tinyStats(4)); err != nil {
				t.Fatal(err)
			}
			wholes[T] = whole
		}
		got, err := decodeChunks(m, tinyStats(4), zz, sizes, 4, h, w)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, whole) {
			t.Fatalf("chunks %v differ from the whole decode", sizes)
		}
	})
}

// TestDecodeBadInput feeds bad chunks in the middle of a stream: each is an
// error naming the problem (wrapping ErrInput), and the stream then goes on
// exactly as if the bad chunk had never come.
func TestDecodeBadInput(t *testing.T) {
	m := tinyModel(t, 4)
	const h, w = 2, 3
	n := 4 * h * w
	z := randLatents(5*n, 4)
	want, err := m.Decode(z, 5, 4, h, w, tinyStats(4))
	if err != nil {
		t.Fatal(err)
	}
	nan := slices.Clone(z[2*n : 4*n])
	nan[n+7] = float32(math.NaN())
	inf := slices.Clone(z[2*n : 3*n])
	inf[n-1] = float32(math.Inf(-1))
	d, err := m.NewDecoder(tinyStats(4))
	if err != nil {
		t.Fatal(err)
	}
	first, err := d.Decode(z[:2*n], 2, 4, h, w)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		z          []float32
		t, c, h, w int
		msg        string
	}{
		{"empty", nil, 0, 4, h, w, "empty chunk"},
		{"channels", z[2*n : 3*n], 1, 8, h, w / 2, "8 channels, the model decodes z_dim = 4"},
		{"length", z[2*n : 3*n-1], 1, 4, h, w, "values for 1 frames"},
		{"size", z[2*n : 3*n], 1, 4, w, h, "differs from the stream's 2×3"},
		{"nan", nan, 2, 4, h, w, "latent frame 1 of the chunk (stream frame 3), channel 1, position (0, 1) is NaN"},
		{"inf", inf, 1, 4, h, w, "channel 3, position (1, 2) is -Inf"},
		{"side", make([]float32, 4*MaxLatentSide*2), 1, 4, 2, MaxLatentSide + 1, "outside [1, 4096]"},
		{"memory", nil, 1, 4, 4096, 4096, "need 788.5 GiB of feature caches, more than 64 GiB"},
	} {
		// All bad chunks go to one stream, between its two good chunks.
		_, err = d.Decode(c.z, c.t, c.c, c.h, c.w)
		if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.msg)
		}
		if d.LatentFrames() != 2 || d.PixelFrames() != 5 {
			t.Fatalf("%s: after the error: %d latent and %d pixel frames, want 2 and 5", c.name, d.LatentFrames(), d.PixelFrames())
		}
	}
	rest, err := d.Decode(z[2*n:], 3, 4, h, w)
	if err != nil {
		t.Fatal(err)
	}
	if got := concatFrames([][]float32{first, rest}, h*8*w*8); !slices.Equal(got, want) {
		t.Fatal("the stream changed after the bad chunks")
	}
	// The first chunk of a stream sets its size; Reset starts another.
	d, _ = m.NewDecoder(tinyStats(4))
	if _, err := d.Decode(z[:n], 1, 4, h, w); err != nil {
		t.Fatal(err)
	}
	d.Reset()
	if _, err := d.Decode(z[:n], 1, 4, w, h); err != nil || d.LatentFrames() != 1 {
		t.Fatalf("after Reset: %v", err)
	}
}

// TestEmitError stops a stream with a failing emit: the latent frames
// decoded so far stay consumed, and the stream continues from there.
func TestEmitError(t *testing.T) {
	m := tinyModel(t, 4)
	const h, w = 2, 2
	n := 4 * h * w
	z := randLatents(4*n, 5)
	want, err := m.Decode(z, 4, 4, h, w, tinyStats(4))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := m.NewDecoder(tinyStats(4))
	boom := errors.New("disk full")
	hw := h * 8 * w * 8
	var frames [][]float32
	err = d.DecodeFunc(z[:3*n], 3, 4, h, w, func(i int, rgb []float32) error {
		if i == 6 { // the second pixel frame of latent frame 2
			return boom
		}
		if i != len(frames) {
			t.Fatalf("frame %d out of order", i)
		}
		frames = append(frames, slices.Clone(rgb))
		return nil
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "pixel frame 6 (latent frame 2)") {
		t.Fatalf("error %v", err)
	}
	if d.LatentFrames() != 3 || d.PixelFrames() != 9 || len(frames) != 6 {
		t.Fatalf("%d latent, %d pixel frames, %d emitted", d.LatentFrames(), d.PixelFrames(), len(frames))
	}
	rest, err := d.Decode(z[3*n:], 1, 4, h, w)
	if err != nil {
		t.Fatal(err)
	}
	F := 13
	if !slices.Equal(rest, sliceFrames(want, F, 9, 13, hw)) {
		t.Fatal("the stream after the emit error differs")
	}
	for i, f := range frames {
		if !slices.Equal(f, sliceFrames(want, F, i, i+1, hw)) {
			t.Fatalf("emitted frame %d differs from the decode", i)
		}
	}
}

// TestOptions checks the latent statistics: Wan's by default (z_dim 16
// only), or the caller's, validated.
func TestOptions(t *testing.T) {
	m4 := tinyModel(t, 4)
	for _, c := range []struct {
		opt Options
		msg string
	}{
		{Options{}, "z_dim 4: pass its latent mean and std"},
		{Options{Mean: make([]float32, 3), Std: make([]float32, 4)}, "mean has 3 values and std 4, want z_dim = 4"},
		{Options{Mean: make([]float32, 4), Std: []float32{1, 0, 1, 1}}, "std[1] = 0 must be positive"},
		{Options{Mean: make([]float32, 4), Std: []float32{1, 1, -2, 1}}, "std[2] = -2 must be positive"},
		{Options{Mean: make([]float32, 4), Std: []float32{1, 1, 1, float32(math.NaN())}}, "std[3] = NaN"},
		{Options{Mean: []float32{0, float32(math.Inf(1)), 0, 0}, Std: []float32{1, 1, 1, 1}}, "mean[1] = +Inf is not finite"},
	} {
		if _, err := m4.NewDecoder(c.opt); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: error %v, want %q", c.opt, err, c.msg)
		}
	}
	m16 := tinyModel(t, 16)
	z := randLatents(16*2*2, 6)
	def, err := m16.Decode(z, 1, 16, 2, 2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mean, std := WanStats()
	explicit, err := m16.Decode(z, 1, 16, 2, 2, Options{Mean: mean, Std: std})
	if err != nil || !slices.Equal(def, explicit) {
		t.Fatalf("default statistics differ from WanStats (%v)", err)
	}
	std[0] *= 2
	other, _ := m16.Decode(z, 1, 16, 2, 2, Options{Mean: mean, Std: std})
	if slices.Equal(def, other) {
		t.Fatal("the statistics have no effect")
	}
	// WanStats are the float32 roundings of Wan's decimals.
	if mean[15] != float32(-0.2921) || std[15] != float32(1.9160) || len(mean) != 16 {
		t.Fatalf("WanStats %v %v", mean, std)
	}
}

// writeSafetensors writes a state dict (in Params order, then extras) as a
// safetensors file.
func writeSafetensors(t *testing.T, path string, ts []checkpoint.WriteTensor) {
	t.Helper()
	var b bytes.Buffer
	if err := checkpoint.WriteSafetensors(&b, ts, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func modelTensors(m *Model) []checkpoint.WriteTensor {
	var ts []checkpoint.WriteTensor
	for _, p := range m.Params() {
		ts = append(ts, checkpoint.WriteTensor{Name: p.Name, Shape: p.Shape, Data: slices.Clone(*p.Data)})
	}
	return ts
}

// TestLoad loads random models written as safetensors and PyTorch files,
// with and without encoder keys, and checks the errors for wrong keys,
// shapes, dtypes and values, which name the file and the tensor.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	m := tinyModel(t, 4)
	ts := modelTensors(m)
	z := randLatents(2*4*2*2, 7)
	want, _ := m.Decode(z, 2, 4, 2, 2, tinyStats(4))
	check := func(path string) {
		t.Helper()
		got, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Cfg.Equal(m.Cfg) || got.Slots() != 32 {
			t.Fatalf("%s: config %+v, %d slots", path, got.Cfg, got.Slots())
		}
		v, err := got.Decode(z, 2, 4, 2, 2, tinyStats(4))
		if err != nil || !slices.Equal(v, want) {
			t.Fatalf("%s: decode differs (%v)", path, err)
		}
	}
	p := filepath.Join(dir, "dec.safetensors")
	writeSafetensors(t, p, ts)
	check(p)
	// With encoder keys (ignored) in a PyTorch file.
	var top torchtest.Dict
	top = append(top, torchtest.KV{Key: "encoder.conv1.weight", Value: &torchtest.Tensor{Shape: []int{2, 3}, Data: make([]float32, 6)}},
		torchtest.KV{Key: "conv1.bias", Value: &torchtest.Tensor{Shape: []int{8}, Data: make([]float32, 8)}})
	for _, w := range ts {
		top = append(top, torchtest.KV{Key: w.Name, Value: &torchtest.Tensor{Shape: w.Shape, Data: w.Data.([]float32)}})
	}
	pt := filepath.Join(dir, "vae.pth")
	if err := os.WriteFile(pt, torchtest.Bytes(top, torchtest.Options{}), 0o644); err != nil {
		t.Fatal(err)
	}
	check(pt)

	edit := func(f func([]checkpoint.WriteTensor) []checkpoint.WriteTensor) []checkpoint.WriteTensor {
		c := slices.Clone(ts)
		return f(c)
	}
	idx := func(c []checkpoint.WriteTensor, name string) int {
		return slices.IndexFunc(c, func(w checkpoint.WriteTensor) bool { return w.Name == name })
	}
	for _, c := range []struct {
		name string
		ts   []checkpoint.WriteTensor
		msg  string
	}{
		{"missing", edit(func(c []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			return slices.Delete(c, idx(c, "decoder.upsamples.5.residual.6.bias"), idx(c, "decoder.upsamples.5.residual.6.bias")+1)
		}), "1 missing: decoder.upsamples.5.residual.6.bias"},
		{"unexpected", edit(func(c []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			return append(c, checkpoint.WriteTensor{Name: "decoder.middle.1.extra", Shape: []int{2}, Data: []float32{1, 2}})
		}), "1 unexpected: decoder.middle.1.extra"},
		{"shape", edit(func(c []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			i := idx(c, "decoder.middle.1.norm.gamma")
			c[i] = checkpoint.WriteTensor{Name: c[i].Name, Shape: []int{32, 1, 1, 1}, Data: c[i].Data}
			return c
		}), "decoder.middle.1.norm.gamma [32 1 1 1] (want [32 1 1])"},
		{"infer", edit(func(c []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			i := idx(c, "conv2.weight")
			return slices.Delete(c, i, i+1)
		}), "tensor conv2.weight missing"},
		{"dtype", edit(func(c []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			i := idx(c, "decoder.head.2.bias")
			c[i] = checkpoint.WriteTensor{Name: c[i].Name, Shape: []int{3}, Data: []int64{1, 2, 3}}
			return c
		}), "decoder.head.2.bias"},
		{"nan", edit(func(c []checkpoint.WriteTensor) []checkpoint.WriteTensor {
			i := idx(c, "decoder.upsamples.3.time_conv.weight")
			d := slices.Clone(c[i].Data.([]float32))
			d[17] = float32(math.Inf(1))
			c[i] = checkpoint.WriteTensor{Name: c[i].Name, Shape: c[i].Shape, Data: d}
			return c
		}), "parameter decoder.upsamples.3.time_conv.weight has +Inf at index 17"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name+".safetensors")
			writeSafetensors(t, p, c.ts)
			_, err := Load(p)
			if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %v, want one naming %q and the file", err, c.msg)
			}
		})
	}
	// A truncated file and a missing one.
	raw, _ := os.ReadFile(pt)
	tr := filepath.Join(dir, "trunc.pth")
	os.WriteFile(tr, raw[:len(raw)/2], 0o644)
	for _, p := range []string{tr, filepath.Join(dir, "none.pth")} {
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "vae: load") || !strings.Contains(err.Error(), filepath.Base(p)) {
			t.Errorf("%s: error %v", p, err)
		}
	}
}

// TestInferConfig checks the configuration read from the shapes: the real
// and tiny ones, and the errors for state dicts that are no VAE decoder.
func TestInferConfig(t *testing.T) {
	for _, cfg := range []Config{DefaultConfig(), TinyConfig(4), TinyConfig(16),
		{Dim: 4, ZDim: 3, DimMult: []int{1, 2}, NumResBlocks: 1, TemporalUpsample: []bool{true}}} {
		sd := checkpoint.StateDict{}
		for _, p := range build(cfg).Params() {
			sd[p.Name] = &checkpoint.Tensor{Shape: p.Shape}
		}
		got, err := InferConfig(sd)
		if err != nil || !got.Equal(cfg) {
			t.Errorf("%+v: inferred %+v, %v", cfg, got, err)
		}
	}
	base := func() checkpoint.StateDict {
		sd := checkpoint.StateDict{}
		for _, p := range build(TinyConfig(4)).Params() {
			sd[p.Name] = &checkpoint.Tensor{Shape: slices.Clone(p.Shape)}
		}
		return sd
	}
	for _, c := range []struct {
		edit func(checkpoint.StateDict)
		msg  string
	}{
		{func(sd checkpoint.StateDict) { delete(sd, "decoder.head.0.gamma") }, "decoder.head.0.gamma missing"},
		{func(sd checkpoint.StateDict) { sd["conv2.weight"].Shape = []int{4, 4} }, "conv2.weight has shape [4 4], want rank 5"},
		{func(sd checkpoint.StateDict) { sd["decoder.conv1.weight"].Shape[0] = 31 }, "decoder.conv1 has 31 outputs, want dim·dim_mult[-1] = 32"},
		{func(sd checkpoint.StateDict) { delete(sd, "decoder.upsamples.9.residual.2.weight") }, "decoder.upsamples.9 is neither"},
		{func(sd checkpoint.StateDict) {
			sd["decoder.upsamples.15.resample.1.weight"] = &checkpoint.Tensor{Shape: []int{4, 8, 3, 3}}
		}, "does not end with a residual block"},
		{func(sd checkpoint.StateDict) {
			for k := range sd {
				if strings.HasPrefix(k, "decoder.upsamples.14.") {
					delete(sd, k)
				}
			}
		}, "stages have [3 3 3 2] residual blocks"},
		{func(sd checkpoint.StateDict) { sd["decoder.upsamples.12.residual.6.weight"].Shape[0] = 12 }, "stage 3 width 12 is not a multiple of dim 8"},
		{func(sd checkpoint.StateDict) { sd["decoder.head.0.gamma"].Shape[0] = -1 }, "decoder.head.0.gamma has shape [-1 1 1 1]"},
	} {
		sd := base()
		c.edit(sd)
		if _, err := InferConfig(sd); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("error %v, want %q", err, c.msg)
		}
	}
}

// FuzzInferConfig builds state dicts with fuzzed shapes for the tensors
// InferConfig reads: it must return an error or a valid configuration,
// never panic, and FromStateDict must not panic either.
func FuzzInferConfig(f *testing.F) {
	f.Add(uint8(4), uint8(8), uint8(32), uint8(15), uint8(3), uint8(0))
	f.Add(uint8(0), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, z, dim, top, n, resample, drop uint8) {
		sd := checkpoint.StateDict{}
		for _, p := range build(TinyConfig(4)).Params() {
			sd[p.Name] = &checkpoint.Tensor{Shape: slices.Clone(p.Shape), Data: make([]float32, numel(p.Shape))}
		}
		sd["conv2.weight"].Shape[0] = int(z)
		sd["decoder.head.0.gamma"].Shape[0] = int(dim)
		sd["decoder.conv1.weight"].Shape[0] = int(top)
		for i := int(n); i < 15; i++ {
			for k := range sd {
				if strings.HasPrefix(k, fmt.Sprintf("decoder.upsamples.%d.", i)) {
					delete(sd, k)
				}
			}
		}
		if resample%5 != 0 {
			sd[fmt.Sprintf("decoder.upsamples.%d.resample.1.weight", resample%16)] = &checkpoint.Tensor{Shape: []int{8, 16, 3, 3}, Data: make([]float32, 8*16*9)}
		}
		if drop%7 == 1 {
			delete(sd, "decoder.upsamples.3.time_conv.weight")
		}
		cfg, err := InferConfig(sd)
		if err == nil {
			if err := cfg.Validate(); err != nil {
				t.Fatalf("inferred an invalid config %+v: %v", cfg, err)
			}
		}
		FromStateDict(sd)
	})
}

// TestRealConfig checks the real Wan2.1 decoder's layout against the
// parameter shapes the golden README lists, its 32 cache slots, and runs
// the random real-size model on a 1×1 latent.
func TestRealConfig(t *testing.T) {
	m := build(DefaultConfig())
	shapes := map[string][]int{}
	for _, e := range m.Expected() {
		shapes[e.Name] = e.Shape
	}
	for name, want := range map[string][]int{
		"decoder.conv1.weight":                   {384, 16, 3, 3, 3},
		"decoder.upsamples.3.time_conv.weight":   {768, 384, 3, 1, 1},
		"decoder.upsamples.4.shortcut.weight":    {384, 192, 1, 1, 1},
		"decoder.head.0.gamma":                   {96, 1, 1, 1},
		"decoder.head.2.weight":                  {3, 96, 3, 3, 3},
		"conv2.weight":                           {16, 16, 1, 1, 1},
		"decoder.middle.1.to_qkv.weight":         {1152, 384, 1, 1},
		"decoder.upsamples.11.resample.1.weight": {96, 192, 3, 3},
	} {
		if !slices.Equal(shapes[name], want) {
			t.Errorf("%s: %v, want %v", name, shapes[name], want)
		}
	}
	if m.Slots() != 32 || len(m.Decoder.Upsamples) != 15 || m.upsample3 != 2 {
		t.Errorf("%d slots, %d upsamples, %d upsample3d", m.Slots(), len(m.Decoder.Upsamples), m.upsample3)
	}
	if tiny := build(TinyConfig(4)); tiny.Slots() != 32 {
		t.Errorf("tiny: %d slots", tiny.Slots())
	}
	if n := m.NumParams(); n < 70e6 || n > 76e6 {
		t.Errorf("%d parameters", n)
	}
	rm, err := Random(DefaultConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	v, err := rm.Decode(randLatents(16, 1), 1, 16, 1, 1, Options{})
	if err != nil || len(v) != 3*8*8 {
		t.Fatalf("%d values, %v", len(v), err)
	}
	for _, x := range v {
		if !(x >= -1 && x <= 1) {
			t.Fatalf("value %v", x)
		}
	}
}

// TestUint8 checks the authors' byte conversion: truncation, not rounding.
func TestUint8(t *testing.T) {
	for _, c := range []struct {
		x    float32
		want uint8
	}{{-1, 0}, {1, 255}, {0, 127}, {2, 255}, {-3, 0}, {float32(math.NaN()), 0},
		{float32(math.Inf(1)), 255}, {2*(254.99/255) - 1, 254}, {2*(1.5/255) - 1, 1}, {-0.99, 1}} {
		if got := Uint8(c.x); got != c.want {
			t.Errorf("Uint8(%v) = %d, want %d", c.x, got, c.want)
		}
	}
	// Byte layout: [f][h][w][3] from [3][f][h][w].
	v := []float32{-1, 1, 0, 0.5, 1, -1, 0, 0, 1, 1, -1, -1} // 3 channels × 2 frames × 1×2
	got := VideoUint8(v, 2, 1, 2)
	want := []uint8{0, 255, 255, 255, 0, 255, 127, 127, 0, 191, 127, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("VideoUint8 %v, want %v", got, want)
	}
	frame := make([]uint8, 6)
	RGB24(frame, []float32{-1, 1, 0, 0.5, 1, -1}, 1, 2)
	if !bytes.Equal(frame, []uint8{0, 127, 255, 255, 191, 0}) {
		t.Fatalf("RGB24 %v", frame)
	}
}

// TestFrameMajor checks the layout conversion.
func TestFrameMajor(t *testing.T) {
	z := make([]float32, 2*3*2)
	for i := range z {
		z[i] = float32(i)
	}
	got := FrameMajor(z, 2, 3, 1, 2) // [2][3][1][2] → [3][2][1][2]
	want := []float32{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}
	if !slices.Equal(got, want) || !slices.Equal(channelFirst(got, 2, 3, 1, 2), z) {
		t.Fatalf("FrameMajor %v", got)
	}
}

// TestCacheBytes checks CacheBytes against the caches a decoder holds
// once its stream is under way, and that Bytes counts them.
func TestCacheBytes(t *testing.T) {
	m := tinyModel(t, 4)
	d, _ := m.NewDecoder(tinyStats(4))
	const h, w = 3, 2
	if _, err := d.Decode(randLatents(3*4*h*w, 1), 3, 4, h, w); err != nil {
		t.Fatal(err)
	}
	var held int64
	for _, s := range d.hist {
		for _, f := range s {
			held += int64(len(f.data)) * 4
		}
	}
	if want := m.CacheBytes(h, w); held != want || d.Bytes() < held {
		t.Fatalf("caches hold %d bytes, CacheBytes says %d, Bytes %d", held, want, d.Bytes())
	}
	if got := build(DefaultConfig()).CacheBytes(60, 104); got != 3777146880 { // 211,660,800 at 60×104 + 498,401,280 at 120×208 + 920,125,440 at 240×416 + 2,146,959,360 at 480×832
		t.Fatalf("real caches at 480×832: %d bytes", got)
	}
}
