package vae

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// A slow, literal whole-sequence decoder in float64 (the README's
// "whole-sequence terms"), independent of the streaming Decoder: every
// causal conv runs over the whole sequence at its own time resolution with
// zero frames before the start, and an upsample3d keeps frame 0 as it is,
// runs its time_conv over the later frames only, interleaves and
// concatenates.

// seq is a sequence [c][t][h][w] in float64.
type seq struct {
	c, t, h, w int
	v          []float64
}

func newSeq(c, t, h, w int) seq { return seq{c, t, h, w, make([]float64, c*t*h*w)} }

func (s seq) at(c, t, y, x int) float64 { return s.v[((c*s.t+t)*s.h+y)*s.w+x] }

// frames returns frames [t0, t1).
func (s seq) frames(t0, t1 int) seq {
	o := newSeq(s.c, t1-t0, s.h, s.w)
	n := s.h * s.w
	for c := 0; c < s.c; c++ {
		copy(o.v[c*o.t*n:(c+1)*o.t*n], s.v[(c*s.t+t0)*n:(c*s.t+t1)*n])
	}
	return o
}

// cat joins sequences along time.
func cat(a, b seq) seq {
	o := newSeq(a.c, a.t+b.t, a.h, a.w)
	n := a.h * a.w
	for c := 0; c < a.c; c++ {
		copy(o.v[c*o.t*n:], a.v[c*a.t*n:(c+1)*a.t*n])
		copy(o.v[(c*o.t+a.t)*n:], b.v[c*b.t*n:(c+1)*b.t*n])
	}
	return o
}

func oracleConv(cv *Conv, x seq, up bool) seq {
	ho, wo := x.h, x.w
	if up {
		ho, wo = 2*ho, 2*wo
	}
	o := newSeq(cv.Cout, x.t, ho, wo)
	for co := 0; co < cv.Cout; co++ {
		for t := 0; t < x.t; t++ {
			for y := 0; y < ho; y++ {
				for xx := 0; xx < wo; xx++ {
					s := float64(cv.Bias[co])
					for dt := 0; dt < cv.KT; dt++ {
						st := t + dt - (cv.KT - 1)
						if st < 0 {
							continue
						}
						for dy := 0; dy < cv.KH; dy++ {
							for dx := 0; dx < cv.KW; dx++ {
								sy, sx := y+dy-cv.KH/2, xx+dx-cv.KW/2
								if sy < 0 || sy >= ho || sx < 0 || sx >= wo {
									continue
								}
								if up {
									sy, sx = sy/2, sx/2
								}
								for ci := 0; ci < cv.Cin; ci++ {
									s += float64(cv.Weight[(((co*cv.Cin+ci)*cv.KT+dt)*cv.KH+dy)*cv.KW+dx]) * x.at(ci, st, sy, sx)
								}
							}
						}
					}
					o.v[((co*o.t+t)*ho+y)*wo+xx] = s
				}
			}
		}
	}
	return o
}

func oracleNorm(x seq, gamma []float32, act bool) seq {
	o := newSeq(x.c, x.t, x.h, x.w)
	n := x.t * x.h * x.w
	for p := 0; p < n; p++ {
		var ss float64
		for c := 0; c < x.c; c++ {
			ss += x.v[c*n+p] * x.v[c*n+p]
		}
		nrm := math.Max(math.Sqrt(ss), 1e-12)
		for c := 0; c < x.c; c++ {
			v := x.v[c*n+p] / nrm * math.Sqrt(float64(x.c)) * float64(gamma[c])
			if act {
				v = v / (1 + math.Exp(-v))
			}
			o.v[c*n+p] = v
		}
	}
	return o
}

func add(a, b seq) seq {
	o := newSeq(a.c, a.t, a.h, a.w)
	for i := range o.v {
		o.v[i] = a.v[i] + b.v[i]
	}
	return o
}

func oracleResidual(b *ResidualBlock, x seq) seq {
	h := oracleConv(&b.Conv2, oracleNorm(x, b.Norm0.Gamma, true), false)
	h = oracleConv(&b.Conv6, oracleNorm(h, b.Norm3.Gamma, true), false)
	if b.Shortcut != nil {
		x = oracleConv(b.Shortcut, x, false)
	}
	return add(h, x)
}

func oracleAttention(a *AttentionBlock, x seq) seq {
	qkv := oracleConv(&a.ToQKV, oracleNorm(x, a.Norm.Gamma, false), false)
	C, P := x.c, x.h*x.w
	att := newSeq(C, x.t, x.h, x.w)
	for t := 0; t < x.t; t++ {
		get := func(c, p int) float64 { return qkv.v[(c*x.t+t)*P+p] }
		for i := 0; i < P; i++ {
			sc := make([]float64, P)
			mx := math.Inf(-1)
			for j := 0; j < P; j++ {
				var s float64
				for c := 0; c < C; c++ {
					s += get(c, i) * get(C+c, j)
				}
				sc[j] = s / math.Sqrt(float64(C))
				mx = math.Max(mx, sc[j])
			}
			var z float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				z += sc[j]
			}
			for c := 0; c < C; c++ {
				var s float64
				for j := range sc {
					s += sc[j] / z * get(2*C+c, j)
				}
				att.v[(c*x.t+t)*P+i] = s
			}
		}
	}
	return add(oracleConv(&a.Proj, att, false), x)
}

