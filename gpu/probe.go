package gpu

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/densitykv/densitykv/internal/vmath"
	"github.com/densitykv/densitykv/vulkan"
)

// The properties the exactness probe checks. Exact mode needs all but
// PropFMA: without it the float32 product computes its fused
// multiply-adds in integer arithmetic (exact.glsl's fma32) instead of
// with fma().
const (
	PropRTE           = "round to nearest even"
	PropSignedZeros   = "signed zeros"
	PropInfNaN        = "Inf and NaN"
	PropNoContraction = "no contraction"
	PropDenormals     = "denormals"
	PropFMA           = "fused multiply-add"
)

// Properties is what the probe found on a device.
type Properties struct {
	// FMA: fma() rounds once, with gradual underflow, on every probed case.
	FMA bool
	// Failed lists each failed case, "property: what (got …, want …)";
	// empty when every property holds.
	Failed []string
}

// failed reports whether prop failed.
func (p Properties) failed(prop string) bool {
	for _, f := range p.Failed {
		if strings.HasPrefix(f, prop+":") {
			return true
		}
	}
	return false
}

// probe operations: the exact_probe shader's four results per case.
const (
	probeFMA    = iota // fma(a, b, c)
	probeMul           // a·b
	probeAdd           // a + b
	probeMulAdd        // a·b then + c, two roundings (NoContraction)
)

type probeCase struct {
	prop    string
	op      int
	a, b, c float32
}

// String is the case as an expression.
func (pc probeCase) String() string {
	switch pc.op {
	case probeFMA:
		return fmt.Sprintf("fma(%g, %g, %g)", pc.a, pc.b, pc.c)
	case probeMul:
		return fmt.Sprintf("%g · %g", pc.a, pc.b)
	case probeAdd:
		return fmt.Sprintf("%g + %g", pc.a, pc.b)
	}
	return fmt.Sprintf("%g · %g + %g (unfused)", pc.a, pc.b, pc.c)
}

// probeCases are values whose results tell the properties apart from
// their usual failures: a fused multiply-add done as a multiply and an
// add, denormals flushed, a sign of zero lost, rounding toward zero, a·b+c
// contracted.
var probeCases = []probeCase{
	{PropFMA, probeFMA, 1 + 0x1p-23, 1 + 0x1p-23, -(1 + 0x1p-22)},              // 2^-46; unfused 0
	{PropFMA, probeFMA, 1 + 0x1p-12, 1 + 0x1p-12, -1},                          // 2^-11 + 2^-24
	{PropFMA, probeFMA, 0x1p64, 0x1p64, -0x1p127},                              // the product beyond float32
	{PropFMA, probeFMA, 0x1p-70, 0x1p-70, 0},                                   // a denormal result
	{PropFMA, probeFMA, 0x1p-140, 0x1p10, 0x1p-149},                            // denormal operands
	{PropFMA, probeFMA, 1.5 * 0x1p-75, 0x1p-74, 0},                             // a tie on the denormal grid
	{PropFMA, probeFMA, -1, 0, negZero},                                        // −0
	{PropNoContraction, probeMulAdd, 1 + 0x1p-23, 1 + 0x1p-23, -(1 + 0x1p-22)}, // +0; fused 2^-46
	{PropRTE, probeAdd, 1, 0x1p-24, 0},                                         // tie to even: 1
	{PropRTE, probeAdd, 1 + 0x1p-23, 0x1p-24, 0},                               // tie to even: 1 + 2^-22
	{PropRTE, probeAdd, -(1 + 0x1p-23), -0x1p-24, 0},                           // −(1 + 2^-22)
	{PropRTE, probeAdd, 1, 0x1p-24 + 0x1p-47, 0},                               // above the tie: 1 + 2^-23
	{PropRTE, probeMul, 1 + 0x1p-12, 1 + 0x1p-12 + 0x1p-23, 0},                 // rounds up
	{PropSignedZeros, probeAdd, negZero, negZero, 0},                           // −0
	{PropSignedZeros, probeAdd, 1, -1, 0},                                      // +0
	{PropSignedZeros, probeMul, negZero, 1, 0},                                 // −0
	{PropSignedZeros, probeMul, -1e-30, 1e-30, 0},                              // −0 by underflow
	{PropInfNaN, probeAdd, float32(math.Inf(1)), float32(math.Inf(-1)), 0},     // NaN
	{PropInfNaN, probeMul, float32(math.Inf(1)), 0, 0},                         // NaN
	{PropInfNaN, probeMul, math.MaxFloat32, 2, 0},                              // +Inf
	{PropInfNaN, probeAdd, float32(math.Inf(-1)), 1, 0},                        // −Inf
	{PropInfNaN, probeAdd, float32(math.NaN()), 1, 0},                          // NaN
	{PropDenormals, probeAdd, 0x1p-140, 0x1p-141, 0},                           // denormal operands and result
	{PropDenormals, probeMul, 0x1p-140, 0x1p20, 0},                             // a denormal operand, normal result
	{PropDenormals, probeMul, 0x1p-100, 0x1p-30, 0},                            // a denormal result
	{PropDenormals, probeAdd, 0x1p-126, -0x1p-127, 0},                          // 2^-127
	{PropDenormals, probeMul, 1.5 * 0x1p-75, 0x1p-74, 0},                       // a tie on the denormal grid: 2^-148
	{PropDenormals, probeMulAdd, 0x1p-149, 1, 0x1p-149},                        // 2^-148
}

