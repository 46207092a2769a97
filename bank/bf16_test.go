package bank_test

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/bench"
	"github.com/densitykv/densitykv/gemm"
)

// TestBF16KernelBitIdentical runs the same video-like stream through banks
// with the bfloat16-instruction dot-product kernel (AVX512_BF16 or AMX) on
// and off (gemm.SetBF16: the float32 FMA kernel computing the same bfloat16
// product) and requires every decision and the final snapshot to be
// identical byte for byte: the kernel is a pure speed-up (gemm's package
// documentation defines the product). Where the build or CPU has no such
// kernel both runs use the same kernel and the test only checks
// determinism.
func TestBF16KernelBitIdentical(t *testing.T) {
	if !gemm.HardwareBF16() {
		t.Log("no bfloat16 kernel in this build or on this CPU: comparing float32 with itself")
	}
	H, N, M, D := 2, 200, 300, 64
	for _, c := range []struct {
		name string
		set  func(*bank.Config)
	}{
		{"default", func(*bank.Config) {}},
		{"max-order-refresh", func(c *bank.Config) { c.Ordering = bank.OrderMax; c.Baselines = bank.BaselinesRefresh }},
		{"f64-density-per-head", func(c *bank.Config) { c.Density = bank.F64; c.Prefix = bank.PrefixPerHead }},
		{"f32-payload", func(c *bank.Config) { c.Payload = bank.PayloadF32 }}, // no bfloat16 operands: float32 either way
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(on bool) ([]bank.Decision, []byte) {
				defer gemm.SetBF16(gemm.SetBF16(on))
				calls := gemm.BF16Calls()
				defer func() {
					// Which kernel ran: bfloat16 products only for a BF16
					// payload with the kernel on and available.
					want := on && gemm.HardwareBF16() && c.name != "f32-payload"
					if used := gemm.BF16Calls() > calls; used != want {
						t.Errorf("bfloat16 kernel on=%v (available %v): used %v, want %v", on, gemm.HardwareBF16(), used, want)
					}
				}()
				cfg := bank.DefaultConfig()
				cfg.Heads, cfg.Capacity, cfg.KeyDim, cfg.ValueDim = H, M, D, D
				c.set(&cfg)
				b, err := bank.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				vs := bench.NewVideoStream(H, N, D, 3)
				var decs []bank.Decision
				for i := 0; i < 8; i++ {
					d, err := b.Update(vs.Next())
					if err != nil {
						t.Fatal(err)
					}
					d.Timings = bank.Timings{}
					decs = append(decs, d)
				}
				var buf bytes.Buffer
				if _, err := b.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				return decs, buf.Bytes()
			}
			d32, s32 := run(false)
			d16, s16 := run(true)
			evicted := 0
			for _, d := range d32 {
				for _, h := range d.Heads {
					evicted += len(h.Evicted)
				}
			}
			if evicted == 0 {
				t.Fatal("the stream never evicts: the comparison would not cover the commit's subtraction")
			}
			for i := range d32 {
				if !reflect.DeepEqual(d32[i], d16[i]) {
					t.Fatalf("update %d: decisions differ:\nfloat32 %s\nbf16    %s", i, fmt.Sprint(d32[i]), fmt.Sprint(d16[i]))
				}
			}
			if !bytes.Equal(s32, s16) {
				t.Fatal("snapshots differ between the float32 and bfloat16 kernels")
			}
		})
	}
}
