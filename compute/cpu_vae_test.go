package compute_test

import (
	"strings"
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
)

// TestConvRefusals: the convolution's bad inputs are refused by Flush,
// each naming what is wrong, and the backend works on afterwards.
func TestConvRefusals(t *testing.T) {
	b := compute.NewCPU()
	c := &nn.Conv{Cin: 2, Cout: 3, KT: 3, KH: 3, KW: 3, Weight: make([]float32, 2*3*27), Bias: make([]float32, 3)}
	b.LoadConv(c, gemm.F32)
	if err := b.Flush(); err == nil || !strings.Contains(err.Error(), "LoadConv: convolution 2→3 not packed at fp32") {
		t.Fatalf("unpacked weights: error %v", err)
	}
	c.Pack(gemm.F32)
	w := b.LoadConv(c, gemm.F32)
	frame := func() compute.Tensor { return b.New(2 * 4 * 5) }
	for _, tc := range []struct {
		name string
		run  func()
		want string
	}{
		{"two frames", func() { b.Conv(b.New(3*20), w, []compute.Tensor{frame(), frame()}, 4, 5, false, nil) }, "Conv: 2 input frames of 4×5 for a convolution of 3"},
		{"zero frames", func() { b.Conv(b.New(3*20), w, make([]compute.Tensor, 3), 4, 5, false, nil) }, "Conv: no input frame (all 3 zero)"},
		{"short output", func() { b.Conv(b.New(3*20), w, []compute.Tensor{nil, frame(), frame()}, 4, 5, true, nil) }, "Conv: out holds 60 values, want 240"},
		{"short frame", func() { b.Conv(b.New(3*20), w, []compute.Tensor{nil, b.New(7), frame()}, 4, 5, false, nil) }, "Conv: input frame 1 holds 7 values, want 40"},
		{"short gamma", func() { b.RMSNormChannels(b.New(20), b.New(20), 4, 5, b.New(3), true) }, "RMSNormChannels: gamma holds 3 values, want 4"},
	} {
		tc.run()
		if err := b.Flush(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	out := b.New(3 * 20)
	b.Conv(out, w, []compute.Tensor{nil, nil, frame()}, 4, 5, false, nil)
	if err := b.Flush(); err != nil {
		t.Fatalf("after the refusals: %v", err)
	}
}
