package gpu

import (
	"math"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestCheckExact runs the probe on the test device, which must pass it.
func TestCheckExact(t *testing.T) {
	dev := vulkantest.Open(t)
	props, err := CheckExact(dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: fused multiply-add %v; failed: %q", dev, props.FMA, props.Failed)
	again, err := CheckExact(dev)
	if err != nil || again.FMA != props.FMA {
		t.Fatalf("second CheckExact: %+v, %v; first %+v", again, err, props)
	}
}

// probeResults are the probe's results as a device computing binary32
// exactly gives them, through f: f(op, a, b, c) for each case and op.
func probeResults(f func(pc probeCase) float32) []uint32 {
	out := make([]uint32, 4*len(probeCases))
	for i, pc := range probeCases {
		for op := range 4 {
			q := pc
			q.op = op
			out[4*i+op] = math.Float32bits(f(q))
		}
	}
	return out
}

// TestJudge feeds judge the results of an exact device and of devices
// with the usual faults, and requires each fault named.
func TestJudge(t *testing.T) {
	if p := judge(probeResults(probeWant)); len(p.Failed) > 0 || !p.FMA {
		t.Fatalf("exact results judged %+v", p)
	}
	flush := func(x float32) float32 {
		if b := math.Float32bits(x); b&0x7f800000 == 0 {
			return math.Float32frombits(b & 0x80000000)
		}
		return x
	}
	faults := map[string]func(pc probeCase) float32{
		PropFMA: func(pc probeCase) float32 { // a multiply and an add
			if pc.op == probeFMA {
				pc.op = probeMulAdd
			}
			return probeWant(pc)
		},
		PropNoContraction: func(pc probeCase) float32 {
			if pc.op == probeMulAdd {
				pc.op = probeFMA
			}
			return probeWant(pc)
		},
		PropDenormals: func(pc probeCase) float32 { // flush to zero, denormals are zero
			pc.a, pc.b, pc.c = flush(pc.a), flush(pc.b), flush(pc.c)
			return flush(probeWant(pc))
		},
		PropSignedZeros: func(pc probeCase) float32 {
			if r := probeWant(pc); r != 0 {
				return r
			}
			return 0
		},
		PropRTE: func(pc probeCase) float32 { // toward zero
			w := probeWant(pc)
			if pc.op != probeAdd || w != w {
				return w
			}
			exact := float64(pc.a) + float64(pc.b)
			if math.Abs(float64(w)) > math.Abs(exact) {
				return math.Nextafter32(w, 0)
			}
			return w
		},
		PropInfNaN: func(pc probeCase) float32 {
			if w := probeWant(pc); w == w && !math.IsInf(float64(w), 0) {
				return w
			}
			return 0
		},
	}
	for prop, f := range faults {
		p := judge(probeResults(f))
		found := false
		for _, msg := range p.Failed {
			found = found || strings.HasPrefix(msg, prop+":")
		}
		if !found {
			t.Errorf("a device without %q: judged %q", prop, p.Failed)
		}
		if prop == PropFMA && p.FMA {
			t.Errorf("an unfused fma judged fused")
		}
	}
}
