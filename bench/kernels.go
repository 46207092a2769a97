package bench

import (
	"fmt"
	"strings"

	"github.com/densitykv/densitykv/gemm"
)

// KernelChoice is the matrix kernel that products of one precision ran on
// and why (gemm.KernelInfo).
type KernelChoice struct {
	Precision gemm.Precision `json:"precision"`
	Kernel    string         `json:"kernel"`
	Forced    bool           `json:"forced"` // --kernel (gemm.Force), not the start-up selection
	Why       string         `json:"why"`    // the start-up selection's reasons
}

// Kernels returns the kernel of each precision (fp32, then bf16) as
// selected now.
func Kernels() []KernelChoice {
	ks, why := gemm.KernelInfo()
	var out []KernelChoice
	for _, p := range []gemm.Precision{gemm.F32, gemm.BF16} {
		c := KernelChoice{Precision: p, Why: why[p]}
		for _, k := range ks {
			if k.Precision == p && k.Selected {
				c.Kernel, c.Forced = k.Name, !k.Auto
			}
		}
		out = append(out, c)
	}
	return out
}

// KernelNames lists, per precision, the kernels this machine can run
// (gemm.Force accepts them): "fp32: avx512, avx2, go; bf16: …".
func KernelNames() string {
	ks, _ := gemm.KernelInfo()
	var parts []string
	for _, p := range []gemm.Precision{gemm.F32, gemm.BF16} {
		var names []string
		for _, k := range ks {
			if k.Precision == p && k.Available == "" {
				names = append(names, k.Name)
			}
		}
		parts = append(parts, p.String()+": "+strings.Join(names, ", "))
	}
	return strings.Join(parts, "; ")
}

// ForceKernel makes products run on the kernel called name (see
// gemm.Force: a name, or "fp32:NAME" / "bf16:NAME" for one precision;
// "auto" or "" is the start-up selection) and returns the function that
// restores the selection. An unknown or unavailable kernel is an error
// saying why and listing the kernels this machine can run.
func ForceKernel(name string) (restore func(), err error) {
	if name == "" {
		return func() {}, nil
	}
	restore, err = gemm.Force(name)
	if err != nil {
		return nil, fmt.Errorf("%w; this machine runs %s (\"auto\" is the start-up selection)", err, KernelNames())
	}
	return restore, nil
}

// KernelLines formats ks for a benchmark's header: one line per
// precision, the kernel, whether it was forced, and why it was chosen.
func KernelLines(ks []KernelChoice) string {
	var b strings.Builder
	for _, k := range ks {
		forced := ""
		if k.Forced {
			forced = " (forced with --kernel)"
		}
		fmt.Fprintf(&b, "kernel %v: %s%s [start-up selection: %s]\n", k.Precision, k.Kernel, forced, k.Why)
	}
	return b.String()
}
