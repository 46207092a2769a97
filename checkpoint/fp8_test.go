package checkpoint

import (
	"bytes"
	"math"
	"testing"
)

// fp8Ref decodes an 8-bit float from its definition: sign, exponent of
// eBits bits and bias, mantissa of mBits bits; subnormals at exponent 0.
func fp8Ref(b byte, eBits, mBits, bias int) float64 {
	sign := 1.0
	if b>>7 == 1 {
		sign = -1
	}
	e := int(b>>mBits) & (1<<eBits - 1)
	m := float64(int(b) & (1<<mBits - 1))
	if e == 0 {
		return sign * math.Ldexp(m, 1-bias-mBits)
	}
	return sign * math.Ldexp(1+m/float64(int(1)<<mBits), e-bias)
}

// TestFP8Exact checks every float8_e4m3fn and float8_e5m2 value against
// its definition (e4m3fn: bias 7, S.1111.111 NaN, no infinities; e5m2:
// bias 15, IEEE infinities and NaNs), and that each is a bfloat16 value:
// converting fp8 to bf16 (through float32) is exact.
func TestFP8Exact(t *testing.T) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		e4 := E4M3ToFloat32(b)
		if b&0x7f == 0x7f {
			if !math.IsNaN(float64(e4)) {
				t.Errorf("e4m3fn %#x = %v, want NaN", b, e4)
			}
		} else if want := fp8Ref(b, 4, 3, 7); float64(e4) != want || math.Signbit(float64(e4)) != (b>>7 == 1) {
			t.Errorf("e4m3fn %#x = %v, want %v", b, e4, want)
		}
		e5 := E5M2ToFloat32(b)
		switch {
		case b&0x7f == 0x7c:
			if !math.IsInf(float64(e5), 0) {
				t.Errorf("e5m2 %#x = %v, want ±Inf", b, e5)
			}
		case b&0x7f > 0x7c:
			if !math.IsNaN(float64(e5)) {
				t.Errorf("e5m2 %#x = %v, want NaN", b, e5)
			}
		default:
			if want := fp8Ref(b, 5, 2, 15); float64(e5) != want {
				t.Errorf("e5m2 %#x = %v, want %v", b, e5, want)
			}
		}
		for _, v := range []float32{e4, e5} {
			if u := math.Float32bits(v); !math.IsNaN(float64(v)) && u&0xffff != 0 {
				t.Errorf("%v (from %#x) is not a bfloat16 value", v, b)
			}
		}
	}
	if E4M3ToFloat32(0x7e) != 448 || E5M2ToFloat32(0x7b) != 57344 {
		t.Error("largest finite values wrong")
	}
}

// TestReadFloat32DTypes reads F8, F16 and BF16 tensors of a safetensors
// file, with and without a scale, against Decode and the scale's float32
// product.
func TestReadFloat32DTypes(t *testing.T) {
	raw := []byte{0x00, 0x01, 0x38, 0xb8, 0x7e, 0xfe, 0x08, 0x44}
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, []WriteTensor{{Name: "e4", Shape: []int{2, 4}, Data: Encoded{DType: F8E4M3, Bytes: raw}},
		{Name: "e5", Shape: []int{8}, Data: Encoded{DType: F8E5M2, Bytes: raw}},
		{Name: "h", Shape: []int{4}, Data: Encoded{DType: F16, Bytes: raw}},
		{Name: "b", Shape: []int{4}, Data: Encoded{DType: BF16, Bytes: raw}}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := NewRaw(bytes.NewReader(buf.Bytes()), int64(buf.Len()), TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range f.Tensors {
		for _, scale := range []float32{0, 0.3} {
			rt.Scale = scale
			got := make([]float32, rt.Elems())
			if err := rt.ReadFloat32(got, make([]byte, 3)); err != nil { // a 3-byte buffer: reads in pieces
				t.Fatal(err)
			}
			for i := range got {
				es := rt.DType.Size()
				want := rt.DType.float32At(raw[i*es:])
				if scale != 0 {
					want = float32(want * scale)
				}
				if math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("%s[%d] scale %v = %v, want %v", rt.Name, i, scale, got[i], want)
				}
			}
		}
	}
	if err := f.Tensors[0].ReadFloat32(make([]float32, 7), nil); err == nil {
		t.Error("a destination of the wrong length was accepted")
	}
}
