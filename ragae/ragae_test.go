package ragae

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/torchtest"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/ragae/aetest"
)

var _ memory.Describer = (*Describer)(nil)

// tinyAE is a random autoencoder state dict with the authors' key names
// (aetest.StateDict).
func tinyAE(cfg Config, seed uint64) torchtest.Dict { return aetest.StateDict(testCfg(cfg), seed) }

func configDict(c Config) torchtest.Dict { return aetest.ConfigDict(testCfg(c)) }

func testCfg(c Config) aetest.Config {
	return aetest.Config{InChannels: c.InChannels, SpatialH: c.SpatialH, SpatialW: c.SpatialW, LatentDim: c.LatentDim, HiddenDims: c.HiddenDims}
}

func writeAE(t *testing.T, name string, top torchtest.Dict) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, torchtest.Bytes(top, torchtest.Options{}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ---- float64 reference, written from the layer definitions (direct
// convolution loops, no im2col, no gemm)

func refConv(x []float64, in, h, w int, wt, b []float32, out, stride int) ([]float64, int, int) {
	ho, wo := (h+2-3)/stride+1, (w+2-3)/stride+1
	y := make([]float64, out*ho*wo)
	for o := 0; o < out; o++ {
		for oy := 0; oy < ho; oy++ {
			for ox := 0; ox < wo; ox++ {
				s := float64(b[o])
				for c := 0; c < in; c++ {
					for ky := 0; ky < 3; ky++ {
						for kx := 0; kx < 3; kx++ {
							iy, ix := oy*stride+ky-1, ox*stride+kx-1
							if iy < 0 || iy >= h || ix < 0 || ix >= w {
								continue
							}
							s += float64(wt[((o*in+c)*3+ky)*3+kx]) * x[(c*h+iy)*w+ix]
						}
					}
				}
				y[(o*ho+oy)*wo+ox] = s
			}
		}
	}
	return y, ho, wo
}

func refGNSiLU(x []float64, ch, groups, P int, g, b []float32) []float64 {
	y := make([]float64, len(x))
	cpg := ch / groups
	for gi := 0; gi < groups; gi++ {
		var m, v float64
		vals := x[gi*cpg*P : (gi+1)*cpg*P]
		for _, a := range vals {
			m += a
		}
		m /= float64(len(vals))
		for _, a := range vals {
			v += (a - m) * (a - m)
		}
		v /= float64(len(vals))
		for i, a := range vals {
			c := gi*cpg + i/P
			z := (a-m)/math.Sqrt(v+1e-5)*float64(g[c]) + float64(b[c])
			y[gi*cpg*P+i] = z / (1 + math.Exp(-z))
		}
	}
	return y
}

func refEncode(sd map[string]*torchtest.Tensor, cfg Config, lat []float32, h, w int) []float64 {
	x := make([]float64, len(lat))
	for i, v := range lat {
		x[i] = float64(v)
	}
	d := func(k string) []float32 { return sd[k].Data }
	groups := func(c int) int { // _num_groups(c, 32)
		for _, g := range []int{32, 16, 8, 4, 1} {
			if c%g == 0 {
				return g
			}
		}
		return 1
	}
	ch := cfg.InChannels
	for i, hd := range cfg.HiddenDims {
		p := func(m int, s string) string { return fmt.Sprintf("encoder.conv_stack.%d.%s", m, s) }
		x, h, w = refConv(x, ch, h, w, d(p(4*i, "weight")), d(p(4*i, "bias")), hd, 2)
		x = refGNSiLU(x, hd, groups(hd), h*w, d(p(4*i+1, "weight")), d(p(4*i+1, "bias")))
		t := refGNSiLU(x, hd, groups(hd), h*w, d(p(4*i+3, "block.0.weight")), d(p(4*i+3, "block.0.bias")))
		t, _, _ = refConv(t, hd, h, w, d(p(4*i+3, "block.2.weight")), d(p(4*i+3, "block.2.bias")), hd, 1)
		t = refGNSiLU(t, hd, groups(hd), h*w, d(p(4*i+3, "block.3.weight")), d(p(4*i+3, "block.3.bias")))
		t, _, _ = refConv(t, hd, h, w, d(p(4*i+3, "block.5.weight")), d(p(4*i+3, "block.5.bias")), hd, 1)
		for j := range x {
			x[j] += t[j]
		}
		ch = hd
	}
	x = refGNSiLU(x, ch, groups(ch), h*w, d("encoder.final_norm.0.weight"), d("encoder.final_norm.0.bias"))
	pooled := make([]float64, ch)
	for c := range pooled {
		for _, v := range x[c*h*w : (c+1)*h*w] {
			pooled[c] += v
		}
		pooled[c] /= float64(h * w)
	}
	out := make([]float64, cfg.LatentDim)
	var n float64
	for j := range out {
		s := float64(d("encoder.fc.bias")[j])
		for c := 0; c < ch; c++ {
			s += float64(d("encoder.fc.weight")[j*ch+c]) * pooled[c]
		}
		out[j] = s
		n += s * s
	}
	for j := range out {
		out[j] /= math.Max(math.Sqrt(n), 1e-12)
	}
	return out
}

func stateDict(d torchtest.Dict) checkpoint.StateDict {
	sd := checkpoint.StateDict{}
	for k, v := range tensors(d) {
		sd[k] = &checkpoint.Tensor{Shape: v.Shape, Data: v.Data}
	}
	return sd
}

func tensors(d torchtest.Dict) map[string]*torchtest.Tensor {
	m := map[string]*torchtest.Tensor{}
	for _, e := range d {
		m[e.Key] = e.Value.(*torchtest.Tensor)
	}
	return m
}

func TestNumGroups(t *testing.T) {
	for c, want := range map[int]int{64: 32, 128: 32, 256: 32, 48: 16, 24: 8, 12: 4, 4: 4, 6: 1, 7: 1, 1: 1, 80: 16} {
		if got := numGroups(c); got != want {
			t.Errorf("numGroups(%d) = %d, want %d", c, got, want)
		}
	}
}

// A tiny random AE with the real key names, written as the authors' .pt
// ({"config", "model"}), encodes like the float64 reference on odd sizes
// (stride-2 padding at the edges), with several GroupNorm group counts
// (4 channels: 4 groups of 1; 12: 4 groups of 3; 48: 16 groups of 3;
// 64: 32 groups of 2).
func TestEncodeMatchesReference(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		h, w int
	}{
		{Config{InChannels: 3, SpatialH: 60, SpatialW: 104, LatentDim: 5, HiddenDims: []int{4, 12}}, 7, 9},
		{Config{InChannels: 16, SpatialH: 60, SpatialW: 104, LatentDim: 9, HiddenDims: []int{48, 64}}, 6, 8},
		{Config{InChannels: 2, SpatialH: 1, SpatialW: 1, LatentDim: 3, HiddenDims: []int{4, 4, 4}}, 1, 5},
	} {
		t.Run(fmt.Sprintf("%v_%dx%d", c.cfg.HiddenDims, c.h, c.w), func(t *testing.T) {
			sd := tinyAE(c.cfg, 7)
			path := writeAE(t, "ae_latent_mem.pt", torchtest.Dict{{Key: "config", Value: configDict(c.cfg)}, {Key: "model", Value: sd}})
			ae, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ae.Ignored, []string{"decoder.fc.weight"}) || ae.File != path {
				t.Fatalf("ignored %v, file %s", ae.Ignored, ae.File)
			}
			d, err := ae.ForLatent(c.cfg.InChannels, c.h, c.w)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(3, 4))
			for frame := 0; frame < 3; frame++ {
				lat := make([]float32, c.cfg.InChannels*c.h*c.w)
				for i := range lat {
					lat[i] = float32(r.NormFloat64()*2 + 0.3)
				}
				got, err := d.Describe(frame, lat, nil)
				if err != nil {
					t.Fatal(err)
				}
				want := refEncode(tensors(sd), c.cfg, lat, c.h, c.w)
				if len(got) != c.cfg.LatentDim || d.Dim() != c.cfg.LatentDim {
					t.Fatalf("descriptor of %d values, want %d", len(got), c.cfg.LatentDim)
				}
				for i := range want {
					if math.Abs(float64(got[i])-want[i]) > 2e-5 {
						t.Fatalf("frame %d: descriptor %v, float64 reference %v", frame, got, want)
					}
				}
			}
		})
	}
}

