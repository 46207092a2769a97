// Package weightstest writes small models in the layouts package weights
// reads (the official names, diffusers', Hugging Face's; ComfyUI's
// prefixes and fp8 scales; fp16, bf16 and fp8 values; sharded
// safetensors with or without an index; diffusers model folders), for
// tests that check every layout loads to the same model as the official
// one.
package weightstest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/weights"
)

// Tensor is one tensor under its official name.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// Options says how Write writes.
type Options struct {
	// Layout is the naming's name (weights.Layout.Name): "official" (the
	// default), "diffusers", "Hugging Face".
	Layout string
	// DType is the element type of the weights (matrices: ".weight"
	// tensors of two or more dimensions): F32 (the default), F16, BF16,
	// F8E4M3, F8E5M2. Other is the type of the rest (F32 by default;
	// fp8 files keep biases and norms in a wider type).
	DType, Other checkpoint.DType
	// Scaled gives fp8 weights a per-tensor scale (max |w| / the format's
	// largest value): "legacy" writes ComfyUI's ".scale_weight" tensors
	// and a "scaled_fp8" marker, "comfy" its ".weight_scale" and
	// ".comfy_quant" tensors; "" none.
	Scaled string
	// Prefix is put before every name (ComfyUI's
	// "model.diffusion_model.").
	Prefix string
	// Shards > 1 splits the tensors round-robin over that many files
	// File-0000i-of-0000N.safetensors, with File.safetensors.index.json
	// unless NoIndex.
	Shards  int
	NoIndex bool
	// File is the file's name without extension ("model" by default).
	File string
	// Config, when set, is written as config.json beside the weights.
	Config map[string]any
}

// Quantize returns ts as a reader decodes them once written with o: the
// values rounded to o.DType (nearest, ties to even), fp8 weights as
// float32(fp8 value) × scale.
func Quantize(ts []Tensor, o Options) []Tensor {
	out := make([]Tensor, len(ts))
	for i, t := range ts {
		enc, scale := encode(t, o)
		d := make([]float32, len(t.Data))
		dt := dtypeOf(t, o)
		dt.Decode(d, enc)
		if scale != 0 {
			for k := range d {
				d[k] *= scale
			}
		}
		out[i] = Tensor{Name: t.Name, Shape: t.Shape, Data: d}
	}
	return out
}

func isWeight(t Tensor) bool { return strings.HasSuffix(t.Name, ".weight") && len(t.Shape) >= 2 }

func dtypeOf(t Tensor, o Options) checkpoint.DType {
	d := o.DType
	if !isWeight(t) {
		d = o.Other
	}
	if d == "" {
		d = checkpoint.F32
	}
	return d
}

func isFP8(d checkpoint.DType) bool { return d == checkpoint.F8E4M3 || d == checkpoint.F8E5M2 }

// encode returns t's bytes in its dtype under o and its scale (0: none).
func encode(t Tensor, o Options) ([]byte, float32) {
	d := dtypeOf(t, o)
	var scale float32
	vals := t.Data
	if isFP8(d) && o.Scaled != "" {
		m := float32(0)
		for _, v := range vals {
			m = max(m, float32(math.Abs(float64(v))))
		}
		scale = 1
		if m > 0 {
			scale = m / maxFinite(d)
		}
		vals = make([]float32, len(t.Data))
		for i, v := range t.Data {
			vals[i] = v / scale
		}
	}
	b := make([]byte, 0, len(vals)*d.Size())
	for _, v := range vals {
		switch d {
		case checkpoint.F32:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		case checkpoint.BF16:
			b = binary.LittleEndian.AppendUint16(b, bf16(v))
		case checkpoint.F16:
			b = binary.LittleEndian.AppendUint16(b, uint16(nearest(v, f16Table())))
		case checkpoint.F8E4M3:
			b = append(b, byte(nearest(v, e4m3Table())))
		case checkpoint.F8E5M2:
			b = append(b, byte(nearest(v, e5m2Table())))
		default:
			panic("weightstest: dtype " + string(d))
		}
	}
	return b, scale
}

