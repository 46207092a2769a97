package weights

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/densitykv/densitykv/checkpoint"
)

// LayoutError refuses weights densitykv does not recognise as the kind
// asked for, in a few lines: what was found (the files, the first tensor
// names), what it looks like, and what the flag reads.
type LayoutError struct {
	Path  string
	Want  Kind
	Found string // what the path holds
	Looks string // what it looks like ("" when nothing is recognised)
}

func (e *LayoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "weights: %s %s: not a %s densitykv reads", e.Want.Flag(), e.Path, e.Want)
	fmt.Fprintf(&b, "\n  found: %s", e.Found)
	if e.Looks != "" {
		fmt.Fprintf(&b, "\n  it looks like: %s", e.Looks)
	}
	fmt.Fprintf(&b, "\n  %s reads:", e.Want.Flag())
	for _, s := range Supported(e.Want) {
		fmt.Fprintf(&b, "\n    - %s", s)
	}
	return b.String()
}

// Options configures Open.
type Options struct {
	// Entry is the entry of a PyTorch checkpoint that holds the state
	// dict ("" = checkpoint.AutoEntries, then the top level).
	Entry string
}

// Source is a part's weights opened by Open: their tensors under the
// official names, read on demand from the files.
type Source struct {
	Path   string   // as given
	Kind   Kind     // what it holds
	Files  []string // the weight files (one, or the shards)
	Index  string   // the shard index ("" without)
	Layout *Layout
	// Prefix is the wrapper stripped from every name ("" without; e.g.
	// ComfyUI's "model.diffusion_model.").
	Prefix string
	// Quant describes fp8 weights stored with per-tensor scales (""
	// without).
	Quant string
	// Tensors are the model's tensors under their official names, in
	// file order; RawTensor.StoredName is the file's name. Scaled fp8
	// weights carry their Scale.
	Tensors []checkpoint.RawTensor
	// Ignored counts tensors the model does not use (a tied copy, a
	// whole umT5's decoder, the scale and marker tensors of fp8 files).
	Ignored int
	// Config is the folder's config.json (diffusers, transformers), nil
	// without one.
	Config map[string]json.RawMessage
	// Metadata is the first file's safetensors __metadata__.
	Metadata map[string]string

	files []*checkpoint.RawFile
}

// Close releases the files.
func (s *Source) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	s.files = nil
	return errors.Join(errs...)
}

// Bytes returns the size of the tensors' data.
func (s *Source) Bytes() int64 {
	var n int64
	for _, t := range s.Tensors {
		n += t.Bytes()
	}
	return n
}

// DTypes summarises the tensors' element types, most frequent first
// ("BF16", "F8_E4M3 + F32").
func (s *Source) DTypes() string {
	n := map[checkpoint.DType]int{}
	for _, t := range s.Tensors {
		n[t.DType]++
	}
	var ds []checkpoint.DType
	for d := range n {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(a, b int) bool {
		if n[ds[a]] != n[ds[b]] {
			return n[ds[a]] > n[ds[b]]
		}
		return ds[a] < ds[b]
	})
	var out []string
	for _, d := range ds {
		out = append(out, string(d))
	}
	return strings.Join(out, " + ")
}

// Describe is one line saying what was opened: the naming, the files and
// the element types ("diffusers WanTransformer3DModel (diffusers naming),
// 2 shards of diffusion_pytorch_model.safetensors.index.json, BF16").
func (s *Source) Describe() string {
	var b strings.Builder
	b.WriteString(s.Layout.String())
	switch {
	case s.Index != "":
		fmt.Fprintf(&b, ", %d shards of %s", len(s.Files), filepath.Base(s.Index))
	case len(s.Files) > 1:
		fmt.Fprintf(&b, ", %d shards", len(s.Files))
	default:
		fmt.Fprintf(&b, ", %s", filepath.Base(s.Files[0]))
	}
	if s.Prefix != "" {
		fmt.Fprintf(&b, ", names under %q", s.Prefix)
	}
	fmt.Fprintf(&b, ", %s", s.DTypes())
	if s.Quant != "" {
		fmt.Fprintf(&b, " (%s)", s.Quant)
	}
	return b.String()
}

// Open finds the weights of kind k at path (a file, a shard index, a
// folder holding one model, or a diffusers model folder), lists their
// tensors without reading the data, recognises their layout (Layouts)
// and maps the names onto the official ones. Weights it does not
// recognise as k are a *LayoutError saying what they look like; names the
// layout does not know, and two names for one tensor, are errors naming
// them. Close releases the files.
func Open(path string, k Kind, opt Options) (*Source, error) {
	if k == LoRA || k == Tokenizer || k == Unknown {
		return nil, fmt.Errorf("weights: Open reads model weights, not a %s", k)
	}
	fs, err := findFiles(path, k)
	if err != nil {
		return nil, err
	}
	s := &Source{Path: path, Kind: k, Files: fs.files, Index: fs.index}
	raw, err := s.openFiles(fs, opt)
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.recognise(raw); err != nil {
		s.Close()
		return nil, err
	}
	if fs.config != "" {
		if err := readJSON(fs.config, &s.Config); err != nil {
			s.Close()
			return nil, fmt.Errorf("weights: %s %s: %s: %w", k.Flag(), path, fs.config, err)
		}
	}
	return s, nil
}