// TestEncodeKnownAnswer is checked by hand. Every convolution weight is
// zero and every GroupNorm has one channel per group (4 channels: 4
// groups), so each stage's maps are constant per channel and every
// GroupNorm outputs its bias β; the residual adds the last conv's bias.
// Only the final norm and fc reach the output: pooled = SiLU(β_final) =
// SiLU([0, 1, −1, 2]) = [0, 0.7310586, −0.2689414, 1.7615942];
// fc = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1]] with bias [3, 0, −1]
// gives [3, 0.7310586, 0.7615942], whose norm is
// √(9 + 0.5344466 + 0.5800257) = 3.1803258, so the descriptor is
// [0.9432996, 0.2298691, 0.2394705].
func TestEncodeKnownAnswer(t *testing.T) {
	cfg := Config{InChannels: 2, LatentDim: 3, HiddenDims: []int{4}}
	sd := tinyAE(cfg, 1)
	for _, e := range sd {
		tt := e.Value.(*torchtest.Tensor)
		if len(tt.Shape) == 4 {
			clear(tt.Data) // conv weights
		}
		switch e.Key {
		case "encoder.final_norm.0.bias":
			copy(tt.Data, []float32{0, 1, -1, 2})
		case "encoder.fc.weight":
			copy(tt.Data, []float32{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1})
		case "encoder.fc.bias":
			copy(tt.Data, []float32{3, 0, -1})
		}
	}
	path := writeAE(t, "ae.pt", torchtest.Dict{{Key: "config", Value: configDict(cfg)}, {Key: "model", Value: sd}})
	ae, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := ae.ForLatent(2, 5, 3)
	lat := make([]float32, 2*5*3)
	for i := range lat {
		lat[i] = float32(i%7) - 2
	}
	got, err := d.Encode(lat)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.9432996, 0.2298691, 0.2394705}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-6 {
			t.Fatalf("descriptor %v, want %v", got, want)
		}
	}
}

