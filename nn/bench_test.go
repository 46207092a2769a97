package nn

import (
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/cputime"
)

// BenchmarkLinearFFN times the largest product, 512 tokens through a
// 4096 → 10240 Linear with bf16 weights streamed (packed on the fly), at each
// precision (fp32: widened to float32; bf16: packed natively), against
// gemm on the same weights held in float32: BenchmarkNTFloat32FFN with
// the weights packed once outside the loop (the kernel alone), and
// BenchmarkNTFloat32FFNPerCall, gemm.NT packing them on every call.
func BenchmarkLinearFFN(b *testing.B) {
	const rows, in, out = 512, 4096, 10240
	r := rand.New(rand.NewPCG(1, 1))
	l := Linear[uint16]{In: in, Out: out, W: randBF16(r, in*out, 0.02)}
	x := make([]float32, rows*in)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := make([]float32, rows*out)
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		b.Run(prec.String(), func(b *testing.B) {
			var s Scratch
			s.PackInput(prec, x, rows, in)
			l.Stream(y, rows, &s)
			b.ResetTimer()
			c0 := cputime.Process().Seconds()
			for b.Loop() {
				s.PackInput(prec, x, rows, in)
				l.Stream(y, rows, &s)
			}
			reportFLOPs(b, 2*rows*in*out, c0)
		})
	}
}

func BenchmarkNTFloat32FFN(b *testing.B) {
	const rows, in, out = 512, 4096, 10240
	r := rand.New(rand.NewPCG(1, 1))
	w := widenAll(randBF16(r, in*out, 0.02))
	x := make([]float32, rows*in)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := make([]float32, rows*out)
	pb := gemm.PackNT(nil, out, in, w, in)
	b.ResetTimer()
	c0 := cputime.Process().Seconds()
	for b.Loop() {
		pb.Product(rows, x, in, y, out)
	}
	reportFLOPs(b, 2*rows*in*out, c0)
}

func BenchmarkNTFloat32FFNPerCall(b *testing.B) {
	const rows, in, out = 512, 4096, 10240
	r := rand.New(rand.NewPCG(1, 1))
	w := widenAll(randBF16(r, in*out, 0.02))
	x := make([]float32, rows*in)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := make([]float32, rows*out)
	b.ResetTimer()
	c0 := cputime.Process().Seconds()
	for b.Loop() {
		gemm.NT(rows, out, in, x, in, w, in, y, out)
	}
	reportFLOPs(b, 2*rows*in*out, c0)
}

func BenchmarkGeluAlone(b *testing.B) {
	x := make([]float32, 1<<20)
	for i := range x {
		x[i] = float32(i%200-100) * 0.03
	}
	for b.Loop() {
		GELUTanh(x)
	}
}

func BenchmarkGeluAfterGemm(b *testing.B) {
	x := make([]float32, 1<<20)
	a := make([]float32, 256*256)
	c := make([]float32, 256*256)
	for i := range x {
		x[i] = float32(i%200-100) * 0.03
	}
	for b.Loop() {
		gemm.NT(256, 256, 256, a, 256, a, 256, c, 256)
		GELUTanh(x)
	}
}

// reportFLOPs reports flops per operation as GFLOP/s of wall time and,
// steadier on a loaded machine, GFLOP per CPU-second (since c0, the CPU
// time at the start of the loop; ≈ per-core speed).
func reportFLOPs(b *testing.B, flops float64, c0 float64) {
	n := float64(b.N)
	b.ReportMetric(flops/(b.Elapsed().Seconds()/n)/1e9, "GFLOP/s")
	if cpu := cputime.Process().Seconds() - c0; cpu > 0 {
		b.ReportMetric(flops/(cpu/n)/1e9, "GFLOP/cpu-s")
	}
}
