package weights

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/densitykv/densitykv/checkpoint"
)

// fp8Formats are the quantisation formats of ComfyUI's fp8 files that
// are read: one float8 tensor and one float32 scale per weight.
var fp8Formats = map[string]bool{"float8_e4m3fn": true, "float8_e5m2": true}

// scaleSuffixes name a weight's per-tensor scale: ComfyUI's legacy
// "scaled_fp8" files (".scale_weight") and its current ones
// (".weight_scale").
var scaleSuffixes = []string{".scale_weight", ".weight_scale"}

// dropSuffixes are the tensors of fp8 files that do not change the
// weights: activation scales (used by fp8 matrix products only).
var dropSuffixes = []string{".scale_input", ".input_scale"}

// applyScales attaches the per-tensor scales of fp8 weights to them
// (RawTensor.Scale) and drops the quantisation's bookkeeping tensors
// (the "scaled_fp8" marker, ".comfy_quant" formats, activation scales),
// checking every format named (in ".comfy_quant" tensors or the
// safetensors metadata's _quantization_metadata) is an fp8 one. It
// returns the tensors left, a description of the quantisation ("" when
// none) and how many tensors it dropped.
func applyScales(ts []checkpoint.RawTensor, meta map[string]string) ([]checkpoint.RawTensor, string, int, error) {
	byName := make(map[string]int, len(ts))
	for i, t := range ts {
		byName[t.Name] = i
	}
	scales := map[string]float32{} // weight name → scale
	drop := map[string]bool{}
	formats := map[string]bool{}
	legacy := false
	if q, ok := meta["_quantization_metadata"]; ok {
		var qm struct {
			Layers map[string]struct {
				Format string `json:"format"`
			} `json:"layers"`
		}
		if err := json.Unmarshal([]byte(q), &qm); err != nil {
			return nil, "", 0, fmt.Errorf("the safetensors metadata's _quantization_metadata: %v", err)
		}
		for layer, c := range qm.Layers {
			if !fp8Formats[c.Format] {
				return nil, "", 0, fmt.Errorf("layer %s is quantised as %q: only fp8 (float8_e4m3fn, float8_e5m2) with per-tensor scales is read", layer, c.Format)
			}
			formats[c.Format] = true
		}
	}
	for _, t := range ts {
		n := t.Name
		switch {
		case n == "scaled_fp8" || strings.HasSuffix(n, ".scaled_fp8"):
			drop[n], legacy = true, true
		case strings.HasSuffix(n, ".comfy_quant"):
			f, err := comfyQuant(t)
			if err != nil {
				return nil, "", 0, err
			}
			if !fp8Formats[f] {
				return nil, "", 0, fmt.Errorf("%s is quantised as %q: only fp8 (float8_e4m3fn, float8_e5m2) with per-tensor scales is read", strings.TrimSuffix(n, ".comfy_quant"), f)
			}
			formats[f], drop[n] = true, true
		case strings.HasSuffix(n, ".weight_scale_2"):
			return nil, "", 0, fmt.Errorf("tensor %s: a two-level (nvfp4) quantisation; only fp8 with per-tensor scales is read", n)
		}
		for _, sfx := range dropSuffixes {
			if strings.HasSuffix(n, sfx) {
				drop[n] = true
			}
		}
		for _, sfx := range scaleSuffixes {
			layer, ok := strings.CutSuffix(n, sfx)
			if !ok {
				continue
			}
			w := layer + ".weight"
			i, ok := byName[w]
			if !ok {
				return nil, "", 0, fmt.Errorf("tensor %s scales %s, which is not in the file", n, w)
			}
			if _, dup := scales[w]; dup {
				return nil, "", 0, fmt.Errorf("weight %s has two scales", w)
			}
			v, err := scalar(t)
			if err != nil {
				return nil, "", 0, err
			}
			if !ts[i].DType.IsFloat() {
				return nil, "", 0, fmt.Errorf("tensor %s scales %s of dtype %s", n, w, ts[i].DType)
			}
			scales[w], drop[n] = v, true
		}
	}
	var out []checkpoint.RawTensor
	fp8 := map[checkpoint.DType]int{}
	for _, t := range ts {
		if drop[t.Name] {
			continue
		}
		if s, ok := scales[t.Name]; ok {
			t.Scale = s
		}
		if t.DType == checkpoint.F8E4M3 || t.DType == checkpoint.F8E5M2 {
			fp8[t.DType]++
		}
		out = append(out, t)
	}
	if len(scales) == 0 && len(fp8) == 0 {
		return out, "", len(ts) - len(out), nil
	}
	var kinds []string
	for d, n := range fp8 {
		kinds = append(kinds, fmt.Sprintf("%d %s", n, d))
	}
	sort.Strings(kinds)
	desc := "fp8: " + strings.Join(kinds, ", ")
	if len(kinds) == 0 {
		desc = "scaled weights"
	}
	if len(scales) > 0 {
		desc += fmt.Sprintf(", %d per-tensor scales", len(scales))
		if legacy {
			desc += " (ComfyUI scaled_fp8)"
		}
	} else {
		desc += ", unscaled"
	}
	return out, desc, len(ts) - len(out), nil
}

// scalar reads a one-value floating-point tensor (a weight's scale); it
// must be finite and not zero.
func scalar(t checkpoint.RawTensor) (float32, error) {
	if t.Elems() != 1 || !t.DType.IsFloat() {
		return 0, fmt.Errorf("tensor %s: a scale must be one floating-point value, not %s %v", t.Name, t.DType, t.Shape)
	}
	var v [1]float32
	if err := t.ReadFloat32(v[:], nil); err != nil {
		return 0, err
	}
	if f := float64(v[0]); f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("tensor %s: scale %v, want a finite nonzero value", t.Name, v[0])
	}
	return v[0], nil
}

// comfyQuant reads a ".comfy_quant" tensor: the JSON of a layer's
// quantisation as uint8 values.
func comfyQuant(t checkpoint.RawTensor) (string, error) {
	if t.DType != checkpoint.U8 && t.DType != checkpoint.I8 || t.Elems() > 1<<16 {
		return "", fmt.Errorf("tensor %s: want the uint8 JSON of a quantisation format, got %s %v", t.Name, t.DType, t.Shape)
	}
	r, err := t.Reader()
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}
	var c struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("tensor %s: %v", t.Name, err)
	}
	return c.Format, nil
}