func oracleResample(r *Resample, x seq) seq {
	if r.TimeConv != nil && x.t > 1 {
		tc := oracleConv(r.TimeConv, x.frames(1, x.t), false) // [2C][T−1]
		C, n := x.c, x.h*x.w
		il := newSeq(C, 2*(x.t-1), x.h, x.w)
		for c := 0; c < C; c++ {
			for t := 0; t < x.t-1; t++ {
				for s := 0; s < 2; s++ {
					copy(il.v[(c*il.t+2*t+s)*n:(c*il.t+2*t+s+1)*n], tc.v[((s*C+c)*tc.t+t)*n:((s*C+c)*tc.t+t+1)*n])
				}
			}
		}
		x = cat(x.frames(0, 1), il)
	}
	return oracleConv(&r.Conv, x, true)
}

// oracleDecode decodes the whole video of latents z [c][t][h][w].
func oracleDecode(m *Model, z []float32, c, t, h, w int, mean, std []float32) seq {
	x := newSeq(c, t, h, w)
	n := t * h * w
	for ch := 0; ch < c; ch++ {
		for i := 0; i < n; i++ {
			x.v[ch*n+i] = float64(z[ch*n+i])*float64(std[ch]) + float64(mean[ch])
		}
	}
	x = oracleConv(&m.Conv2, x, false)
	dec := &m.Decoder
	x = oracleConv(&dec.Conv1, x, false)
	x = oracleResidual(&dec.Middle0, x)
	x = oracleAttention(&dec.Middle1, x)
	x = oracleResidual(&dec.Middle2, x)
	for _, u := range dec.Upsamples {
		if u.Res != nil {
			x = oracleResidual(u.Res, x)
		} else {
			x = oracleResample(u.Up, x)
		}
	}
	x = oracleConv(&dec.HeadConv, oracleNorm(x, dec.HeadNorm.Gamma, true), false)
	for i, v := range x.v {
		x.v[i] = math.Min(math.Max(v, -1), 1)
	}
	return x
}

// randLatents returns seeded N(0,1) latents.
func randLatents(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 3))
	z := make([]float32, n)
	for i := range z {
		z[i] = float32(r.NormFloat64())
	}
	return z
}

// TestMatchesOracle checks the streaming decoder, fed in uneven chunks,
// against the whole-sequence float64 oracle on random models of several
// configurations (the tiny golden one, fewer or more stages, other
// temporal upsampling patterns, one residual block per stage) and
// non-square latents.
func TestMatchesOracle(t *testing.T) {
	for i, c := range []struct {
		cfg       Config
		t, h, w   int
		chunks    []int
		mean, std []float32
	}{
		{TinyConfig(4), 4, 2, 3, []int{1, 3}, nil, nil},
		{Config{Dim: 4, ZDim: 3, DimMult: []int{1, 2}, NumResBlocks: 1, TemporalUpsample: []bool{true}}, 5, 3, 2, []int{2, 1, 2}, nil, nil},
		{Config{Dim: 4, ZDim: 2, DimMult: []int{1, 2, 2}, NumResBlocks: 0, TemporalUpsample: []bool{false, true}}, 4, 2, 2, []int{3, 1}, nil, nil},
		{Config{Dim: 2, ZDim: 2, DimMult: []int{2}, NumResBlocks: 1, TemporalUpsample: []bool{}}, 3, 3, 3, []int{1, 1, 1}, nil, nil},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			m, err := Random(c.cfg, uint64(10+i))
			if err != nil {
				t.Fatal(err)
			}
			mean, std := make([]float32, c.cfg.ZDim), make([]float32, c.cfg.ZDim)
			for k := range mean {
				mean[k], std[k] = 0.1*float32(k)-0.2, 1+0.25*float32(k)
			}
			zc := randLatents(c.cfg.ZDim*c.t*c.h*c.w, uint64(i))
			want := oracleDecode(m, zc, c.cfg.ZDim, c.t, c.h, c.w, mean, std)
			got, err := decodeChunks(m, Options{Mean: mean, Std: std}, FrameMajor(zc, c.cfg.ZDim, c.t, c.h, c.w), c.chunks, c.cfg.ZDim, c.h, c.w)
			if err != nil {
				t.Fatal(err)
			}
			s := c.cfg.SpatialScale()
			if F := c.cfg.PixelFrames(0, c.t); want.t != F || want.h != c.h*s || want.w != c.w*s || len(got) != len(want.v) {
				t.Fatalf("oracle [3 %d %d %d], PixelFrames %d, decoded %d values", want.t, want.h, want.w, F, len(got))
			}
			var num, den float64
			for k, v := range want.v {
				d := float64(got[k]) - v
				num += d * d
				den += v * v
			}
			if rel := math.Sqrt(num / den); !(rel < 1e-5) {
				t.Fatalf("relative L2 error %.3g against the oracle", rel)
			}
			whole, err := m.Decode(FrameMajor(zc, c.cfg.ZDim, c.t, c.h, c.w), c.t, c.cfg.ZDim, c.h, c.w, Options{Mean: mean, Std: std})
			if err != nil || !slices.Equal(whole, got) {
				t.Fatalf("chunks %v differ from the whole decode (%v)", c.chunks, err)
			}
		})
	}
}
