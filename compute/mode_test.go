package compute

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

// TestPrecisionNames: fp32, bf16 and bf16-fast round-trip through their
// text; other text and fp32 in fast mode are errors naming the names.
func TestPrecisionNames(t *testing.T) {
	if got := PrecisionNames(); !slices.Equal(got, []string{"fp32", "bf16", "bf16-fast"}) {
		t.Fatalf("names %v", got)
	}
	for _, c := range []struct {
		p    Precision
		name string
	}{{FP32, "fp32"}, {BF16, "bf16"}, {BF16Fast, "bf16-fast"}, {Exactly(gemm.BF16), "bf16"}} {
		b, err := c.p.MarshalText()
		if err != nil || string(b) != c.name || c.p.String() != c.name {
			t.Errorf("%+v: %q, %v", c.p, b, err)
		}
		var q Precision
		if err := q.UnmarshalText([]byte(c.name)); err != nil || q != c.p {
			t.Errorf("%q: %+v, %v", c.name, q, err)
		}
	}
	if BF16Fast.Prec != gemm.BF16 || BF16Fast.Mode != Fast || (Precision{}) != FP32 {
		t.Errorf("bf16-fast is %+v, the zero value %+v", BF16Fast, Precision{})
	}
	q := BF16
	for _, bad := range []string{"fp16", "BF16", "bf16-exact", "fp32-fast", ""} {
		if err := q.UnmarshalText([]byte(bad)); err == nil || !strings.Contains(err.Error(), "fp32, bf16 or bf16-fast") || q != BF16 {
			t.Errorf("%q: %v (left %v)", bad, err, q)
		}
	}
	if _, err := (Precision{gemm.F32, Fast}).MarshalText(); err == nil {
		t.Error("fp32 in fast mode has a name")
	}
	ps, err := ParsePrecisions([]string{"fp32", " bf16-fast "})
	if err != nil || !slices.Equal(ps, []Precision{FP32, BF16Fast}) {
		t.Errorf("ParsePrecisions: %v, %v", ps, err)
	}
	if _, err := ParsePrecisions(nil); err == nil {
		t.Error("an empty list parsed")
	}
}

// TestFastRefusedOnCPU: the CPU computes exact mode only; fast mode is
// refused with a message naming what runs it.
func TestFastRefusedOnCPU(t *testing.T) {
	if err := BF16.CheckCPU(); err != nil {
		t.Fatal(err)
	}
	err := BF16Fast.CheckCPU()
	if !errors.Is(err, ErrFastOnCPU) {
		t.Fatalf("%v", err)
	}
	for _, w := range []string{"bf16-fast", "VK_NV_cooperative_matrix", "the CPU computes exact mode only", "--device vulkan"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
	if ModeOf(NewCPU()) != Exact || ModeOf(nil) != Exact {
		t.Error("the CPU's mode is not exact")
	}
}
