package vae

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gemm/kerneltest"
	"github.com/densitykv/densitykv/golden"
)

// bf16U is bfloat16's unit roundoff (8 significant bits): rounding to
// nearest changes a value by at most 2^-8 of it.
const bf16U = 0x1p-8

// goldenTolBF16 is the bf16 decoder's tolerance against the float64
// goldens, relative L2 per tensor (every value also within
// 2·goldenTolBF16 of the tensor's largest magnitude).
//
// Derivation. A bf16 product rounds both operands: a term moves by at most
// (2u+u²) of itself, and a sum of many mixed-sign terms by a random
// amount of root-mean-square ≈ u·√(2/3) relative to the result. From the
// latents to a pixel, the decoder runs about 35 convolutions in sequence
// (conv2, conv1, two per residual block in 2 middle and 12 upsampling
// blocks, 2 time convs, 3 resample convs, the head), each of which adds
// such an error to what the norms pass on; independent errors add in
// quadrature, √35·u·√(2/3) ≈ 4.8u, partly damped by the norms and the
// clamp: the deepest tensors measure 3.3u (the head and the video), 2.5u
// and below elsewhere. 8u (≈ 0.031) leaves a factor 2.4; a wrong layout,
// offset or missing padding gives errors of order 1.
const goldenTolBF16 = 8 * bf16U

// TestGoldenVAEBF16 decodes decode_full in bf16 and compares every tensor
// with goldenTolBF16; the bf16 video must differ from the fp32 one (the
// rounding happened), and a decode in chunks must equal the whole-video
// decode bit for bit, as at fp32.
func TestGoldenVAEBF16(t *testing.T) {
	dir := golden.VAE(t)
	pth, _ := goldenModels(t, dir)
	got, video, side, err := fullDecodeAs(pth, dir, gemm.BF16)
	if err != nil {
		t.Fatal(err)
	}
	res, fails := compareFileTol(filepath.Join(dir, "decode_full.safetensors"), got, goldenTolBF16, 2*goldenTolBF16, 255)
	for _, f := range fails {
		t.Error(f)
	}
	worst := slices.MaxFunc(res, func(a, b cmp) int {
		if a.rel < b.rel {
			return -1
		}
		return 1
	})
	t.Logf("%d tensors; worst relative L2 %.3g = %.2fu (%s)", len(res), worst.rel, worst.rel/bf16U, worst.name)
	_, v32, _, err := fullDecodeOnce(pth, dir)
	if err != nil {
		t.Fatal(err)
	}
	var num, den float64
	for i := range video {
		d := float64(video[i]) - float64(v32[i])
		num, den = num+d*d, den+float64(v32[i])*float64(v32[i])
	}
	if rel := math.Sqrt(num / den); rel < bf16U/16 {
		t.Errorf("bf16 and fp32 videos differ by %.3g relative L2: is bf16 rounding at all?", rel)
	}
	mean, std, err := statsOf(side)
	if err != nil {
		t.Fatal(err)
	}
	z, c, tt, h, w, err := latentInput(filepath.Join(dir, "decode_full.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Mean: mean, Std: std, Precision: gemm.BF16}
	chunked, err := decodeChunks(pth, opt, z, []int{1, tt - 1}, c, h, w)
	if err != nil {
		t.Fatal(err)
	}
	if i := kerneltest.FirstDiff(chunked, video); i >= 0 {
		t.Fatalf("bf16 decode in chunks (without a trace) differs from the whole decode at %d: %v, %v", i, chunked[i], video[i])
	}
}

// absConv returns c with |weights|, zero bias.
func absConv(c *Conv) *Conv {
	a := *c
	a.Weight = make([]float32, len(c.Weight))
	for i, v := range c.Weight {
		a.Weight[i] = float32(math.Abs(float64(v)))
	}
	a.Bias = make([]float32, len(c.Bias))
	return &a
}

// TestConvBF16 checks the bf16 convolution against the float64 literal
// loops with a per-output bound derived from the roundings: weights and
// inputs rounded to bfloat16 move each term by at most (2u+u²)·|w·x|, so
//
//	|out − exact| ≤ (2u + u²)·Σ|w·x| + float32 accumulation (≤ 2^-20·Σ|w·x| here)
//
// over shapes whose tap groups need depth padding (Cin from 1), several
// groups, nil history frames, the fused upsampling and a residual; the
// result must not depend on the thread count.
func TestConvBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 17))
	kinds := []struct{ kt, k int }{{3, 3}, {3, 1}, {1, 1}, {1, 3}}
	e := engine{prec: gemm.BF16}
	for it := 0; it < 40; it++ {
		kd := kinds[it%len(kinds)]
		cin, cout := 1+r.IntN(40), 1+r.IntN(40)
		if it%7 == 0 {
			cin = 100 + r.IntN(200)
		}
		hs, ws := 1+r.IntN(6), 1+r.IntN(45)
		up := kd.kt == 1 && kd.k == 3 && r.IntN(2) == 0
		name := fmt.Sprintf("%d:%d→%d,%dx%dx%d,%dx%d,up=%v", it, cin, cout, kd.kt, kd.k, kd.k, hs, ws, up)
		c := randConv(cin, cout, kd.kt, kd.k, kd.k, uint64(it))
		c.packBF16()
		in := make([][]float32, kd.kt)
		abs := make([][]float32, kd.kt)
		for i := range in {
			if i == kd.kt-1 || r.IntN(3) > 0 {
				in[i] = randFrame(cin*hs*ws, uint64(100*it+i))
				abs[i] = make([]float32, len(in[i]))
				for j, v := range in[i] {
					abs[i][j] = float32(math.Abs(float64(v)))
				}
			}
		}
		ho, wo := hs, ws
		if up {
			ho, wo = 2*hs, 2*ws
		}
		var res []float32
		if r.IntN(2) == 0 {
			res = randFrame(cout*ho*wo, uint64(it+999))
		}
		want := naiveConv(c, in, hs, ws, up, res)
		mag := naiveConv(absConv(c), abs, hs, ws, up, nil)
		var ref []float32
		for _, th := range []int{1, 3} {
			prev := gemm.SetThreads(th)
			out := make([]float32, cout*ho*wo)
			for i := range out {
				out[i] = float32(math.NaN())
			}
			c.apply(&e, out, in, hs, ws, up, res)
			gemm.SetThreads(prev)
			if ref == nil {
				ref = out
			} else if i := kerneltest.FirstDiff(out, ref); i >= 0 {
				t.Fatalf("%s: output %d depends on the thread count", name, i)
			}
		}
		for i, w := range want {
			bound := (2*bf16U+bf16U*bf16U+0x1p-20)*mag[i] + 0x1p-22*math.Abs(w)
			if d := math.Abs(float64(ref[i]) - w); !(d <= bound) {
				t.Fatalf("%s: output %d = %v, want %v: error %.3g > bound %.3g", name, i, ref[i], w, d, bound)
			}
		}
	}
}

