package weights

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/checkpoint"
)

// Adapter is one low-rank adapter of a LoRA file: the weight it changes
// by (alpha/r)·B·A.
type Adapter struct {
	Target string               // the official name of the weight ("blocks.0.self_attn.q.weight")
	Module string               // the module as the file names it
	A, B   checkpoint.RawTensor // A (down) [r][in], B (up) [out][r]
	Alpha  float64              // the file's alpha for it (a ".alpha" tensor); 0 without
}

// Rank is the adapter's rank r, A's first dimension.
func (a Adapter) Rank() int { return a.A.Shape[0] }

// LoRAFile is a LoRA opened by OpenLoRA: its adapters, with the rank and
// alpha the file states.
type LoRAFile struct {
	Path  string
	Files []string
	// Naming is the file's naming: "PEFT" (lora_A/lora_B under
	// base_model.model.), "diffusers" (lora_A/lora_B under transformer.,
	// diffusers module names), "ComfyUI" (diffusion_model.…,
	// lora_down/lora_up or lora_A/lora_B, .alpha), "kohya" (lora_unet_…).
	Naming string
	Entry  string // the PyTorch entry read ("generator_lora" for LongLive)
	// Adapters, sorted by Target.
	Adapters []Adapter
	// Alpha is the alpha the file states for every adapter (0: none),
	// and AlphaFrom where it says so (".alpha tensors",
	// "adapter_config.json", "safetensors metadata").
	Alpha     float64
	AlphaFrom string

	files []*checkpoint.RawFile
}

// Close releases the files.
func (l *LoRAFile) Close() error {
	var err error
	for _, f := range l.files {
		if e := f.Close(); e != nil && err == nil {
			err = e
		}
	}
	l.files = nil
	return err
}

// Rank returns the adapters' rank, or 0 when they have several.
func (l *LoRAFile) Rank() int {
	r := 0
	for i, a := range l.Adapters {
		if i == 0 {
			r = a.Rank()
		} else if a.Rank() != r {
			return 0
		}
	}
	return r
}

// Ranks lists the adapters' distinct ranks, ascending.
func (l *LoRAFile) Ranks() []int {
	var rs []int
	for _, a := range l.Adapters {
		if !slices.Contains(rs, a.Rank()) {
			rs = append(rs, a.Rank())
		}
	}
	sort.Ints(rs)
	return rs
}

// loraSuffixes are the factor names: A (down) and B (up).
var loraSuffixes = [][2]string{
	{".lora_A.default.weight", ".lora_B.default.weight"},
	{".lora_A.weight", ".lora_B.weight"},
	{".lora_down.weight", ".lora_up.weight"},
	{".lora.down.weight", ".lora.up.weight"},
	{"_lora.down.weight", "_lora.up.weight"},
}

// notLoRA are adapter kinds other than LoRA, which are refused.
var notLoRA = map[string]string{
	".diff": "a full weight difference", ".diff_b": "a full bias difference", ".hada_w1_a": "LoHa", ".lokr_w1": "LoKr",
	".lokr_w1_a": "LoKr", ".a1.weight": "GLoRA", ".w_norm": "a norm difference", ".dora_scale": "DoRA",
}

