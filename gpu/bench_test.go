package gpu

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/riesz"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// The benchmarks run at the real sizes (go test -tags vulkan -bench . ./gpu;
// never by default). On lavapipe they take hours: the exact kernels do
// their fused multiply-adds in integer arithmetic there.

// benchFloats returns n standard normal float32 values.
func benchFloats(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// benchTimed runs record's batch b.N times and reports the device time
// per call and GFLOP/s for flops per call.
func benchTimed(b *testing.B, dev *vulkan.Device, flops float64, record func(*vulkan.Batch) error) {
	batch := dev.NewBatch()
	if err := record(batch); err != nil {
		b.Fatal(err)
	}
	b.Logf("device %v", dev)
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := batch.RunTimed()
		if err != nil {
			b.Fatal(err)
		}
		total += d
	}
	per := total.Seconds() / float64(b.N)
	b.ReportMetric(per*1e3, "device-ms/call")
	b.ReportMetric(flops/per/1e9, "GFLOP/s")
}

// BenchmarkAttentionWan: one Wan2.1-1.3B attention call, 4,680 queries
// over 18,720 keys, 12 heads of 128 (4·T·S·D·H flops: QKᵀ and PV).
func BenchmarkAttentionWan(b *testing.B) {
	const T, S, H, D = 4680, 18720, 12, 128
	for _, prec := range []gemm.Precision{gemm.BF16, gemm.F32} {
		b.Run(prec.String(), func(b *testing.B) {
			dev := vulkantest.Open(b)
			r := rand.New(rand.NewPCG(1, 2))
			q, k, v := upFloats(b, dev, benchFloats(r, T*H*D)), upFloats(b, dev, benchFloats(r, S*H*D)), upFloats(b, dev, benchFloats(r, S*H*D))
			out := upFloats(b, dev, make([]float32, T*H*D))
			benchTimed(b, dev, 4*float64(T)*S*D*H, func(batch *vulkan.Batch) error {
				return Attention(dev, batch, prec, out, q, k, v, T, S, H, D, 0.088)
			})
		})
	}
}

// BenchmarkRieszRowStats: a paper-scale Soft-Riesz pass, 4,680 candidates
// against a bank of M = 9,360, D = 128 (2·N·M·D flops of products; the
// epilogue not counted).
func BenchmarkRieszRowStats(b *testing.B) {
	const N, M, D = 4680, 9360, 128
	for _, bf16 := range []bool{true, false} {
		name := "fp32"
		if bf16 {
			name = "bf16"
		}
		b.Run(name, func(b *testing.B) {
			dev := vulkantest.Open(b)
			r := rand.New(rand.NewPCG(3, 4))
			k := riesz.MustNew(1, 2, 1e-3)
			set := func(n int) RieszSet {
				x := benchFloats(r, n*D)
				s := riesz.NewSet(x, n, D, nil)
				return RieszSet{X: upFloats(b, dev, x), Norms: upFloats(b, dev, s.Norms), N: n, D: D, BF16: bf16}
			}
			a, bank := set(N), set(M)
			inv := make([]float32, M)
			for i := range inv {
				inv[i] = 1
			}
			ginv := upFloats(b, dev, inv)
			sum, mean, mx := upDoubles(b, dev, make([]float64, N)), upDoubles(b, dev, make([]float64, N)), upDoubles(b, dev, make([]float64, N))
			benchTimed(b, dev, 2*float64(N)*M*D, func(batch *vulkan.Batch) error {
				return RieszRowStats(dev, batch, k, a, bank, ginv, sum, mean, mx)
			})
		})
	}
}
