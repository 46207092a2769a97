package gpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// BenchmarkProducts times the products on the test device: the DiT's
// linear layer at real size (4,680 tokens × 1,536 × 1,536) and a small
// one, in both precisions, reporting GFLOP/s of device time (RunTimed).
// On lavapipe one real-size product takes about a minute: run the small
// one, go test -tags vulkan -run - -bench Products/512 -benchtime 1x ./gpu.
func BenchmarkProducts(b *testing.B) {
	dev := vulkantest.Open(b)
	if _, err := CheckExact(dev); err != nil {
		b.Fatal(err)
	}
	for _, s := range [][3]int{{512, 512, 512}, {4680, 1536, 1536}} {
		for _, prec := range []gemm.Precision{gemm.BF16, gemm.F32} {
			b.Run(fmt.Sprintf("%d×%d×%d/%v", s[0], s[1], s[2], prec), func(b *testing.B) {
				r := rand.New(rand.NewPCG(7, 8))
				a := newMat(r, prec, s[0], s[2], 0, 0, false).upload(b, dev)
				w := newMat(r, prec, s[1], s[2], 0, 0, false).upload(b, dev)
				c, err := NewMatrix(dev, gemm.F32, s[0], s[1])
				if err != nil {
					b.Fatal(err)
				}
				defer c.Buf.Free()
				benchTimed(b, dev, 2*float64(s[0])*float64(s[1])*float64(s[2]), func(batch *vulkan.Batch) error {
					return NT(dev, batch, c, a, w, false)
				})
			})
		}
	}
}