// OpenLoRA opens LoRA adapters of the DiT whose Linear weights are
// targets (official names): a file (LongLive's .pt, whose
// "generator_lora" entry is read; safetensors), or a folder (PEFT's
// adapter_model.safetensors with adapter_config.json). Module names in
// every naming are mapped onto targets; a factor without its pair, a
// module that is no target, factors that do not compose, two adapters of
// one weight and adapter kinds other than LoRA (LoHa, LoKr, full
// differences, DoRA) are errors naming the tensors. The rank and alpha
// the file states (".alpha" tensors, adapter_config.json's r and
// lora_alpha, the safetensors metadata) are checked against the factors
// and returned.
func OpenLoRA(path string, targets []string) (*LoRAFile, error) {
	fs, err := findFiles(path, LoRA)
	if err != nil {
		return nil, err
	}
	l := &LoRAFile{Path: path, Files: fs.files}
	if err := l.open(fs, targets); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *LoRAFile) open(fs *fileSet, targets []string) error {
	flag := LoRA.Flag()
	var ts []checkpoint.RawTensor
	var meta map[string]string
	for _, f := range fs.files {
		entry := ""
		if ents, err := checkpoint.TorchFileEntries(f); err == nil && slices.Contains(ents, "generator_lora") {
			entry = "generator_lora"
		}
		rf, err := checkpoint.OpenRaw(f, checkpoint.TorchOptions{Entry: entry})
		if err != nil {
			return fmt.Errorf("weights: %s %s: %w", flag, l.Path, err)
		}
		l.files = append(l.files, rf)
		l.Entry = entry
		if meta == nil {
			meta = rf.Metadata
		}
		ts = append(ts, rf.Tensors...)
	}
	names := make([]string, len(ts))
	byName := map[string]checkpoint.RawTensor{}
	for i, t := range ts {
		names[i] = t.Name
		byName[t.Name] = t
	}
	if !isLoRA(names) {
		src := &Source{Path: l.Path, Files: l.Files}
		return &LayoutError{Path: l.Path, Want: LoRA, Found: src.found(names), Looks: looksLike(names)}
	}
	resolve := moduleResolver(targets)
	used := map[string]bool{}
	alphas := map[string]float64{} // module → .alpha
	seen := map[string]string{}    // target → module
	var stray, unknown []string
	for _, n := range names {
		for sfx, what := range notLoRA {
			if strings.HasSuffix(n, sfx) {
				return fmt.Errorf("weights: %s %s: tensor %s is %s, not a LoRA factor; only LoRA (down/up, A/B) adapters are merged", flag, l.Path, n, what)
			}
		}
		if mod, ok := strings.CutSuffix(n, ".alpha"); ok {
			v, err := scalar(byName[n])
			if err != nil {
				return fmt.Errorf("weights: %s %s: %w", flag, l.Path, err)
			}
			alphas[mod], used[n] = float64(v), true
			continue
		}
		for _, sfx := range loraSuffixes {
			mod, ok := strings.CutSuffix(n, sfx[0])
			if !ok {
				continue
			}
			bn := mod + sfx[1]
			b, ok := byName[bn]
			if !ok {
				return fmt.Errorf("weights: %s %s: %s has no matching %s", flag, l.Path, n, bn)
			}
			used[n], used[bn] = true, true
			target, naming, ok := resolve(mod)
			if !ok {
				unknown = append(unknown, mod)
				break
			}
			if prev, dup := seen[target]; dup {
				return fmt.Errorf("weights: %s %s: %s and %s both adapt %s", flag, l.Path, prev, mod, target)
			}
			seen[target] = mod
			if l.Naming == "" {
				l.Naming = naming
			}
			l.Adapters = append(l.Adapters, Adapter{Target: target, Module: mod, A: byName[n], B: b})
			break
		}
	}
	for _, n := range names {
		if !used[n] {
			stray = append(stray, n)
		}
	}
	if len(stray) > 0 {
		sort.Strings(stray)
		return fmt.Errorf("weights: %s %s: %d tensors are not LoRA factors: %s", flag, l.Path, len(stray), firstN(stray, 8))
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("weights: %s %s: %d adapted modules are no Linear layer of the Wan DiT: %s", flag, l.Path, len(unknown), firstN(unknown, 8))
	}
	if len(l.Adapters) == 0 {
		return fmt.Errorf("weights: %s %s: no LoRA factors among %d tensors", flag, l.Path, len(names))
	}
	for i := range l.Adapters {
		a := &l.Adapters[i]
		if len(a.A.Shape) != 2 || len(a.B.Shape) != 2 || a.A.Shape[0] != a.B.Shape[1] || a.A.Shape[0] == 0 || !a.A.DType.IsFloat() || !a.B.DType.IsFloat() {
			return fmt.Errorf("weights: %s %s: %s: A %s %v and B %s %v do not compose (want floating A [r, in], B [out, r])", flag, l.Path, a.Module, a.A.DType, a.A.Shape, a.B.DType, a.B.Shape)
		}
		if v, ok := alphas[a.Module]; ok {
			a.Alpha = v
			delete(alphas, a.Module)
		}
	}
	for mod := range alphas {
		return fmt.Errorf("weights: %s %s: %s.alpha has no adapter", flag, l.Path, mod)
	}
	sort.Slice(l.Adapters, func(i, j int) bool { return l.Adapters[i].Target < l.Adapters[j].Target })
	return l.readAlpha(fs, meta)
}

