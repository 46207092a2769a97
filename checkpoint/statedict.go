package checkpoint

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Tensor is a dense float32 tensor of a state dict, row-major.
type Tensor struct {
	Shape []int
	Data  []float32
}

// StateDict maps normalised parameter names to tensors.
type StateDict map[string]*Tensor

// Names returns the keys in sorted order.
func (sd StateDict) Names() []string {
	out := make([]string, 0, len(sd))
	for k := range sd {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// NormalizeKey maps a released checkpoint key onto the bare module name:
// it removes every "_fsdp_wrapped_module." and "_orig_mod." segment and a
// leading "module." and "model." prefix ("model.blocks.0.self_attn.q.weight"
// → "blocks.0.self_attn.q.weight").
func NormalizeKey(k string) string {
	k = strings.ReplaceAll(k, "_fsdp_wrapped_module.", "")
	k = strings.ReplaceAll(k, "_orig_mod.", "")
	k = strings.TrimPrefix(k, "module.")
	k = strings.TrimPrefix(k, "model.")
	return k
}

// LoadSafetensors reads every tensor of a safetensors file as float32 into
// a state dict with normalised keys. Every tensor must be floating-point:
// an integer tensor is an error naming it (read such files with
// NewSafetensors and Int64).
func LoadSafetensors(r io.ReaderAt, size int64) (StateDict, error) {
	s, err := NewSafetensors(r, size)
	if err != nil {
		return nil, err
	}
	out := make(StateDict, len(s.names))
	for _, n := range s.names {
		d, shape, err := s.Float32(n)
		if err != nil {
			return nil, err
		}
		nk := NormalizeKey(n)
		if _, dup := out[nk]; dup {
			return nil, fmt.Errorf("checkpoint: safetensors: keys normalise to the same name %q", nk)
		}
		out[nk] = &Tensor{Shape: shape, Data: d}
	}
	return out, nil
}

// torchExt lists the file extensions LoadFile treats as PyTorch checkpoints.
var torchExt = map[string]bool{".pt": true, ".pth": true, ".bin": true, ".ckpt": true}

// LoadFile reads a state dict from a .safetensors file or a PyTorch zip
// checkpoint (.pt, .pth, .bin), chosen by the file's first bytes ("PK" for a
// zip archive, else safetensors); a file with a PyTorch extension that is
// neither is an error saying it is not a zip archive. opt applies to
// PyTorch checkpoints only.
func LoadFile(p string, opt TorchOptions) (StateDict, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	var magic [4]byte
	n, _ := f.ReadAt(magic[:], 0)
	var sd StateDict
	switch {
	case n == 4 && string(magic[:]) == zipMagic:
		sd, err = LoadTorch(f, st.Size(), opt)
	default:
		sd, err = LoadSafetensors(f, st.Size())
		if err != nil && torchExt[strings.ToLower(filepath.Ext(p))] {
			err = fmt.Errorf("checkpoint: load: not a zip archive (nor safetensors): a %s file must be a PyTorch checkpoint in torch.save's zip format (PyTorch ≥ 1.6): %w", filepath.Ext(p), ErrFormat)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, p)
	}
	return sd, nil
}

// Expect is one parameter a model requires: its normalised name and shape.
type Expect struct {
	Name  string
	Shape []int
}

// Check compares sd with the expected parameters and returns one error that
// counts the missing, unexpected and mis-shaped tensors and names the
// first CheckNames of each (nil when they all match).
func (sd StateDict) Check(want []Expect) error {
	var missing, shape []string
	seen := make(map[string]bool, len(want))
	for _, e := range want {
		seen[e.Name] = true
		t, ok := sd[e.Name]
		if !ok {
			missing = append(missing, e.Name)
			continue
		}
		if !slices.Equal(t.Shape, e.Shape) {
			shape = append(shape, fmt.Sprintf("%s %v (want %v)", e.Name, t.Shape, e.Shape))
		}
	}
	var extra []string
	for _, n := range sd.Names() {
		if !seen[n] {
			extra = append(extra, n)
		}
	}
	if len(missing)+len(shape)+len(extra) == 0 {
		return nil
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("%d missing: %s", len(missing), firstNames(missing)))
	}
	if len(extra) > 0 {
		parts = append(parts, fmt.Sprintf("%d unexpected: %s", len(extra), firstNames(extra)))
	}
	if len(shape) > 0 {
		parts = append(parts, fmt.Sprintf("%d mis-shaped: %s", len(shape), firstNames(shape)))
	}
	return fmt.Errorf("checkpoint: state dict does not match the model: %s", strings.Join(parts, "; "))
}

// CheckNames is how many tensors of each kind Check's error names.
const CheckNames = 10

// firstNames joins the first CheckNames names, counting the rest.
func firstNames(s []string) string {
	if len(s) <= CheckNames {
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("%s, … (%d more)", strings.Join(s[:CheckNames], ", "), len(s)-CheckNames)
}