// openFiles opens every file and returns their tensors (names as
// NormalizeKey leaves them), checking a shard index against the shards.
func (s *Source) openFiles(fs *fileSet, opt Options) ([]checkpoint.RawTensor, error) {
	var idx shardIndex
	if fs.index != "" {
		if err := readJSON(fs.index, &idx); err != nil {
			return nil, fmt.Errorf("weights: %s shard index %s: %w", s.Kind.Flag(), fs.index, err)
		}
	}
	var out []checkpoint.RawTensor
	from := map[string]string{} // tensor → file
	for _, f := range fs.files {
		rf, err := checkpoint.OpenRaw(f, checkpoint.TorchOptions{Entry: opt.Entry})
		if err != nil {
			return nil, fmt.Errorf("weights: %s %s: %w", s.Kind.Flag(), s.Path, err)
		}
		s.files = append(s.files, rf)
		if s.Metadata == nil {
			s.Metadata = rf.Metadata
		}
		for _, t := range rf.Tensors {
			if prev, dup := from[t.Name]; dup {
				return nil, fmt.Errorf("weights: %s %s: tensor %s is in %s and in %s", s.Kind.Flag(), s.Path, t.Name, prev, f)
			}
			from[t.Name] = f
			out = append(out, t)
		}
	}
	if fs.index != "" {
		var bad []string
		for name, f := range idx.WeightMap {
			got, ok := from[checkpoint.NormalizeKey(name)]
			if !ok {
				bad = append(bad, fmt.Sprintf("%s (in no shard)", name))
			} else if filepath.Base(got) != f {
				bad = append(bad, fmt.Sprintf("%s (in %s, the index says %s)", name, filepath.Base(got), f))
			}
		}
		inIndex := map[string]bool{}
		for name := range idx.WeightMap {
			inIndex[checkpoint.NormalizeKey(name)] = true
		}
		for _, t := range out {
			if !inIndex[t.Name] {
				bad = append(bad, fmt.Sprintf("%s (in %s, not in the index)", t.Name, filepath.Base(from[t.Name])))
			}
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			return nil, fmt.Errorf("weights: %s %s: the shards do not match their index %s: %s", s.Kind.Flag(), s.Path, filepath.Base(fs.index), firstN(bad, 6))
		}
	}
	return out, nil
}

// recognise applies fp8 scales, strips a wrapper prefix, picks the
// layout and renames the tensors.
func (s *Source) recognise(raw []checkpoint.RawTensor) error {
	names := make([]string, len(raw))
	for i, t := range raw {
		names[i] = t.Name
	}
	if len(raw) == 0 {
		return &LayoutError{Path: s.Path, Want: s.Kind, Found: s.found(names)}
	}
	ts, quant, ignored, err := applyScales(raw, s.Metadata)
	if err != nil {
		return fmt.Errorf("weights: %s %s: %w", s.Kind.Flag(), s.Path, err)
	}
	s.Quant, s.Ignored = quant, ignored
	bare := make([]string, len(ts))
	for i, t := range ts {
		bare[i] = t.Name
	}
	s.Prefix = stripPrefix(bare, func(string) bool { return false })
	for i := range bare {
		bare[i] = strings.TrimPrefix(bare[i], s.Prefix)
	}
	for _, l := range identify(bare) {
		if l.Kind == s.Kind {
			s.Layout = l
			break
		}
	}
	if s.Layout == nil {
		return &LayoutError{Path: s.Path, Want: s.Kind, Found: s.found(names), Looks: looksLike(bare)}
	}
	var unknown []string
	seen := map[string]string{}
	for i, t := range ts {
		name, drop, ok := s.Layout.toOfficial(bare[i], bare)
		switch {
		case !ok:
			unknown = append(unknown, t.Name)
			continue
		case drop:
			s.Ignored++
			continue
		}
		if prev, dup := seen[name]; dup {
			return fmt.Errorf("weights: %s %s: tensors %s and %s are both %s", s.Kind.Flag(), s.Path, prev, t.Name, name)
		}
		seen[name] = t.Name
		if name != t.Name {
			t.Stored = t.Name
			t.Name = name
		}
		s.Tensors = append(s.Tensors, t)
	}
	if len(unknown) > 0 {
		return fmt.Errorf("weights: %s %s: %s, but %d of its %d tensors have no place in it: %s%s", s.Kind.Flag(), s.Path, s.Layout, len(unknown), len(ts), firstN(unknown, 8), hint(unknown))
	}
	return nil
}

// hint says what unknown DiT tensors suggest.
func hint(unknown []string) string {
	for _, n := range unknown {
		if strings.Contains(n, "img_emb") || strings.Contains(n, "image_embedder") || strings.Contains(n, "k_img") || strings.Contains(n, "add_k_proj") {
			return " (an image-to-video model: densitykv runs Wan2.1's text-to-video DiT)"
		}
		if strings.Contains(n, "vace") {
			return " (a VACE model: densitykv runs Wan2.1's text-to-video DiT)"
		}
	}
	return ""
}

// found describes what the files hold for a LayoutError.
func (s *Source) found(names []string) string {
	files := fmt.Sprintf("%d file", len(s.Files))
	if len(s.Files) == 1 {
		files = filepath.Base(s.Files[0])
	} else if len(s.Files) > 1 {
		files += "s"
	}
	if len(names) == 0 {
		return files + " with no tensors"
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	return fmt.Sprintf("%s, %d tensors: %s", files, len(names), firstN(sorted, 6))
}

// looksLike says what tensor names look like.
func looksLike(names []string) string {
	if isLoRA(names) {
		return "LoRA adapters: pass them to --lora"
	}
	ls := identify(names)
	if len(ls) == 0 {
		return "nothing of Wan2.1 (no tensor name of a Wan DiT, VAE, umT5 encoder or LoRA)"
	}
	var out []string
	for _, l := range ls {
		out = append(out, fmt.Sprintf("a %s in the %s naming: pass it to %s", l.Kind, l.Name, l.Kind.Flag()))
	}
	return strings.Join(out, "; or ")
}