// bitsDecode decodes two latent frames of a tiny random VAE, one chunk
// each (the second through every cache and time conv), at precision prec
// and returns the video.
func bitsDecode(t *testing.T, m *Model, prec gemm.Precision) []float32 {
	t.Helper()
	c, h, w := m.Cfg.ZDim, 2, 2
	z := randFrame(2*c*h*w, 5)
	mean, std := make([]float32, c), make([]float32, c)
	for i := range std {
		mean[i], std[i] = 0.1*float32(i), 1+0.1*float32(i)
	}
	v, err := decodeChunks(m, Options{Mean: mean, Std: std, Precision: prec}, z, []int{1, 1}, c, h, w)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestBitsAcrossKernels: at both precisions, the decoded video is the same
// bits whichever gemm kernel runs the convolutions and the attention
// (every assembly kernel this CPU runs, pure Go, the Go emulations of AMX
// and AVX512_BF16; the model re-packs its bf16 weights for each), and
// equals the hash pinned in testdata/bits.json, which the -tags noasm
// build and every CPU must reproduce.
func TestBitsAcrossKernels(t *testing.T) {
	m, err := Random(TinyConfig(4), 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		t.Run(prec.String(), func(t *testing.T) {
			ref := bitsDecode(t, m, prec)
			kerneltest.Each(t, prec, func(kernel string) {
				if i := kerneltest.FirstDiff(bitsDecode(t, m, prec), ref); i >= 0 {
					t.Fatalf("%v kernel %s: video value %d differs from the auto kernel's", prec, kernel, i)
				}
			})
			kerneltest.Pinned(t, "vae tiny "+prec.String(), kerneltest.Hash(ref))
		})
	}
	if _, err := m.NewDecoder(Options{Mean: make([]float32, 4), Std: []float32{1, 1, 1, 1}, Precision: 3}); err == nil {
		t.Fatal("precision 3 accepted")
	}
}

// TestBF16CacheBytes: at bf16 the feature caches are held as bfloat16, so
// a stream's decoder holds about half the cache bytes of the fp32 one
// (the working frames are the same), and its frames are those of a decoder
// that keeps float32 caches (TestBitsAcrossKernels pins them).
func TestBF16CacheBytes(t *testing.T) {
	m, err := Random(TinyConfig(4), 3)
	if err != nil {
		t.Fatal(err)
	}
	c, h, w := m.Cfg.ZDim, 4, 6
	z := randFrame(4*c*h*w, 7)
	mean, std := make([]float32, c), make([]float32, c)
	for i := range std {
		std[i] = 1
	}
	var bytes [2]int64
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		d, err := m.NewDecoder(Options{Mean: mean, Std: std, Precision: prec})
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 4; k++ {
			if err := d.DecodeFunc(z[k*c*h*w:(k+1)*c*h*w], 1, c, h, w, func(int, []float32) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		bytes[prec] = d.Bytes()
	}
	cache := m.CacheBytes(h, w)
	t.Logf("decoder bytes: fp32 %d, bf16 %d; float32 caches %d", bytes[gemm.F32], bytes[gemm.BF16], cache)
	if saved := bytes[gemm.F32] - bytes[gemm.BF16]; saved < cache/4 {
		t.Fatalf("bf16 decoder holds %d bytes, fp32 %d: saved %d, want at least a quarter of the %d cache bytes", bytes[gemm.BF16], bytes[gemm.F32], saved, cache)
	}
}