// The authors' loader fills missing config fields with AEConfig's
// defaults and drops unknown ones.
func TestConfigDefaults(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LatentDim, cfg.HiddenDims = 4, []int{8}
	path := writeAE(t, "ae.pt", torchtest.Dict{{Key: "config", Value: torchtest.Dict{
		{Key: "latent_dim", Value: 4}, {Key: "hidden_dims", Value: torchtest.List{8}}, {Key: "delta_weight", Value: 0.0}}},
		{Key: "model", Value: tinyAE(cfg, 2)}})
	ae, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if ae.Config.InChannels != 16 || ae.Config.SpatialH != 60 || ae.Config.SpatialW != 104 || ae.Config.LatentDim != 4 {
		t.Fatalf("config %+v", ae.Config)
	}
	if _, err := ae.ForLatent(3, 6, 8); err == nil || !strings.Contains(err.Error(), "reads 16 latent channels (config in_channels), the model's latents have 3") {
		t.Fatalf("channel mismatch: %v", err)
	}
}

// Bad files are errors naming the file and the tensor or field, before
// any frame is encoded.
func TestLoadErrors(t *testing.T) {
	cfg := Config{InChannels: 3, LatentDim: 5, HiddenDims: []int{4, 8}}
	good := func() torchtest.Dict { return tinyAE(cfg, 5) }
	edit := func(f func(torchtest.Dict) torchtest.Dict) torchtest.Dict {
		return torchtest.Dict{{Key: "config", Value: configDict(cfg)}, {Key: "model", Value: f(good())}}
	}
	drop := func(key string) func(torchtest.Dict) torchtest.Dict {
		return func(d torchtest.Dict) torchtest.Dict {
			return slices.DeleteFunc(d, func(e torchtest.KV) bool { return e.Key == key })
		}
	}
	set := func(key string, v *torchtest.Tensor) func(torchtest.Dict) torchtest.Dict {
		return func(d torchtest.Dict) torchtest.Dict {
			for i := range d {
				if d[i].Key == key {
					d[i].Value = v
				}
			}
			return d
		}
	}
	nan := &torchtest.Tensor{Shape: []int{8}, Data: []float32{0, 0, float32(math.NaN()), 0, 0, 0, 0, 0}}
	for _, c := range []struct {
		name string
		top  torchtest.Dict
		msg  string
	}{
		{"missing", edit(drop("encoder.fc.bias")), "tensor encoder.fc.bias missing (want shape [5])"},
		{"missing res conv", edit(drop("encoder.conv_stack.7.block.5.weight")), "tensor encoder.conv_stack.7.block.5.weight missing (want shape [8 8 3 3])"},
		{"shape", edit(set("encoder.conv_stack.4.weight", &torchtest.Tensor{Shape: []int{8, 3, 3, 3}, Data: make([]float32, 216)})),
			"tensor encoder.conv_stack.4.weight has shape [8 3 3 3], want [8 4 3 3]"},
		{"nan", edit(set("encoder.final_norm.0.weight", nan)), "tensor encoder.final_norm.0.weight has NaN at index 2"},
		{"extra encoder", edit(func(d torchtest.Dict) torchtest.Dict {
			return append(d, torchtest.KV{Key: "encoder.conv_stack.8.weight", Value: &torchtest.Tensor{Shape: []int{1}, Data: []float32{1}}})
		}), "unexpected encoder tensor encoder.conv_stack.8.weight"},
		{"no config", torchtest.Dict{{Key: "model", Value: good()}}, `no entry "config" (have model)`},
		{"no model", torchtest.Dict{{Key: "config", Value: configDict(cfg)}}, `no entry "model"`},
		{"config type", torchtest.Dict{{Key: "config", Value: torchtest.Dict{{Key: "hidden_dims", Value: 64}}}, {Key: "model", Value: good()}},
			"config hidden_dims is 64, not a list of integers"},
		{"config value", torchtest.Dict{{Key: "config", Value: torchtest.Dict{{Key: "latent_dim", Value: 0}}}, {Key: "model", Value: good()}},
			"latent_dim 0 outside [1, 65536]"},
		{"config name", torchtest.Dict{{Key: "config", Value: torchtest.Dict{{Key: "in_channels", Value: "16"}}}, {Key: "model", Value: good()}},
			"config in_channels is 16, not an integer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeAE(t, "bad_ae.pt", c.top)
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), path) || !strings.HasPrefix(err.Error(), "ragae: ") {
				t.Fatalf("error %v, want one naming %s and %q", err, path, c.msg)
			}
		})
	}
	// A truncated file.
	path := writeAE(t, "ae.pt", edit(func(d torchtest.Dict) torchtest.Dict { return d }))
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)*2/3], 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.pt")); err == nil || !strings.Contains(err.Error(), "none.pt") {
		t.Fatalf("missing file: %v", err)
	}
}

