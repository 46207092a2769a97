package t5

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/weights"
)

// LoadOptions configures Load.
type LoadOptions struct {
	// Entry selects the top-level entry of a PyTorch checkpoint holding the
	// state dict ("" = the default choice of checkpoint.TorchOptions: Wan's
	// models_t5_umt5-xxl-enc-bf16.pth is the state dict itself).
	Entry string
	// MaxDist and Eps are the two hyper-parameters the tensors do not
	// carry; 0 means Wan's values, 128 and 1e-6.
	MaxDist int
	Eps     float64
	// Precision is the model's Precision (the zero value is gemm.F32,
	// "fp32"). The weights are bfloat16 either way.
	Precision gemm.Precision
	// Progress, when set, is called after each tensor read with the
	// bytes read so far and the total.
	Progress func(done, total int64)
}

// Load reads a umT5 encoder in any layout package weights recognises:
// Wan2.1's models_t5_umt5-xxl-enc-bf16.pth (Wan's T5Encoder names) or a
// safetensors file of it, Hugging Face's UMT5EncoderModel (google/umt5-xxl,
// a diffusers model's text_encoder/ folder, sharded safetensors with an
// index; a whole umT5's decoder is ignored) or ComfyUI's umt5_xxl files
// (fp16, bf16, fp8 with per-tensor scales). The configuration comes from
// the shapes: Vocab and Dim from token_embedding, Layers from the blocks
// present, DimAttn from blocks.0.attn.q, DimFFN from blocks.0.ffn.fc1,
// Buckets and Heads from blocks.0.pos_embedding; MaxDist and Eps from
// the folder's config.json (relative_attention_max_distance,
// layer_norm_epsilon) when opt leaves them 0.
//
// Matrices are kept as bfloat16: BF16 tensors are copied bit for bit;
// F32, F16, F64 and fp8 ones (times their scale) are rounded to the
// nearest bfloat16 (F64 through float32) and Model.Rounded counts the
// values that changed. Norm weights and position tables are kept as
// float32. Everything is checked before the weights are read (missing,
// unexpected and mis-shaped tensors all in one error, non-floating
// dtypes), and every value is checked finite as it is read; errors name
// the file and the tensor. The files are read tensor by tensor, so peak
// memory is the model plus a 1 MB buffer.
func Load(path string, opt LoadOptions) (*Model, error) {
	src, err := weights.Open(path, weights.TextEncoder, weights.Options{Entry: opt.Entry})
	if err != nil {
		return nil, fmt.Errorf("t5: load: %w", err)
	}
	defer src.Close()
	opt = withConfig(opt, src)
	m, err := fromRaw(src.Tensors, opt)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	m.Precision = opt.Precision
	m.Loaded = src.Describe()
	if err := m.checkPrecision(); err != nil {
		return nil, err
	}
	return m, nil
}

// withConfig fills opt's MaxDist and Eps, when 0, from a Hugging Face
// config.json beside the weights.
func withConfig(opt LoadOptions, src *weights.Source) LoadOptions {
	num := func(key string) float64 {
		var v float64
		if raw, ok := src.Config[key]; ok {
			if err := json.Unmarshal(raw, &v); err == nil {
				return v
			}
		}
		return 0
	}
	if v := num("relative_attention_max_distance"); opt.MaxDist == 0 && v >= 1 && v <= 1<<30 && v == math.Trunc(v) {
		opt.MaxDist = int(v)
	}
	if v := num("layer_norm_epsilon"); opt.Eps == 0 && v > 0 && v < 1 {
		opt.Eps = v
	}
	return opt
}

