package eval

import (
	"fmt"
	"math"
	"strings"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/memory"
)

// Group names of the standard suite, in report order.
const (
	GroupBaselines = "baselines"
	GroupTau       = "tau"
	GroupCapacity  = "capacity"
	GroupSigma     = "sigma"
	GroupP         = "p"
	GroupPolicy    = "policy"
	GroupOrdering  = "ordering"
	GroupGeometry  = "geometry"
)

// Groups lists every group of the standard suite in report order.
func Groups() []string {
	return []string{GroupBaselines, GroupTau, GroupCapacity, GroupSigma, GroupP, GroupPolicy, GroupOrdering, GroupGeometry}
}

// PaperSigma is the paper's default bandwidth for d_k = 128.
const PaperSigma = 8.0

// ScaledSigma returns the bandwidth rule σ = √(d_k/2) of the paper's
// calibration (8 for d_k = 128) for head dimension d.
func ScaledSigma(d int) float64 { return PaperSigma * math.Sqrt(float64(d)/128) }

// SuiteConfig parameterises the standard suite.
type SuiteConfig struct {
	// Base is the shared configuration (Layout must be set); DensityKV's
	// default parameters come from it, with Bank.Sigma defaulting to
	// ScaledSigma(HeadDim) and Capacity to 6 frames.
	Base memory.Config
	// Groups to include (nil: all).
	Groups []string
}

// Suite returns the paper's tables as variants, scaled to the base layout:
// τ ∈ {1.5, 2, 3}; M ∈ {4, 6, 8} frames of tokens (6,240, 9,360, 12,480 for
// Wan); σ ∈ {½, 1, 2}·ScaledSigma (4, 8, 16 for d_k = 128); p ∈ {1, 2, 4};
// the policy ablations; candidate ordering mean vs max; the four density
// descriptors of the paper's geometry rows (post- and pre-RoPE K, each alone
// and as [K;V]); and the baselines at the same
// capacity. Every DensityKV row changes exactly one setting of the default.
func Suite(sc SuiteConfig) ([]Variant, error) {
	base := sc.Base
	l := base.Layout
	if l.TokensPerFrame() <= 0 || l.HeadDim <= 0 {
		return nil, fmt.Errorf("eval: suite: layout %+v has no tokens", l)
	}
	tpf := l.TokensPerFrame()
	if base.Bank.Sigma == 0 {
		base.Bank.Sigma = ScaledSigma(l.HeadDim)
	}
	if base.Capacity == 0 {
		base.Capacity = 6 * tpf
	}
	want := map[string]bool{}
	for _, g := range sc.Groups {
		g = strings.ToLower(strings.TrimSpace(g))
		known := false
		for _, k := range Groups() {
			known = known || k == g
		}
		if !known {
			return nil, fmt.Errorf("eval: suite: unknown group %q (known: %s)", g, strings.Join(Groups(), ", "))
		}
		want[g] = true
	}
	all := len(want) == 0
	dkv := memory.NameDensityKV
	def, defErr := base.Resolve()
	var out []Variant
	add := func(group, label, policy string, mut func(*memory.Config)) {
		if !all && !want[group] {
			return
		}
		c := base
		if mut != nil {
			mut(&c)
		}
		v := Variant{Group: group, Label: label, Policy: policy, Config: c}
		if rc, err := c.Resolve(); policy == dkv && err == nil && defErr == nil && rc == def {
			v.Default = true
		}
		out = append(out, v)
	}
	for _, b := range []struct{ label, name string }{
		{"Native", memory.NameNative}, {"Infinity-RoPE", memory.NameInfinityRoPE},
		{"Deep Forcing", memory.NameDeepForcing}, {"LongLive-RAG", memory.NameLongLiveRAG},
		{"FIFO", memory.NameFIFO}, {"Uniform stride", memory.NameUniformStride}, {"DensityKV", dkv},
	} {
		add(GroupBaselines, b.label, b.name, nil)
	}
	for _, tau := range []float64{1.5, 2, 3} {
		add(GroupTau, fmt.Sprintf("τ=%g", tau), dkv, func(c *memory.Config) { c.Bank.Tau = tau })
	}
	for _, f := range []int{4, 6, 8} {
		add(GroupCapacity, fmt.Sprintf("M=%d (%d frames)", f*tpf, f), dkv, func(c *memory.Config) { c.Capacity = f * tpf })
	}
	for _, m := range []float64{0.5, 1, 2} {
		s := m * base.Bank.Sigma
		add(GroupSigma, fmt.Sprintf("σ=%.3g", s), dkv, func(c *memory.Config) { c.Bank.Sigma = s })
	}
	for _, p := range []float64{1, 2, 4} {
		add(GroupP, fmt.Sprintf("p=%g", p), dkv, func(c *memory.Config) { c.Bank.P = p })
	}
	for _, a := range []struct {
		label string
		mut   func(*memory.Config)
	}{
		{"Default", nil},
		{"Source-order candidates", func(c *memory.Config) { c.Bank.Ordering = bank.OrderSource }},
		{"Refresh density baselines", func(c *memory.Config) { c.Bank.Baselines = bank.BaselinesRefresh }},
		{"Densest-only eviction", func(c *memory.Config) { c.Bank.Eviction = bank.EvictDensest }},
		{"Mandatory + source eviction", func(c *memory.Config) { c.Bank.Eviction = bank.EvictMandatorySource }},
		{"Independent per-head", func(c *memory.Config) { c.Bank.Prefix = bank.PrefixPerHead }},
		{"Within-block competition", func(c *memory.Config) { c.Bank.Admission = bank.AdmitSequential }},
	} {
		add(GroupPolicy, a.label, dkv, a.mut)
	}
	add(GroupOrdering, "Mean-normalised", dkv, nil)
	add(GroupOrdering, "Max-normalised", dkv, func(c *memory.Config) { c.Bank.Ordering = bank.OrderMax })
	add(GroupGeometry, "Post-RoPE K", dkv, nil)
	add(GroupGeometry, "Post-RoPE [K;V]", dkv, func(c *memory.Config) { c.Bank.Descriptor = bank.DescKeyValue })
	add(GroupGeometry, "Pre-RoPE K", dkv, func(c *memory.Config) { c.Bank.Descriptor = bank.DescPreRoPEKey })
	add(GroupGeometry, "Pre-RoPE [K;V]", dkv, func(c *memory.Config) { c.Bank.Descriptor = bank.DescPreRoPEKeyValue })
	return out, nil
}
