package rawio

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// check that Bytes is little-endian and that ReadFull reads it back, for
// the view and the portable (encode/decode) paths.
func roundTrip[T Number](t *testing.T, x []T) {
	t.Helper()
	var want bytes.Buffer
	if err := binary.Write(&want, binary.LittleEndian, x); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Bytes(x), want.Bytes()) {
		t.Fatalf("%T: Bytes differs from binary.Write", x)
	}
	enc := make([]byte, len(want.Bytes()))
	encode(enc, x)
	if !bytes.Equal(enc, want.Bytes()) {
		t.Fatalf("%T: encode differs from binary.Write", x)
	}
	got := make([]T, len(x))
	if err := ReadFull(bytes.NewReader(want.Bytes()), got); err != nil || !slices.Equal(got, x) {
		t.Fatalf("%T: ReadFull %v, %v", x, got, err)
	}
	dec := make([]T, len(x))
	decode(dec, want.Bytes())
	if !slices.Equal(dec, x) {
		t.Fatalf("%T: decode %v", x, dec)
	}
	if len(x) > 0 {
		if err := ReadFull(bytes.NewReader(want.Bytes()[:len(want.Bytes())-1]), got); err == nil {
			t.Fatalf("%T: short read accepted", x)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	roundTrip(t, []uint8{0, 1, 255})
	roundTrip(t, []uint16{0, 1, 0xbeef})
	roundTrip(t, []uint32{0, 1, 0xdeadbeef})
	roundTrip(t, []uint64{0, 1, 0xdeadbeefcafef00d})
	roundTrip(t, []int32{0, -1, math.MinInt32})
	roundTrip(t, []int64{0, -1, math.MinInt64})
	roundTrip(t, []float32{0, -1.5, float32(math.Inf(1)), math.SmallestNonzeroFloat32})
	roundTrip(t, []float64{0, -1.5, math.Inf(-1), math.MaxFloat64})
	roundTrip(t, []float32{})
}