// InferConfig returns the configuration the tensors describe (see Load),
// with MaxDist and Eps from opt.
func InferConfig(tensors []checkpoint.RawTensor, opt LoadOptions) (Config, error) {
	byName := make(map[string]checkpoint.RawTensor, len(tensors))
	for _, t := range tensors {
		byName[t.Name] = t
	}
	dims := func(name string, rank int) ([]int, error) {
		t, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("t5: load: tensor %s missing: cannot infer the configuration", name)
		}
		if len(t.Shape) != rank {
			return nil, fmt.Errorf("t5: load: tensor %s has shape %v, want rank %d", name, t.Shape, rank)
		}
		return t.Shape, nil
	}
	cfg := Config{MaxDist: opt.MaxDist, Eps: opt.Eps}
	if cfg.MaxDist == 0 {
		cfg.MaxDist = 128
	}
	if cfg.Eps == 0 {
		cfg.Eps = 1e-6
	}
	s, err := dims("token_embedding.weight", 2)
	if err != nil {
		return Config{}, err
	}
	cfg.Vocab, cfg.Dim = s[0], s[1]
	for _, t := range tensors {
		rest, ok := strings.CutPrefix(t.Name, "blocks.")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		i, err := strconv.Atoi(num)
		if err != nil || i < 0 || i >= maxLayer || strconv.Itoa(i) != num {
			return Config{}, fmt.Errorf("t5: load: tensor %s: block index %q is not a layer number below %d", t.Name, num, maxLayer)
		}
		cfg.Layers = max(cfg.Layers, i+1)
	}
	if cfg.Layers == 0 {
		return Config{}, errors.New("t5: load: no blocks.<i> tensors: not a T5 encoder state dict")
	}
	if _, ok := byName["pos_embedding.embedding.weight"]; ok {
		if _, ok := byName["blocks.0.pos_embedding.embedding.weight"]; !ok {
			return Config{}, errors.New("t5: load: one shared pos_embedding for all layers (T5 with shared_pos=True): umT5 has a table per layer (blocks.<i>.pos_embedding)")
		}
	}
	if s, err = dims("blocks.0.attn.q.weight", 2); err != nil {
		return Config{}, err
	}
	cfg.DimAttn = s[0]
	if s, err = dims("blocks.0.ffn.fc1.weight", 2); err != nil {
		return Config{}, err
	}
	cfg.DimFFN = s[0]
	if s, err = dims("blocks.0.pos_embedding.embedding.weight", 2); err != nil {
		return Config{}, err
	}
	cfg.Buckets, cfg.Heads = s[0], s[1]
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("t5: load: the tensor shapes give an invalid configuration %+v: %w", cfg, err)
	}
	return cfg, nil
}

// Inspect checks a checkpoint as Load does before it reads any weight
// (the configuration from the shapes; missing, unexpected and mis-shaped
// tensors; non-floating dtypes; the file's records within its size) and
// returns the configuration, without reading the weights: a cheap check
// of an 11 GB encoder before a run starts. Errors name the file and the
// tensor.
func Inspect(path string, opt LoadOptions) (Config, error) {
	src, err := weights.Open(path, weights.TextEncoder, weights.Options{Entry: opt.Entry})
	if err != nil {
		return Config{}, fmt.Errorf("t5: load: %w", err)
	}
	defer src.Close()
	m, _, err := checkRaw(src.Tensors, withConfig(opt, src))
	if err != nil {
		return Config{}, fmt.Errorf("%w (file %s)", err, path)
	}
	return m.Config, nil
}

// checkRaw checks a checkpoint's tensors against the configuration they
// describe and returns the model's empty shell and the tensors by name.
func checkRaw(tensors []checkpoint.RawTensor, opt LoadOptions) (*Model, map[string]checkpoint.RawTensor, error) {
	cfg, err := InferConfig(tensors, opt)
	if err != nil {
		return nil, nil, err
	}
	m, err := newShell(cfg)
	if err != nil {
		return nil, nil, err
	}
	ps := m.params()
	byName := make(map[string]checkpoint.RawTensor, len(tensors))
	sd := make(checkpoint.StateDict, len(tensors))
	for _, t := range tensors {
		byName[t.Name] = t
		sd[t.Name] = &checkpoint.Tensor{Shape: t.Shape}
	}
	want := make([]checkpoint.Expect, len(ps))
	for i, p := range ps {
		want[i] = checkpoint.Expect{Name: p.name, Shape: p.shape}
	}
	if err := sd.Check(want); err != nil {
		return nil, nil, fmt.Errorf("t5: load: %w", err)
	}
	for _, p := range ps {
		if d := byName[p.name].DType; !d.IsFloat() {
			return nil, nil, fmt.Errorf("t5: load: tensor %s has dtype %s, want a floating-point type (BF16, F32, F16, F64)", p.name, d)
		}
	}
	return m, byName, nil
}

