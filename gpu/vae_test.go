package gpu

import (
	"strings"
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/compute/computetest"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestConvChunks runs the conformance cases with the convolutions' pixels
// cut into chunks of a few columns (an im2col buffer of at most 100
// values: chunks of one to 33 pixels, a last chunk shorter): the chains
// do not change, so neither do the bits.
func TestConvChunks(t *testing.T) {
	defer func(n int) { im2colElems = n }(im2colElems)
	im2colElems = 100
	b, err := NewBackend(vulkantest.Open(t))
	if err != nil {
		t.Fatal(err)
	}
	computetest.Run(t, b)
}

// TestConvRefusals: the device's refusals of bad convolution inputs name
// the operation once and what is wrong; the backend works on afterwards.
func TestConvRefusals(t *testing.T) {
	b, err := NewBackend(vulkantest.Open(t))
	if err != nil {
		t.Fatal(err)
	}
	c := &nn.Conv{Cin: 2, Cout: 3, KT: 3, KH: 3, KW: 3, Weight: make([]float32, 2*3*27), Bias: make([]float32, 3)}
	b.LoadConv(c, gemm.BF16)
	if err := b.Flush(); err == nil || err.Error() != "gpu: LoadConv: convolution 2→3 not packed at bf16 (nn.Conv.Pack)" {
		t.Fatalf("unpacked weights: error %v", err)
	}
	c.Pack(gemm.BF16)
	w := b.LoadConv(c, gemm.BF16)
	b.Conv(b.New(3*20), w, []compute.Tensor{nil, b.New(40)}, 4, 5, false, nil)
	if err := b.Flush(); err == nil || err.Error() != "gpu: Conv: 2 input frames of 4×5 for a convolution of 3" {
		t.Fatalf("two frames: error %v", err)
	}
	b.Conv(b.New(3*20), w, []compute.Tensor{nil, nil, compute.NewCPU().New(40)}, 4, 5, false, nil)
	if err := b.Flush(); err == nil || !strings.Contains(err.Error(), "input frame 2 is a tensor of another backend") {
		t.Fatalf("a CPU frame: error %v", err)
	}
	out := b.New(3 * 20)
	b.Conv(out, w, []compute.Tensor{nil, nil, b.New(40)}, 4, 5, false, nil)
	v := make([]float32, 60)
	if err := b.Download(v, out); err != nil {
		t.Fatalf("after the refusals: %v", err)
	}
}