// Frames of the wrong size or with NaN are errors naming the frame; the
// descriptor is the same bits whatever gemm's thread count.
func TestDescribeInputs(t *testing.T) {
	cfg := Config{InChannels: 2, LatentDim: 6, HiddenDims: []int{4, 8}}
	ae, err := fromStateDict(cfg, stateDict(tinyAE(cfg, 9)))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := ae.ForLatent(2, 10, 12)
	if _, err := d.Describe(4, make([]float32, 2*10*12-1), nil); err == nil || !strings.Contains(err.Error(), "frame 4: latent has 239 values, want 2 channels × 10 × 12 = 240") {
		t.Fatalf("short latent: %v", err)
	}
	lat := make([]float32, 240)
	for i := range lat {
		lat[i] = float32(math.Sin(float64(i)))
	}
	lat[130] = float32(math.Inf(1))
	if _, err := d.Describe(5, lat, nil); err == nil || !strings.Contains(err.Error(), "frame 5: latent has +Inf at index 130 (channel 1)") {
		t.Fatalf("Inf latent: %v", err)
	}
	lat[130] = 0.5
	prev := gemm.SetThreads(1)
	one, _ := d.Encode(lat)
	gemm.SetThreads(4)
	four, _ := d.Encode(lat)
	gemm.SetThreads(prev)
	if !slices.Equal(one, four) {
		t.Fatalf("1 thread %v, 4 threads %v", one, four)
	}
	if _, err := ae.ForLatent(2, 0, 3); err == nil {
		t.Fatal("empty latent size accepted")
	}
}

