package wan

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/rope"
)

// TestGoldenWeightFiles loads weights.safetensors and every tensor entry of
// weights_generator.pt into the tiny model (Load rejects missing, extra and
// mis-shaped tensors) and checks that they hold bit-identical parameters.
func TestGoldenWeightFiles(t *testing.T) {
	dir := golden.Wan(t)
	st := filepath.Join(dir, "weights.safetensors")
	ref, err := Load(st, TinyConfig(), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]bool{}
	for _, p := range ref.Params() {
		params[p.Name] = true
	}
	s, err := checkpoint.OpenSafetensors(st)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, n := range s.Names() {
		if !params[checkpoint.NormalizeKey(n)] {
			t.Errorf("weights.safetensors: %s is not a parameter of the model", n)
		}
		golden.Mark("weights.safetensors", n)
	}
	pt := filepath.Join(dir, "weights_generator.pt")
	f, err := os.Open(pt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	ents, err := checkpoint.TorchEntries(f, fi.Size())
	if err != nil || len(ents) == 0 {
		t.Fatalf("weights_generator.pt entries %v: %v", ents, err)
	}
	for _, e := range ents {
		m, err := Load(pt, TinyConfig(), LoadOptions{Entry: e})
		if err != nil {
			t.Fatalf("entry %s: %v", e, err)
		}
		want := ref.Params()
		for i, p := range m.Params() {
			a, b := p.Values(), want[i].Values()
			for j := range a {
				if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
					t.Fatalf("entry %s: %s[%d] = %v, weights.safetensors has %v", e, p.Name, j, a[j], b[j])
				}
			}
			golden.Mark("weights_generator.pt", e+":"+p.Name)
		}
	}
}

// TestGoldenSidecars compares the data fields every sidecar shares with
// the Go side: model_config against TinyConfig (and the RoPE split the rope
// package derives from it), and the latent geometry against the constants
// the golden tests use. An unknown model_config key fails the test.
func TestGoldenSidecars(t *testing.T) {
	dir := golden.Wan(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sidecars in %s: %v", dir, err)
	}
	cfg := TinyConfig()
	rt, err := rope.New(cfg.HeadDim(), cfg.RoPEBase)
	if err != nil {
		t.Fatal(err)
	}
	rp0, rp1, rp2 := rt.Split()
	lay := cfg.Layout(goldenH, goldenW, goldenF)
	for _, p := range files {
		file := filepath.Base(p)
		var sc struct {
			ModelConfig map[string]json.RawMessage `json:"model_config"`
			CHW         json.RawMessage            `json:"latent_frame_shape_CHW"`
			TPF         json.RawMessage            `json:"tokens_per_frame"`
			FPB         json.RawMessage            `json:"frames_per_block"`
		}
		if err := golden.Sidecar(dir, file, &sc); err != nil {
			t.Fatal(err)
		}
		if len(sc.ModelConfig) == 0 {
			t.Errorf("%s: no model_config", file)
		}
		check := func(item string, raw json.RawMessage, want any) {
			t.Helper()
			if !golden.SameJSON(t, raw, want) {
				t.Errorf("%s: %s = %s, the Go side has %v", file, item, raw, want)
			}
			golden.Mark(file, "json:"+item)
		}
		for k, raw := range sc.ModelConfig {
			var want any
			switch k {
			case "model_type":
				want = "t2v" // the only model type this port implements (text-to-video)
			case "patch_size":
				want = cfg.Patch[:]
			case "text_len":
				want = cfg.TextLen
			case "in_dim":
				want = cfg.InDim
			case "dim":
				want = cfg.Dim
			case "ffn_dim":
				want = cfg.FFNDim
			case "freq_dim":
				want = cfg.FreqDim
			case "text_dim":
				want = cfg.TextDim
			case "out_dim":
				want = cfg.OutDim
			case "num_heads":
				want = cfg.Heads
			case "num_layers":
				want = cfg.Layers
			case "qk_norm", "cross_attn_norm":
				want = true // the port always RMS-normalises q and k, in self- and cross-attention
			case "eps":
				want = cfg.Eps
			case "rope_pairs_split_t_h_w":
				want = []int{rp0, rp1, rp2}
			default:
				t.Errorf("%s: model_config.%s = %s is not compared: add it to this test", file, k, raw)
				continue
			}
			check("model_config."+k, raw, want)
		}
		if sc.CHW != nil || sc.TPF != nil || sc.FPB != nil {
			check("latent_frame_shape_CHW", sc.CHW, []int{cfg.InDim, goldenH, goldenW})
			check("tokens_per_frame", sc.TPF, lay.TokensPerFrame())
			check("frames_per_block", sc.FPB, lay.FramesPerBlock)
		}
	}
}