// fromRaw builds a model from a checkpoint's tensors.
func fromRaw(tensors []checkpoint.RawTensor, opt LoadOptions) (*Model, error) {
	m, byName, err := checkRaw(tensors, opt)
	if err != nil {
		return nil, err
	}
	ps := m.params()
	buf := make([]byte, 1<<20)
	var done, total int64
	for _, p := range ps {
		total += byName[p.name].Bytes()
	}
	for _, p := range ps {
		t := byName[p.name]
		done += t.Bytes()
		if p.bf != nil {
			*p.bf = make([]uint16, p.elems())
			n, err := readBF16(t, *p.bf, p.shape, buf)
			if err != nil {
				return nil, err
			}
			m.Rounded += n
		} else {
			*p.f32 = make([]float32, p.elems())
			if err := readF32(t, *p.f32, p.shape, buf); err != nil {
				return nil, err
			}
		}
		if opt.Progress != nil {
			opt.Progress(done, total)
		}
	}
	return m, nil
}

// decodeChunks reads t's data in pieces of at most len(buf) bytes (whole
// elements) and hands each piece to put with the flat index of its first
// element.
func decodeChunks(t checkpoint.RawTensor, buf []byte, put func(i0 int, b []byte) error) error {
	r, err := t.Reader()
	if err != nil {
		return fmt.Errorf("t5: load: %w", err)
	}
	es := t.DType.Size()
	buf = buf[:len(buf)/es*es]
	left := t.Bytes()
	i := 0
	for left > 0 {
		b := buf[:min(int64(len(buf)), left)]
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("t5: load: tensor %s: reading %d bytes at element %d: %w", t.Name, len(b), i, err)
		}
		if err := put(i, b); err != nil {
			return err
		}
		i += len(b) / es
		left -= int64(len(b))
	}
	return nil
}

// elemFloat32 decodes element k of little-endian data b of t's floating
// dtype, times t's scale when it has one (a scaled fp8 weight: the
// product rounded to float32).
func elemFloat32(t checkpoint.RawTensor, b []byte, k int) float32 {
	var v [1]float32
	es := t.DType.Size()
	t.DType.Decode(v[:], b[k*es:(k+1)*es])
	if t.Scale != 0 {
		return v[0] * t.Scale
	}
	return v[0]
}

// readBF16 reads t into dst as bfloat16 bits, returning how many values
// were rounded. A non-finite value is an error naming its index.
func readBF16(t checkpoint.RawTensor, dst []uint16, shape []int, buf []byte) (rounded int64, err error) {
	nonFinite := func(i int, v float32) error {
		return fmt.Errorf("t5: load: tensor %s has %v at %s", t.Name, v, index(shape, i))
	}
	err = decodeChunks(t, buf, func(i0 int, b []byte) error {
		n := len(b) / t.DType.Size()
		d := dst[i0 : i0+n]
		if t.DType == checkpoint.BF16 && t.Scale == 0 {
			for k := range d {
				h := binary.LittleEndian.Uint16(b[2*k:])
				if !finiteBF16(h) {
					return nonFinite(i0+k, widen(h))
				}
				d[k] = h
			}
			return nil
		}
		for k := range d {
			v := elemFloat32(t, b, k)
			h := roundBF16(v)
			if !finiteBF16(h) {
				return nonFinite(i0+k, v)
			}
			if widen(h) != v || (t.DType == checkpoint.F64 && t.Scale == 0 && float64(v) != math.Float64frombits(binary.LittleEndian.Uint64(b[8*k:]))) {
				rounded++
			}
			d[k] = h
		}
		return nil
	})
	return rounded, err
}

// readF32 reads t into dst as float32 (F64 rounded to nearest). A
// non-finite value is an error naming its index.
func readF32(t checkpoint.RawTensor, dst []float32, shape []int, buf []byte) error {
	return decodeChunks(t, buf, func(i0 int, b []byte) error {
		n := len(b) / t.DType.Size()
		for k := range n {
			v := elemFloat32(t, b, k)
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("t5: load: tensor %s has %v at %s", t.Name, v, index(shape, i0+k))
			}
			dst[i0+k] = v
		}
		return nil
	})
}
