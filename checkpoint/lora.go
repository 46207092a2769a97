package checkpoint

import (
	"fmt"
	"github.com/densitykv/densitykv/gemm"
	"math"
	"sort"
	"strings"
)

// LoRA suffix pairs recognised by MergeLoRA: PEFT ("lora_A.weight",
// "lora_A.default.weight") and the kohya/diffusers spelling ("lora_down").
var loraPairs = [][2]string{
	{".lora_A.default.weight", ".lora_B.default.weight"},
	{".lora_A.weight", ".lora_B.weight"},
	{".lora_down.weight", ".lora_up.weight"},
}

// loraBase strips the PEFT wrapper segments from a LoRA module path.
func loraBase(k string) string {
	k = NormalizeKey(k)
	k = strings.TrimPrefix(k, "base_model.model.")
	k = NormalizeKey(k)
	return strings.TrimSuffix(k, ".base_layer")
}

// MergeLoRA merges the low-rank adapters of lora into base in place:
// for every module m with A = lora[m.lora_A…] [r, in] and
// B = lora[m.lora_B…] [out, r], base[m.weight] += (alpha/r)·B·A, where the
// rank r of each adapter is A's first dimension (PEFT's scaling). LongLive
// uses rank 256 and alpha 256 on every Linear of every block. Alpha 0 means
// alpha = the rank (scale 1); it needs one rank, so adapters of different
// ranks are then an error naming two of them. It returns the names of the
// merged weights, sorted. Everything is validated before anything is
// changed; an unpaired adapter, a target missing from base, mismatched
// shapes, or a negative or non-finite alpha give an error naming the
// tensors or the value.
func MergeLoRA(base, lora StateDict, alpha float64) ([]string, error) {
	type pair struct {
		target string
		a, b   *Tensor
	}
	var pairs []pair
	used := map[string]bool{}
	for _, k := range lora.Names() {
		for _, sfx := range loraPairs {
			if !strings.HasSuffix(k, sfx[0]) {
				continue
			}
			mod := strings.TrimSuffix(k, sfx[0])
			bk := mod + sfx[1]
			b, ok := lora[bk]
			if !ok {
				return nil, fmt.Errorf("checkpoint: lora: %s has no matching %s", k, bk)
			}
			used[k], used[bk] = true, true
			target := loraBase(mod) + ".weight"
			pairs = append(pairs, pair{target, lora[k], b})
			break
		}
	}
	var stray []string
	for _, k := range lora.Names() {
		if !used[k] && !strings.HasSuffix(k, ".alpha") {
			stray = append(stray, k)
		}
	}
	if len(stray) > 0 {
		return nil, fmt.Errorf("checkpoint: lora: tensors that are not LoRA factors: %s", strings.Join(stray, ", "))
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("checkpoint: lora: no LoRA factors among %d tensors", len(lora))
	}
	seen := map[string]bool{}
	for _, p := range pairs {
		w, ok := base[p.target]
		if !ok {
			return nil, fmt.Errorf("checkpoint: lora: target %s not in the base state dict", p.target)
		}
		if seen[p.target] {
			return nil, fmt.Errorf("checkpoint: lora: target %s has two adapters", p.target)
		}
		seen[p.target] = true
		if len(w.Shape) != 2 || len(p.a.Shape) != 2 || len(p.b.Shape) != 2 ||
			p.a.Shape[1] != w.Shape[1] || p.b.Shape[0] != w.Shape[0] || p.a.Shape[0] != p.b.Shape[1] || p.a.Shape[0] == 0 {
			return nil, fmt.Errorf("checkpoint: lora: %s: weight %v, A %v, B %v do not compose (want A [r,in], B [out,r])", p.target, w.Shape, p.a.Shape, p.b.Shape)
		}
	}
	if !(alpha >= 0) || math.IsInf(alpha, 0) {
		return nil, fmt.Errorf("checkpoint: lora: alpha %v must be positive (or 0 for the rank)", alpha)
	}
	for _, p := range pairs {
		if r, r0 := p.a.Shape[0], pairs[0].a.Shape[0]; alpha == 0 && r != r0 {
			return nil, fmt.Errorf("checkpoint: lora: alpha 0 means alpha = the rank, but the adapters disagree: %s has rank %d, %s rank %d (give alpha)",
				pairs[0].target, r0, p.target, r)
		}
	}
	names := make([]string, 0, len(pairs))
	var delta []float32 // B·A, reused across adapters
	for _, p := range pairs {
		w := base[p.target]
		out, in, r := w.Shape[0], w.Shape[1], p.a.Shape[0]
		a := alpha
		if a == 0 {
			a = float64(r)
		}
		scale := float32(a / float64(r))
		if cap(delta) < out*in {
			delta = make([]float32, out*in)
		}
		delta = delta[:out*in]
		gemm.NN(out, in, r, p.b.Data, r, p.a.Data, in, delta, in)
		for i, v := range delta {
			w.Data[i] += scale * v
		}
		names = append(names, p.target)
	}
	sort.Strings(names)
	return names, nil
}
