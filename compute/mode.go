package compute

import (
	"errors"
	"fmt"
	"strings"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/vocab"
)

// Mode is how a backend computes the models' matrix products.
type Mode uint8

const (
	// Exact: every operation is the CPU backend's definition, bit for bit
	// (the package contract; every backend, the default).
	Exact Mode = iota
	// Fast: a device's tensor cores (cooperative matrices) compute the
	// bfloat16 linears: bfloat16 operands, float32 accumulation in an
	// order the device chooses, so not the CPU's bits (within a tolerance
	// of the float64 references; package gpu's FastSupport and docs/gpu.md).
	// Everything else stays exact. Only a device backend offers it
	// (gpu.NewFastBackend); the CPU refuses it (ErrFastOnCPU).
	Fast
)

var modeNames = vocab.List{Pkg: "compute", Kind: "mode", Names: []string{"exact", "fast"}}

// String returns "exact" or "fast".
func (m Mode) String() string { return modeNames.String(uint8(m), "Mode") }

// Precision is the models' precision as flags, YAML keys, JSON and logs
// spell it: gemm's precision of the models' products and the mode of a
// device backend.
//
//	"fp32"      gemm.F32, exact mode
//	"bf16"      gemm.BF16, exact mode
//	"bf16-fast" gemm.BF16 in fast mode: the bf16 model, its linears on a
//	            GPU's tensor cores (not bit-identical; refused on the CPU
//	            and on a device without a usable cooperative matrix)
//
// The zero value is fp32.
type Precision struct {
	Prec gemm.Precision
	Mode Mode
}

// The precisions, in the order PrecisionNames lists them.
var (
	FP32     = Precision{gemm.F32, Exact}
	BF16     = Precision{gemm.BF16, Exact}
	BF16Fast = Precision{gemm.BF16, Fast}
)

var precisions = []Precision{FP32, BF16, BF16Fast}

// PrecisionNames lists the precisions' names: fp32, bf16, bf16-fast.
func PrecisionNames() []string {
	var s []string
	for _, p := range precisions {
		s = append(s, p.String())
	}
	return s
}

// Exactly returns the exact-mode Precision of p.
func Exactly(p gemm.Precision) Precision { return Precision{Prec: p} }

// String returns the precision's name ("fp32", "bf16", "bf16-fast").
func (p Precision) String() string {
	if p.Mode == Exact {
		return p.Prec.String()
	}
	return p.Prec.String() + "-" + p.Mode.String()
}

// MarshalText returns the precision's name, or an error for a combination
// without one (fp32 in fast mode).
func (p Precision) MarshalText() ([]byte, error) {
	for _, q := range precisions {
		if p == q {
			return []byte(p.String()), nil
		}
	}
	return nil, &vocab.Error{Pkg: "compute", Kind: "precision", Name: p.String(), Known: PrecisionNames()}
}

// UnmarshalText sets p to the precision named b (exactly one of
// PrecisionNames); any other text is an error naming it and the names
// allowed, and leaves p unchanged.
func (p *Precision) UnmarshalText(b []byte) error {
	for _, q := range precisions {
		if string(b) == q.String() {
			*p = q
			return nil
		}
	}
	return &vocab.Error{Pkg: "compute", Kind: "precision", Name: fmt.Sprintf("%q", b), Known: PrecisionNames()}
}

// ParsePrecisions reads a list of precision names (a --precision list),
// each trimmed; an empty list is an error.
func ParsePrecisions(names []string) ([]Precision, error) {
	var out []Precision
	for _, s := range names {
		var p Precision
		if err := p.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no precision given, want %s", vocab.Or(PrecisionNames()))
	}
	return out, nil
}

// ErrFastOnCPU is the CPU's refusal of fast mode (CheckCPU).
var ErrFastOnCPU = errors.New("fast mode (bf16-fast) runs only on a Vulkan GPU with tensor cores (VK_NV_cooperative_matrix); the CPU computes exact mode only: use bf16 (or fp32) on the CPU, or --device vulkan on such a GPU")

// CheckCPU returns nil when p runs on the CPU backend, ErrFastOnCPU for
// fast mode.
func (p Precision) CheckCPU() error {
	if p.Mode != Exact {
		return ErrFastOnCPU
	}
	return nil
}

// Moder is implemented by a backend that reports its mode (package gpu's
// Backend); a backend without it computes exact mode.
type Moder interface {
	Mode() Mode
}

// ModeOf returns b's mode: Exact for the CPU (nil included) and for any
// backend that does not implement Moder.
func ModeOf(b Backend) Mode {
	if m, ok := b.(Moder); ok && m != nil {
		return m.Mode()
	}
	return Exact
}