// negZero is −0 (a constant expression cannot be: −0.0 is +0 in Go).
var negZero = float32(math.Copysign(0, -1))

// probeWant is the IEEE binary32 result of a probe case.
func probeWant(pc probeCase) float32 {
	mul := float32(float64(pc.a) * float64(pc.b)) // exact product, one rounding
	switch pc.op {
	case probeFMA:
		return vmath.FMA32(pc.a, pc.b, pc.c)
	case probeMul:
		return mul
	case probeAdd:
		return vmath.Round32(float64(pc.a), float64(pc.b), false)
	}
	return vmath.Round32(float64(mul), float64(pc.c), false)
}

type probed struct {
	once  sync.Once
	props Properties
	err   error
}

var probes sync.Map // *vulkan.Device → *probed

// CheckExact runs the exactness probe on dev (once per device; later calls
// return the first result): fused multiply-adds on cases a multiply and
// an add get wrong, denormal operands and results, signed zeros, Inf and
// NaN, rounding to nearest even, and a·b + c kept unfused, each compared
// with Go. It returns an error naming every failed property that exact
// mode needs (all but PropFMA, see Properties), or the device's error if
// the probe could not run.
func CheckExact(dev *vulkan.Device) (Properties, error) {
	v, _ := probes.LoadOrStore(dev, &probed{})
	p := v.(*probed)
	p.once.Do(func() { p.props, p.err = runProbe(dev) })
	if p.err != nil {
		return p.props, p.err
	}
	var bad []string
	for _, f := range p.props.Failed {
		if !strings.HasPrefix(f, PropFMA+":") {
			bad = append(bad, f)
		}
	}
	if len(bad) > 0 {
		return p.props, fmt.Errorf("gpu: %v (%s) fails the exactness probe, exact mode refused:\n\t%s", dev, dev.Info().DriverName, strings.Join(bad, "\n\t"))
	}
	return p.props, nil
}

func runProbe(dev *vulkan.Device) (Properties, error) {
	k, err := newKernel(dev, "exact_probe", vulkan.KernelSpec{Name: "exact_probe", Bindings: 2, PushSize: 4})
	if err != nil {
		return Properties{}, fmt.Errorf("gpu: exactness probe: %w", err)
	}
	n := len(probeCases)
	in := make([]uint32, 0, 3*n)
	for _, pc := range probeCases {
		in = append(in, math.Float32bits(pc.a), math.Float32bits(pc.b), math.Float32bits(pc.c))
	}
	bufIn, err := dev.Alloc(int64(4 * len(in)))
	if err != nil {
		return Properties{}, fmt.Errorf("gpu: exactness probe: %w", err)
	}
	defer bufIn.Free()
	bufOut, err := dev.Alloc(int64(16 * n))
	if err != nil {
		return Properties{}, fmt.Errorf("gpu: exactness probe: %w", err)
	}
	defer bufOut.Free()
	if err := dev.UploadUint32s(bufIn, 0, in); err != nil {
		return Properties{}, fmt.Errorf("gpu: exactness probe: %w", err)
	}
	b := dev.NewBatch()
	b.Dispatch(k, [3]uint32{uint32(n+63) / 64, 1, 1}, le32(uint32(n)), bufIn, bufOut)
	if err := b.Run(); err != nil {
		return Properties{}, fmt.Errorf("gpu: exactness probe: %w", err)
	}
	out := make([]uint32, 4*n)
	if err := dev.DownloadUint32s(bufOut, 0, out); err != nil {
		return Properties{}, fmt.Errorf("gpu: exactness probe: %w", err)
	}
	return judge(out), nil
}

// judge compares the probe's results (four per case) with probeWant.
func judge(out []uint32) Properties {
	var p Properties
	for i, pc := range probeCases {
		got, want := out[4*i+pc.op], math.Float32bits(probeWant(pc))
		if got == want || (isNaN32(got) && isNaN32(want)) {
			continue
		}
		p.Failed = append(p.Failed, fmt.Sprintf("%s: %v = %#08x (%g), want %#08x (%g)", pc.prop, pc, got, math.Float32frombits(got), want, math.Float32frombits(want)))
	}
	p.FMA = !p.failed(PropFMA)
	return p
}

func isNaN32(b uint32) bool { return b&0x7fffffff > 0x7f800000 }

// le32 is v as little-endian push-constant bytes.
func le32(v ...uint32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = append(b, byte(x), byte(x>>8), byte(x>>16), byte(x>>24))
	}
	return b
}
