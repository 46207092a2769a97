package golden

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
)

func TestMain(m *testing.M) { os.Exit(Main(m, OwnerSelf)) }

// TestEveryGoldenItemOwned fails on a golden file of an unknown kind, a
// tensor or a sidecar field that no ownership rule assigns to a package.
func TestEveryGoldenItemOwned(t *testing.T) {
	dir := Wan(t)
	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	total := 0
	for _, f := range files {
		items, err := Items(dir, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) == 0 {
			t.Errorf("%s: no items", f)
		}
		for _, it := range items {
			total++
			if Owner(f, it) == "" {
				t.Errorf("%s: %s has no owner: add a rule to Owner (and a test that compares it) or, for prose, to the prose list", f, it)
			}
		}
	}
	t.Logf("%d items in %d files", total, len(files))
}

// TestSidecarTensorListings checks each sidecar's "tensors" listing (dtype
// and shape of every tensor) against the header of its .safetensors file,
// and that every .safetensors file has a sidecar.
func TestSidecarTensorListings(t *testing.T) {
	dir := Wan(t)
	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		base, ok := strings.CutSuffix(f, ".safetensors")
		if !ok {
			continue
		}
		side := base + ".json"
		if !slices.Contains(files, side) {
			t.Errorf("%s has no sidecar %s", f, side)
			continue
		}
		var sc struct {
			Tensors map[string]struct {
				DType string `json:"dtype"`
				Shape []int  `json:"shape"`
			} `json:"tensors"`
		}
		if err := Sidecar(dir, side, &sc); err != nil {
			t.Fatal(err)
		}
		s, err := checkpoint.OpenSafetensors(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		names := s.Names()
		listed := make([]string, 0, len(sc.Tensors))
		for n := range sc.Tensors {
			listed = append(listed, n)
		}
		slices.Sort(listed)
		if !slices.Equal(names, listed) {
			t.Errorf("%s lists tensors %v, the file holds %v", side, listed, names)
		}
		for _, n := range names {
			i, _ := s.Info(n)
			l, ok := sc.Tensors[n]
			if !ok {
				continue
			}
			if string(i.DType) != l.DType || !slices.Equal(i.Shape, l.Shape) {
				t.Errorf("%s: %s listed as %s %v, the file holds %s %v", side, n, l.DType, l.Shape, i.DType, i.Shape)
			}
			Mark(side, "json:tensors."+n+".dtype", "json:tensors."+n+".shape")
		}
		s.Close()
	}
}

func TestFlatten(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string
	}{
		{"scalars", `{"a":1,"b":"x","c":null}`, []string{"a", "b", "c"}},
		{"nested", `{"a":{"b":{"c":true},"d":[1,2]}}`, []string{"a.b.c", "a.d"}},
		{"array of objects", `{"log":[{"x":1,"y":[]},{"x":2,"z":0}]}`, []string{"log[].x", "log[].y", "log[].z"}},
		{"mixed array is a leaf", `{"m":[{"x":1},2]}`, []string{"m"}},
		{"empty object is a leaf", `{"e":{}}`, []string{"e"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "f.json"), []byte(c.in), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Items(dir, "f.json")
			if err != nil {
				t.Fatal(err)
			}
			want := make([]string, len(c.want))
			for i, w := range c.want {
				want[i] = "json:" + w
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("items %v, want %v", got, want)
			}
		})
	}
}

// TestUnmarkedAndOwners builds a small golden-like folder and checks that
// Unmarked reports exactly the owned items nobody marked.
func TestUnmarkedAndOwners(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, ts []checkpoint.WriteTensor) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkpoint.WriteSafetensors(f, ts, nil); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	one := []float32{1}
	write("forward_q.safetensors", []checkpoint.WriteTensor{{Name: "flow_pred", Shape: []int{1}, Data: one}, {Name: "x0_pred", Shape: []int{1}, Data: one}})
	write("rollout_q.safetensors", []checkpoint.WriteTensor{{Name: "latents", Shape: []int{1}, Data: one}, {Name: "bank.new", Shape: []int{1}, Data: one}})
	side := `{"source":"text","model_config":{"dim":4},"capacity_tokens_per_head":3,"layer0_memory_log":[{"a":1}],"tensors":{"latents":{"dtype":"F32","shape":[1]}}}`
	if err := os.WriteFile(filepath.Join(dir, "rollout_q.json"), []byte(side), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("doc"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := NewRegistry()
	r.Mark("rollout_q.safetensors", "latents")
	r.Mark("rollout_q.json", "json:layer0_memory_log[].a")
	r.Mark("forward_q.safetensors", "x0_pred") // marked, but owned by rollout
	for _, c := range []struct {
		owner string
		want  []string
	}{
		{OwnerWan, []string{"forward_q.safetensors: flow_pred", "rollout_q.json: json:model_config.dim"}},
		{OwnerRollout, []string{"rollout_q.json: json:capacity_tokens_per_head", "rollout_q.safetensors: bank.new"}},
		{OwnerSelf, []string{"rollout_q.json: json:tensors.latents.dtype", "rollout_q.json: json:tensors.latents.shape"}},
		{OwnerProse, []string{"rollout_q.json: json:source"}},
	} {
		got, err := r.Unmarked(dir, c.owner)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Unmarked(%s) = %q, want %q", c.owner, got, c.want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "stray.bin"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Unmarked(dir, OwnerWan); err == nil || !strings.Contains(err.Error(), "stray.bin") {
		t.Errorf("unknown file kind: %v", err)
	}
}