// readAlpha sets the file's alpha: the ".alpha" tensors when they all
// agree (kohya, ComfyUI), adapter_config.json (PEFT), the safetensors
// metadata (diffusers' lora_adapter_metadata, kohya's ss_network_alpha).
func (l *LoRAFile) readAlpha(fs *fileSet, meta map[string]string) error {
	flag := LoRA.Flag()
	tensors := 0
	for _, a := range l.Adapters {
		if a.Alpha != 0 {
			tensors++
		}
	}
	if tensors > 0 {
		if tensors != len(l.Adapters) {
			return fmt.Errorf("weights: %s %s: %d of %d adapters have an .alpha tensor; want all or none", flag, l.Path, tensors, len(l.Adapters))
		}
		same := true
		for _, a := range l.Adapters {
			same = same && a.Alpha == l.Adapters[0].Alpha
		}
		if same {
			l.Alpha = l.Adapters[0].Alpha
		}
		l.AlphaFrom = ".alpha tensors"
		return nil
	}
	cfg := filepath.Join(filepath.Dir(fs.files[0]), "adapter_config.json")
	if fileExists(cfg) {
		var c struct {
			R            int            `json:"r"`
			LoRAAlpha    float64        `json:"lora_alpha"`
			RankPattern  map[string]any `json:"rank_pattern"`
			AlphaPattern map[string]any `json:"alpha_pattern"`
			UseRSLoRA    bool           `json:"use_rslora"`
			UseDoRA      bool           `json:"use_dora"`
		}
		if err := readJSON(cfg, &c); err != nil {
			return fmt.Errorf("weights: %s %s: %s: %w", flag, l.Path, cfg, err)
		}
		switch {
		case len(c.RankPattern) > 0 || len(c.AlphaPattern) > 0:
			return fmt.Errorf("weights: %s %s: %s sets rank_pattern/alpha_pattern (per-module ranks), which are not read", flag, l.Path, cfg)
		case c.UseRSLoRA || c.UseDoRA:
			return fmt.Errorf("weights: %s %s: %s asks for rsLoRA or DoRA; only plain LoRA (scale alpha/r) is merged", flag, l.Path, cfg)
		case c.R != 0 && l.Rank() != c.R:
			return fmt.Errorf("weights: %s %s: %s says r = %d, the adapters have rank %v", flag, l.Path, cfg, c.R, l.Ranks())
		}
		if c.LoRAAlpha > 0 {
			l.Alpha, l.AlphaFrom = c.LoRAAlpha, "adapter_config.json"
		}
		return nil
	}
	if s, ok := meta["lora_adapter_metadata"]; ok {
		var c struct {
			R         int     `json:"r"`
			LoRAAlpha float64 `json:"lora_alpha"`
		}
		if err := json.Unmarshal([]byte(s), &c); err == nil && c.LoRAAlpha > 0 {
			if c.R != 0 && l.Rank() != c.R {
				return fmt.Errorf("weights: %s %s: its metadata says r = %d, the adapters have rank %v", flag, l.Path, c.R, l.Ranks())
			}
			l.Alpha, l.AlphaFrom = c.LoRAAlpha, "safetensors metadata"
		}
		return nil
	}
	if s, ok := meta["ss_network_alpha"]; ok {
		if v, err := strconv.ParseFloat(s, 64); err == nil && v > 0 && !math.IsInf(v, 0) {
			l.Alpha, l.AlphaFrom = v, "safetensors metadata"
		}
	}
	return nil
}

// loraWrappers are module-name prefixes of LoRA files and the naming they
// signal.
var loraWrappers = []struct{ prefix, naming string }{
	{"base_model.model.", "PEFT"},
	{"diffusion_model.", "ComfyUI"},
	{"transformer.", "diffusers"},
	{"lora_unet_", "kohya"},
	{"lycoris_", "kohya"},
}

// moduleResolver maps a LoRA file's module names onto targets: official
// module names, diffusers ones, and kohya's with underscores for dots.
func moduleResolver(targets []string) func(mod string) (target, naming string, ok bool) {
	official := map[string]bool{}
	underscored := map[string]string{}
	for _, t := range targets {
		official[t] = true
		m := strings.TrimSuffix(t, ".weight")
		underscored[strings.ReplaceAll(m, ".", "_")] = t
		if d, ok := ditDiffusers.convert(t, false); ok {
			underscored[strings.ReplaceAll(strings.TrimSuffix(d, ".weight"), ".", "_")] = t
		}
	}
	return func(mod string) (string, string, bool) {
		naming := "PEFT"
		mod = checkpoint.NormalizeKey(mod)
		for _, w := range loraWrappers {
			if m, ok := strings.CutPrefix(mod, w.prefix); ok {
				mod, naming = checkpoint.NormalizeKey(m), w.naming
				break
			}
		}
		mod = strings.TrimSuffix(mod, ".base_layer")
		if official[mod+".weight"] {
			return mod + ".weight", naming, true
		}
		if o, ok := ditDiffusers.convert(mod+".weight", true); ok && official[o] {
			if naming == "PEFT" {
				naming = "diffusers"
			}
			return o, naming, true
		}
		if t, ok := underscored[mod]; ok {
			return t, naming, true
		}
		return "", "", false
	}
}