// FuzzLoad: any file is loaded or refused with an error, never a panic;
// what loads encodes a frame to a finite unit-norm (or zero) descriptor.
func FuzzLoad(f *testing.F) {
	cfg := Config{InChannels: 2, LatentDim: 3, HiddenDims: []int{4}}
	f.Add(torchtest.Bytes(torchtest.Dict{{Key: "config", Value: configDict(cfg)}, {Key: "model", Value: tinyAE(cfg, 1)}}, torchtest.Options{}))
	f.Add(torchtest.Bytes(torchtest.Dict{{Key: "config", Value: torchtest.Dict{{Key: "hidden_dims", Value: torchtest.List{}}}}}, torchtest.Options{}))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "fuzz.pt")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ae, err := Load(path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ragae: ") {
				t.Fatalf("error without the package prefix: %v", err)
			}
			return
		}
		d, err := ae.ForLatent(ae.Config.InChannels, 3, 2)
		if err != nil {
			t.Fatal(err)
		}
		out, err := d.Encode(make([]float32, ae.Config.InChannels*6))
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, v := range out {
			n += float64(v) * float64(v)
		}
		if math.IsNaN(n) || n > 1+1e-5 {
			t.Fatalf("descriptor norm² %v", n)
		}
	})
}

// TestTorchSavedAE reads testdata/ae_tiny.pt, written by torch.save
// (PyTorch 1.13) from nn modules built as ae/model.py describes them, and
// encodes the two frames of ae_tiny.json to PyTorch's own encode()
// output (see testdata/README.md).
func TestTorchSavedAE(t *testing.T) {
	var ref struct {
		Shape      []int       `json:"shape"`
		Latent     []float32   `json:"latent"`
		Descriptor [][]float64 `json:"descriptor"`
	}
	b, err := os.ReadFile(filepath.Join("testdata", "ae_tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	ae, err := Load(filepath.Join("testdata", "ae_tiny.pt"))
	if err != nil {
		t.Fatal(err)
	}
	if c := ae.Config; c.InChannels != 4 || c.LatentDim != 6 || !slices.Equal(c.HiddenDims, []int{8, 16}) || c.SpatialH != 60 || c.SpatialW != 104 {
		t.Fatalf("config %+v", c)
	}
	if !slices.Equal(ae.Ignored, []string{"decoder.0.bias", "decoder.0.weight"}) {
		t.Fatalf("ignored %v", ae.Ignored)
	}
	d, err := ae.ForLatent(ref.Shape[1], ref.Shape[2], ref.Shape[3])
	if err != nil {
		t.Fatal(err)
	}
	n := ref.Shape[1] * ref.Shape[2] * ref.Shape[3]
	for f := range ref.Shape[0] {
		got, err := d.Encode(ref.Latent[f*n : (f+1)*n])
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range ref.Descriptor[f] {
			if math.Abs(float64(got[i])-w) > 1e-6 { // measured: within 6e-8
				t.Fatalf("frame %d: descriptor %v, PyTorch %v", f, got, ref.Descriptor[f])
			}
		}
	}
}

// BenchmarkEncode encodes one paper-size latent frame (16 × 60 × 104) with
// the authors' default architecture (hidden_dims 64, 128, 256; latent_dim
// 1,024) and random weights.
func BenchmarkEncode(b *testing.B) {
	cfg := DefaultConfig()
	ae, err := fromStateDict(cfg, stateDict(tinyAE(cfg, 1)))
	if err != nil {
		b.Fatal(err)
	}
	d, _ := ae.ForLatent(16, 60, 104)
	lat := make([]float32, 16*60*104)
	for i := range lat {
		lat[i] = float32(math.Sin(float64(i) * 0.37))
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := d.Encode(lat); err != nil {
			b.Fatal(err)
		}
	}
}