// bf16 rounds v to bfloat16, nearest with ties to even.
func bf16(v float32) uint16 {
	u := math.Float32bits(v)
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// table is the positive finite values of a small float format, by code.
type table struct {
	vals []float32 // vals[c] for codes 0..len-1, ascending
	sign uint32    // the sign bit
}

func maxFinite(d checkpoint.DType) float32 {
	if d == checkpoint.F8E4M3 {
		t := e4m3Table()
		return t.vals[len(t.vals)-1]
	}
	t := e5m2Table()
	return t.vals[len(t.vals)-1]
}

var f16T, e4m3T, e5m2T *table

func f16Table() *table {
	if f16T == nil {
		f16T = &table{sign: 0x8000}
		for c := 0; c < 0x7c00; c++ {
			f16T.vals = append(f16T.vals, checkpoint.HalfToFloat32(uint16(c)))
		}
	}
	return f16T
}

func e4m3Table() *table {
	if e4m3T == nil {
		e4m3T = &table{sign: 0x80}
		for c := 0; c < 0x7f; c++ {
			e4m3T.vals = append(e4m3T.vals, checkpoint.E4M3ToFloat32(byte(c)))
		}
	}
	return e4m3T
}

func e5m2Table() *table {
	if e5m2T == nil {
		e5m2T = &table{sign: 0x80}
		for c := 0; c < 0x7c; c++ {
			e5m2T.vals = append(e5m2T.vals, checkpoint.E5M2ToFloat32(byte(c)))
		}
	}
	return e5m2T
}

// nearest returns the code of the format's value nearest v (ties to the
// even code); beyond the largest value it panics (the tests scale).
func nearest(v float32, t *table) uint32 {
	a := float32(math.Abs(float64(v)))
	var sign uint32
	if math.Signbit(float64(v)) {
		sign = t.sign
	}
	top := t.vals[len(t.vals)-1]
	if a > top {
		if a-top <= (top-t.vals[len(t.vals)-2])/2 {
			return sign | uint32(len(t.vals)-1)
		}
		panic(fmt.Sprintf("weightstest: %v beyond the format's largest value %v", v, top))
	}
	i := sort.Search(len(t.vals), func(i int) bool { return t.vals[i] >= a })
	if t.vals[i] == a || i == 0 {
		return sign | uint32(i)
	}
	lo, hi := float64(t.vals[i-1]), float64(t.vals[i])
	switch d := (float64(a) - lo) - (hi - float64(a)); {
	case d < 0:
		return sign | uint32(i-1)
	case d > 0:
		return sign | uint32(i)
	case (i-1)%2 == 0:
		return sign | uint32(i-1)
	}
	return sign | uint32(i)
}

// Write writes ts (official names) in kind k's layout o into the folder
// dir and returns the path to give a loader: the file, or dir when
// sharded.
func Write(dir string, k weights.Kind, ts []Tensor, o Options) (string, error) {
	if o.Layout == "" {
		o.Layout = "official"
	}
	l := weights.Find(k, o.Layout)
	if l == nil {
		return "", fmt.Errorf("weightstest: no %s layout %q", k, o.Layout)
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	var out []checkpoint.WriteTensor
	if isFP8(o.DType) && o.Scaled == "legacy" {
		out = append(out, checkpoint.WriteTensor{Name: o.Prefix + "scaled_fp8", Shape: []int{0}, Data: checkpoint.Encoded{DType: o.DType}})
	}
	for _, t := range ts {
		n, ok := l.FromOfficial(t.Name, names)
		if !ok {
			return "", fmt.Errorf("weightstest: the %s layout has no name for %s", o.Layout, t.Name)
		}
		n = o.Prefix + n
		b, scale := encode(t, o)
		out = append(out, checkpoint.WriteTensor{Name: n, Shape: t.Shape, Data: checkpoint.Encoded{DType: dtypeOf(t, o), Bytes: b}})
		if scale == 0 {
			continue
		}
		layer := strings.TrimSuffix(n, ".weight")
		switch o.Scaled {
		case "legacy":
			out = append(out, checkpoint.WriteTensor{Name: layer + ".scale_weight", Shape: []int{}, Data: []float32{scale}})
		case "comfy":
			format := "float8_e4m3fn"
			if o.DType == checkpoint.F8E5M2 {
				format = "float8_e5m2"
			}
			q, _ := json.Marshal(map[string]string{"format": format})
			out = append(out, checkpoint.WriteTensor{Name: layer + ".weight_scale", Shape: []int{}, Data: []float32{scale}},
				checkpoint.WriteTensor{Name: layer + ".comfy_quant", Shape: []int{len(q)}, Data: checkpoint.Encoded{DType: checkpoint.U8, Bytes: q}})
		default:
			return "", fmt.Errorf("weightstest: Scaled %q", o.Scaled)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if o.Config != nil {
		b, err := json.MarshalIndent(o.Config, "", "  ")
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
			return "", err
		}
	}
	file := o.File
	if file == "" {
		file = "model"
	}
	if o.Shards <= 1 {
		p := filepath.Join(dir, file+".safetensors")
		return p, checkpoint.WriteSafetensorsFile(p, out, nil)
	}
	parts := make([][]checkpoint.WriteTensor, o.Shards)
	for i, t := range out {
		parts[i%o.Shards] = append(parts[i%o.Shards], t)
	}
	idx := map[string]any{"metadata": map[string]any{"total_size": 0}}
	wm := map[string]string{}
	for s, part := range parts {
		name := fmt.Sprintf("%s-%05d-of-%05d.safetensors", file, s+1, o.Shards)
		for _, t := range part {
			wm[t.Name] = name
		}
		if err := checkpoint.WriteSafetensorsFile(filepath.Join(dir, name), part, nil); err != nil {
			return "", err
		}
	}
	idx["weight_map"] = wm
	if !o.NoIndex {
		b, err := json.MarshalIndent(idx, "", "  ")
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, file+".safetensors.index.json"), b, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// ModelFolder writes the skeleton of a diffusers model folder at dir:
// model_index.json naming the components (transformer, vae,
// text_encoder, tokenizer) whose sub-folders the caller fills.
func ModelFolder(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	idx := map[string]any{"_class_name": "WanPipeline", "_diffusers_version": "0.33.0",
		"transformer": []string{"diffusers", "WanTransformer3DModel"}, "vae": []string{"diffusers", "AutoencoderKLWan"},
		"text_encoder": []string{"transformers", "UMT5EncoderModel"}, "tokenizer": []string{"transformers", "T5TokenizerFast"},
		"scheduler": []string{"diffusers", "UniPCMultistepScheduler"}}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, weights.ModelIndex), b, 0o644)
}

// WritePair writes ts twice below dir for a layout test: ref in the
// official layout, with the values quantized as o stores them (so both
// hold the same weights), and path in o's layout, inside a diffusers model
// folder's sub-folder sub when sub is not empty (path is then the model
// folder, as --model takes it).
func WritePair(dir string, k weights.Kind, ts []Tensor, o Options, sub string) (ref, path string, err error) {
	if ref, err = Write(filepath.Join(dir, "ref"), k, Quantize(ts, o), Options{}); err != nil {
		return "", "", err
	}
	at := filepath.Join(dir, "layout")
	if sub != "" {
		if err := ModelFolder(at); err != nil {
			return "", "", err
		}
		if _, err := Write(filepath.Join(at, sub), k, ts, o); err != nil {
			return "", "", err
		}
		return ref, at, nil
	}
	path, err = Write(at, k, ts, o)
	return ref, path, err
}

// FromStateDict lists a state dict's tensors (sorted by name).
func FromStateDict(sd checkpoint.StateDict) []Tensor {
	var out []Tensor
	for _, n := range sd.Names() {
		out = append(out, Tensor{Name: n, Shape: sd[n].Shape, Data: sd[n].Data})
	}
	return out
}
