package gpu

import (
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestMeter makes the same calls on a device Backend and on a Meter —
// convolutions loaded at fp32 and bf16, frames made, convolutions that
// grow the scratch (chunked im2col, the product, the bfloat16 operands)
// with buffers released while the batch still reads them, reads that run
// it, weights freed — and after each step requires the Meter's bytes, now
// and at their most, to be what the device allocated
// (vulkan.Device.Allocated).
func TestMeter(t *testing.T) {
	defer func(n int) { im2colElems = n }(im2colElems)
	im2colElems = 300 // chunks of pixels for the wider convolution
	dev := vulkantest.Open(t)
	b, err := NewBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	conv := func(cin, cout, kt, kh, kw int) *nn.Conv {
		c := &nn.Conv{Cin: cin, Cout: cout, KT: kt, KH: kh, KW: kw, Weight: make([]float32, cout*cin*kt*kh*kw), Bias: make([]float32, cout)}
		for i := range c.Weight {
			c.Weight[i] = float32(i%5) - 2
		}
		c.Pack(gemm.F32)
		c.Pack(gemm.BF16)
		return c
	}
	wide, narrow := conv(5, 7, 3, 3, 3), conv(7, 3, 1, 1, 1)
	var m Meter
	type state struct {
		be compute.Backend
		w  map[string]compute.ConvWeights
		t  map[string]compute.Tensor
	}
	sides := []*state{{be: b}, {be: &m}}
	for _, s := range sides {
		s.w, s.t = map[string]compute.ConvWeights{}, map[string]compute.Tensor{}
	}
	live0, _ := dev.Allocated()
	dev.ResetPeak()
	steps := []struct {
		name string
		do   func(s *state)
	}{
		{"load the convolutions at fp32 and bf16", func(s *state) {
			s.w["wide"], s.w["wide16"], s.w["narrow"] = s.be.LoadConv(wide, gemm.F32), s.be.LoadConv(wide, gemm.BF16), s.be.LoadConv(narrow, gemm.F32)
			s.t["gamma"] = s.be.Param(make([]float32, 7))
		}},
		{"frames", func(s *state) {
			s.t["x"], s.t["y"], s.t["up"], s.t["z"] = s.be.New(5*4*6), s.be.New(7*4*6), s.be.New(7*8*12), s.be.New(3*8*12)
		}},
		{"a causal convolution", func(s *state) {
			s.be.Conv(s.t["y"], s.w["wide"], []compute.Tensor{nil, nil, s.t["x"]}, 4, 6, false, nil)
		}},
		{"an upsampling one at bf16: the scratch grows, the old buffers wait for the batch", func(s *state) {
			s.be.Conv(s.t["up"], s.w["wide16"], []compute.Tensor{s.t["x"], nil, s.t["x"]}, 4, 6, true, nil)
			s.be.RMSNormChannels(s.t["up"], s.t["up"], 7, 96, s.t["gamma"], true)
		}},
		{"a frame freed while the batch reads it", func(s *state) { s.be.Free(s.t["x"]) }},
		{"a 1×1 convolution, then a read", func(s *state) {
			s.be.Conv(s.t["z"], s.w["narrow"], []compute.Tensor{s.t["up"]}, 8, 12, false, nil)
			if err := s.be.Download(make([]float32, 3*8*12), s.t["z"]); err != nil {
				t.Fatal(err)
			}
		}},
		{"the weights freed", func(s *state) {
			for _, w := range s.w {
				s.be.FreeConv(w)
			}
			s.be.Free(s.t["gamma"])
			if err := s.be.Flush(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, st := range steps {
		for _, s := range sides {
			st.do(s)
		}
		live, peak := dev.Allocated()
		if live-live0 != m.Now.Total() || peak-live0 != m.PeakTotal {
			t.Fatalf("%s: the device has %d bytes (at most %d), the meter %d (at most %d; %+v)", st.name, live-live0, peak-live0, m.Now.Total(), m.PeakTotal, m.Now)
		}
	}
	if m.Now.Weights != 0 || m.Now.Tensors != 4*(7*4*6+7*8*12+3*8*12) || m.Peak.Scratch == 0 || m.Largest < 4*7*8*12 {
		t.Errorf("left: %+v, peaks %+v, largest %d", m.Now, m.Peak, m.Largest)
	}
}
