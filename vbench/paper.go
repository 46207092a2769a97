package vbench

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
)

// label is a name as Markdown/CSV (Text) and LaTeX (TeX) show it.
type label struct{ Text, TeX string }

// policyLabels are the paper's method names.
var policyLabels = map[string]label{
	memory.NameNative:        {"Native", "Native"},
	memory.NameInfinityRoPE:  {"∞-RoPE", `$\infty$-RoPE`},
	memory.NameDeepForcing:   {"Deep Forcing", "Deep Forcing"},
	memory.NameLongLiveRAG:   {"LongLive-RAG", "LongLive-RAG"},
	memory.NameDensityKV:     {"DensityKV", "DensityKV"},
	memory.NameFullHistory:   {"Full history", "Full history"},
	memory.NameFIFO:          {"FIFO", "FIFO"},
	memory.NameUniformStride: {"Uniform stride", "Uniform stride"},
}

func policyLabel(p string) label {
	if l, ok := policyLabels[p]; ok {
		return l
	}
	return label{p, texEscape(p)}
}

// backboneLabels are the paper's backbone names, in the order of its text
// ("LongLive, Self-Forcing, and Causal-Forcing").
var backboneLabels = []struct{ name, label string }{
	{"longlive", "LongLive"}, {"self-forcing", "Self-Forcing"}, {"causal-forcing", "Causal-Forcing"},
}

func backboneLabel(b string) string {
	for _, x := range backboneLabels {
		if x.name == b {
			return x.label
		}
	}
	return b
}

// sortBackbones orders backbones as the paper names them, others after
// by name.
func sortBackbones(bs []string) {
	rank := func(b string) int {
		for i, x := range backboneLabels {
			if x.name == b {
				return i
			}
		}
		return len(backboneLabels)
	}
	sort.SliceStable(bs, func(i, j int) bool {
		if ri, rj := rank(bs[i]), rank(bs[j]); ri != rj {
			return ri < rj
		}
		return bs[i] < bs[j]
	})
}

// policyRank orders policies as the paper's main comparison does, others
// after.
func policyRank(p string) int {
	if i := slices.Index(config.PaperMainPolicies, p); i >= 0 {
		return i
	}
	return len(config.PaperMainPolicies)
}

// settingKeys are the memory keys that tell methods of one policy apart:
// the layout and budget for every policy, and the keys of the policy's own
// section (the bank's, Deep Forcing's, LongLive-RAG's). memory.bank.workers
// only sets parallelism.
func settingKey(policy, key string) bool {
	if !strings.HasPrefix(key, "memory.") || key == "memory.bank.workers" {
		return false
	}
	switch {
	case strings.HasPrefix(key, "memory.bank."):
		return policy == memory.NameDensityKV
	case strings.HasPrefix(key, "memory.deep_forcing."):
		return policy == memory.NameDeepForcing
	case strings.HasPrefix(key, "memory.longlive_rag."):
		return policy == memory.NameLongLiveRAG
	}
	return true
}

// The ablation table's groups (paper, Table "Parameter sensitivity and
// policy ablations"): a sweep per parameter, the policy variants together,
// the retention geometries together. A variant belongs to the group of the
// one key it changes; the reference (the default) is in every group.
type groupDef struct {
	name  label
	keys  []string
	sweep bool // numeric: rows by value
}

var ablationGroups = []groupDef{
	{label{"τ", `$\tau$`}, []string{"memory.bank.tau"}, true},
	{label{"M", `$M$`}, []string{"memory.capacity"}, true},
	{label{"σ", `$\sigma$`}, []string{"memory.bank.sigma"}, true},
	{label{"p", `$p$`}, []string{"memory.bank.p"}, true},
	{label{"Policy", "Policy"}, []string{"memory.bank.baselines", "memory.bank.ordering", "memory.bank.eviction", "memory.bank.prefix", "memory.bank.admission"}, false},
	{label{"Geometry", "Geometry"}, []string{"memory.bank.descriptor"}, false},
}

// keyLabels name a setting in a method's label.
var keyLabels = map[string]label{
	"memory.bank.tau": {"τ", `$\tau$`}, "memory.capacity": {"M", `$M$`},
	"memory.bank.sigma": {"σ", `$\sigma$`}, "memory.bank.p": {"p", `$p$`},
}

func keyLabel(k string) label {
	if l, ok := keyLabels[k]; ok {
		return l
	}
	s := k[strings.LastIndexByte(k, '.')+1:]
	return label{s, texEscape(s)}
}

// descriptorLabels are the geometry rows' names.
var descriptorLabels = map[string]label{
	"pre-rope-key":       {"pre-RoPE K", `pre-RoPE $K$`},
	"pre-rope-key-value": {"pre-RoPE [K;V]", `pre-RoPE $[K;V]$`},
	"post-rope-key":      {"post-RoPE K", `post-RoPE $K$`},
	"key-value":          {"post-RoPE [K;V]", `post-RoPE $[K;V]$`},
}

var descriptorOrder = []string{"pre-rope-key", "pre-rope-key-value", "post-rope-key", "key-value"}

// variantRows are the paper's names of the policy variants, by
// "key=value" (from config.PaperAblations).
func variantRows() (names map[string]string, order []string) {
	names = map[string]string{}
	for _, v := range config.PaperAblations {
		for _, kv := range append(slices.Clone(v.Memory), v.Bank...) {
			k, val, _ := strings.Cut(kv, ":")
			prefix := "memory.bank."
			if slices.Contains(v.Memory, kv) {
				prefix = "memory."
			}
			key := prefix + strings.TrimSpace(k) + "=" + strings.TrimSpace(val)
			names[key] = strings.TrimPrefix(v.Row, "Geometry: ")
			order = append(order, key)
		}
	}
	return names, order
}

// settingValue formats a setting's value as a table row shows it: τ with
// one decimal at least (2.0), M with thousands separators (9,360).
func settingValue(key, v string) label {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return label{v, texEscape(v)}
	}
	switch key {
	case "memory.bank.tau":
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return label{s, "$" + s + "$"}
	case "memory.capacity":
		s := thousands(v)
		return label{s, strings.ReplaceAll(s, ",", "{,}")}
	}
	return label{v, "$" + v + "$"}
}

func thousands(s string) string {
	if len(s) <= 3 || strings.ContainsAny(s, ".eE-") {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// methodLabel is a method's name in the tables: its policy's, with the
// settings that set it apart.
func methodLabel(policy string, settings map[string]string) label {
	l := policyLabel(policy)
	if len(settings) == 0 {
		return l
	}
	keys := sortedKeys(settings)
	var t, x []string
	for _, k := range keys {
		kl, v := keyLabel(k), settingValue(k, settings[k])
		t = append(t, kl.Text+" "+v.Text)
		x = append(x, kl.TeX+" "+v.TeX)
	}
	return label{fmt.Sprintf("%s (%s)", l.Text, strings.Join(t, ", ")), fmt.Sprintf("%s (%s)", l.TeX, strings.Join(x, ", "))}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// texEscape escapes LaTeX's special characters in plain text.
func texEscape(s string) string {
	r := strings.NewReplacer(`\`, `\textbackslash{}`, "&", `\&`, "%", `\%`, "$", `\$`, "#", `\#`, "_", `\_`, "{", `\{`, "}", `\}`, "~", `\textasciitilde{}`, "^", `\textasciicircum{}`)
	return r.Replace(s)
}
