package vae

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/cputime"
)

// randConv returns a random convolution (weights packed).
func randConv(cin, cout, kt, kh, kw int, seed uint64) *Conv {
	r := rand.New(rand.NewPCG(seed, 1))
	c := &Conv{Cin: cin, Cout: cout, KT: kt, KH: kh, KW: kw, slot: -1}
	c.Weight = make([]float32, cout*cin*kt*kh*kw)
	c.Bias = make([]float32, cout)
	for i := range c.Weight {
		c.Weight[i] = float32(r.NormFloat64())
	}
	for i := range c.Bias {
		c.Bias[i] = float32(r.NormFloat64())
	}
	c.pack()
	return c
}

func randFrame(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 2))
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(r.NormFloat64())
	}
	return f
}

// BenchmarkConv times one output frame of the real decoder's convolution
// shapes (all taps reading a frame) at each precision and reports GFLOP/s.
func BenchmarkConv(b *testing.B) {
	for _, c := range []struct {
		name             string
		cin, cout, kt, k int
		h, w             int
		up               bool
	}{
		{"res384-60x104", 384, 384, 3, 3, 60, 104, false},
		{"res384-120x208", 384, 384, 3, 3, 120, 208, false},
		{"res192-240x416", 192, 192, 3, 3, 240, 416, false},
		{"res96-480x832", 96, 96, 3, 3, 480, 832, false},
		{"head96to3-480x832", 96, 3, 3, 3, 480, 832, false},
		{"time_conv384-120x208", 384, 768, 3, 1, 120, 208, false},
		{"resample192to96-240x416up", 192, 96, 1, 3, 240, 416, true},
	} {
		for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
			b.Run(c.name+"/"+prec.String(), func(b *testing.B) {
				cv := randConv(c.cin, c.cout, c.kt, c.k, c.k, 1)
				if prec == gemm.BF16 {
					cv.packBF16()
				}
				in := make([][]float32, c.kt)
				for i := range in {
					in[i] = randFrame(c.cin*c.h*c.w, uint64(i))
				}
				ho, wo := c.h, c.w
				if c.up {
					ho, wo = 2*ho, 2*wo
				}
				out := make([]float32, c.cout*ho*wo)
				e := engine{prec: prec}
				cv.apply(&e, out, in, c.h, c.w, c.up, nil) // warm the scratch
				e.flops = 0
				cpu0 := cputime.Process().Seconds()
				for b.Loop() {
					cv.apply(&e, out, in, c.h, c.w, c.up, nil)
				}
				b.ReportMetric(float64(e.flops)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(float64(e.flops)/(cputime.Process().Seconds()-cpu0)/1e9, "GFLOP/cpu-s")
			})
		}
	}
}

// peakRSS returns the process's peak resident memory in bytes (VmHWM), or
// 0 where /proc is unavailable.
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}

// benchDecode times the decoder of configuration cfg (random weights) on
// h×w latents. The stream's latent frames 0 and 1 are decoded (and timed)
// first; each iteration then decodes one steady-state latent frame (4
// pixel frames), continuing the stream. Reported: seconds per latent
// frame, the seconds of a generation block of 3 latent frames extrapolated
// from it (the first block, frames 0–2, from the two timed frames plus one
// steady frame), GFLOP/s of the convolutions and attention (and per
// CPU-second, steadier on a shared machine), the decoder's
// frame buffers (caches and working frames) and the process's peak RSS.
func benchDecode(b *testing.B, cfg Config, h, w int) {
	m, err := Random(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	opt := Options{}
	if cfg.ZDim != 16 {
		opt = Options{Mean: make([]float32, cfg.ZDim), Std: make([]float32, cfg.ZDim)}
		for i := range opt.Std {
			opt.Std[i] = 1
		}
	}
	d, err := m.NewDecoder(opt)
	if err != nil {
		b.Fatal(err)
	}
	z := randLatents(cfg.ZDim*h*w, 1)
	var first [2]time.Duration
	for i := range first {
		t0 := time.Now()
		if _, err := d.Decode(z, 1, cfg.ZDim, h, w); err != nil {
			b.Fatal(err)
		}
		first[i] = time.Since(t0)
	}
	f0 := d.FLOPs()
	cpu0 := cputime.Process().Seconds()
	for b.Loop() {
		if _, err := d.Decode(z, 1, cfg.ZDim, h, w); err != nil {
			b.Fatal(err)
		}
	}
	per := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(per, "s/latent-frame")
	b.ReportMetric(3*per, "s/block(extrapolated)")
	b.ReportMetric(first[0].Seconds()+first[1].Seconds()+per, "s/first-block(extrapolated)")
	b.ReportMetric(float64(d.FLOPs()-f0)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(float64(d.FLOPs()-f0)/(cputime.Process().Seconds()-cpu0)/1e9, "GFLOP/cpu-s")
	b.ReportMetric(float64(d.Bytes())/(1<<20), "state-MiB")
	b.ReportMetric(peakRSS()/(1<<20), "peakRSS-MiB")
}

// BenchmarkDecodeReal is the real Wan2.1 decoder at 480×832 (latents
// 60×104). One latent frame takes minutes on two cores, so run it with
// -benchtime 1x (or 2x); block figures are extrapolated from one latent
// frame, labelled so.
func BenchmarkDecodeReal(b *testing.B) { benchDecode(b, DefaultConfig(), 60, 104) }

// BenchmarkDecodeRealSmall is the real decoder's widths on 15×26 latents
// (120×208 pixels, 1/16 of the real size).
func BenchmarkDecodeRealSmall(b *testing.B) { benchDecode(b, DefaultConfig(), 15, 26) }

// BenchmarkDecodeTiny is the tiny golden configuration on its 4×6 latents.
func BenchmarkDecodeTiny(b *testing.B) { benchDecode(b, TinyConfig(4), 4, 6) }
