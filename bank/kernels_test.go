package bank_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/bench"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gemm/kerneltest"
)

// TestSnapshotsAcrossKernels runs one video-like stream through a bank
// (eight updates, with evictions) on every matrix kernel this machine can
// run for the payload's precision — bf16 keys: every bfloat16 kernel,
// the pure-Go one and the Go emulations of AMX and AVX512_BF16; f32 keys:
// every float32 kernel — and requires every decision and the final
// snapshot to be identical byte for byte, and the snapshot to hash to the
// value pinned in testdata/bits.json, which the -tags noasm build and
// every CPU must reproduce.
func TestSnapshotsAcrossKernels(t *testing.T) {
	H, N, M, D := 2, 160, 240, 64
	for _, c := range []struct {
		payload bank.Payload
		prec    gemm.Precision
	}{{bank.PayloadBF16, gemm.BF16}, {bank.PayloadF32, gemm.F32}} {
		t.Run(c.payload.String(), func(t *testing.T) {
			run := func() ([]bank.Decision, []byte) {
				cfg := bank.DefaultConfig()
				cfg.Heads, cfg.Capacity, cfg.KeyDim, cfg.ValueDim, cfg.Payload = H, M, D, D, c.payload
				b, err := bank.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				vs := bench.NewVideoStream(H, N, D, 5)
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
			refDecs, ref := run()
			evicted := 0
			for _, d := range refDecs {
				for _, h := range d.Heads {
					evicted += len(h.Evicted)
				}
			}
			if evicted == 0 {
				t.Fatal("the stream never evicts")
			}
			kerneltest.Each(t, c.prec, func(kernel string) {
				decs, snap := run()
				for i := range decs {
					if !reflect.DeepEqual(decs[i], refDecs[i]) {
						t.Fatalf("%v kernel %s: update %d decides otherwise than the auto kernel", c.prec, kernel, i)
					}
				}
				if !bytes.Equal(snap, ref) {
					t.Fatalf("%v kernel %s: the snapshot differs from the auto kernel's", c.prec, kernel)
				}
			})
			kerneltest.Pinned(t, "bank snapshot "+c.payload.String(), kerneltest.HashBytes(ref))
		})
	}
}
