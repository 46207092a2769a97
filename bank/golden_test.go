package bank

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/golden"
)

type goldenCase struct {
	Name   string `json:"name"`
	Config struct {
		Capacity int     `json:"capacity"`
		Tau      float64 `json:"tau"`
		Sigma    float64 `json:"sigma"`
		P        float64 `json:"p"`
		Eps      float64 `json:"eps"`
		Delta    float64 `json:"delta"`
		Ordering string  `json:"ordering"`
		Heads    int     `json:"heads"`
		KeyDim   int     `json:"key_dim"`
		ValueDim int     `json:"value_dim"`
	} `json:"config"`
	Updates []struct {
		Keys   [][][]float64 `json:"keys"`
		Values [][][]float64 `json:"values"`
		IDs    []int64       `json:"ids"`
		Expect struct {
			Accepted int `json:"accepted"`
			Count    int `json:"count"`
			Heads    []struct {
				IDs        []int64   `json:"ids"`
				Density    []float64 `json:"density"`
				Baseline   []float64 `json:"baseline"`
				EvictedIDs []int64   `json:"evicted_ids"`
			} `json:"heads"`
		} `json:"expect"`
	} `json:"updates"`
}

// headMajor transposes [N][G][D] to [G][N][D].
func headMajor(x [][][]float64) []float32 {
	n := len(x)
	if n == 0 {
		return nil
	}
	g, d := len(x[0]), len(x[0][0])
	out := make([]float32, 0, n*g*d)
	for h := 0; h < g; h++ {
		for i := 0; i < n; i++ {
			for _, v := range x[i][h] {
				out = append(out, float32(v))
			}
		}
	}
	return out
}

func loadGolden(t *testing.T, path string) goldenCase {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var gc goldenCase
	if err := json.Unmarshal(raw, &gc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return gc
}

func goldenConfig(t *testing.T, gc goldenCase) Config {
	t.Helper()
	var ord Ordering
	if err := ord.UnmarshalText([]byte(gc.Config.Ordering)); err != nil {
		t.Fatal(err)
	}
	return Config{
		Heads: gc.Config.Heads, KeyDim: gc.Config.KeyDim, ValueDim: gc.Config.ValueDim,
		Capacity: gc.Config.Capacity, Tau: gc.Config.Tau, Sigma: gc.Config.Sigma, P: gc.Config.P,
		Eps: gc.Config.Eps, Delta: gc.Config.Delta, Ordering: ord,
		Payload: PayloadF32, Density: F64,
	}
}

func goldenFiles(t *testing.T) []string {
	t.Helper()
	dir := golden.DensityKV(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no golden *.json files in %s", dir)
	}
	return files
}

func closeTo(got, want float64) bool {
	return math.Abs(got-want) <= 1e-4*math.Abs(want)+1e-6
}

func TestGolden(t *testing.T) {
	for _, path := range goldenFiles(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			gc := loadGolden(t, path)
			for _, run := range []struct {
				workers int
				cache   int64 // 0: default cache budget, −1: recompute path
				density DType
			}{{1, 0, F64}, {3, -1, F64}, {2, 0, F32}} {
				cfg := goldenConfig(t, gc)
				cfg.Workers, cfg.CacheBytes, cfg.Density = run.workers, run.cache, run.density
				runGolden(t, gc, cfg)
			}
		})
	}
}

func runGolden(t *testing.T, gc goldenCase, cfg Config) {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for u, up := range gc.Updates {
		dec, err := b.Update(Block{Keys: headMajor(up.Keys), Values: headMajor(up.Values), Source: up.IDs})
		if err != nil {
			t.Fatalf("update %d: %v", u, err)
		}
		ex := up.Expect
		if dec.Accepted != ex.Accepted {
			t.Fatalf("update %d: accepted %d, want %d", u, dec.Accepted, ex.Accepted)
		}
		if b.Len() != ex.Count {
			t.Fatalf("update %d: count %d, want %d", u, b.Len(), ex.Count)
		}
		for h, eh := range ex.Heads {
			ents := b.Entries(h)
			vals := b.Values(h)
			type row struct {
				id        int64
				rho, base float64
			}
			rows := make([]row, len(ents))
			for i, e := range ents {
				rows[i] = row{e.Source, e.Density, e.Baseline}
				if got := vals[i*cfg.ValueDim]; got != float32(e.Source) {
					t.Fatalf("update %d head %d slot %d: value[0] = %v, not paired with id %d", u, h, i, got, e.Source)
				}
			}
			slices.SortFunc(rows, func(a, b row) int { return int(a.id - b.id) })
			ids := make([]int64, len(rows))
			for i, r := range rows {
				ids[i] = r.id
			}
			if !slices.Equal(ids, eh.IDs) {
				t.Fatalf("update %d head %d: ids %v, want %v", u, h, ids, eh.IDs)
			}
			ev := slices.Clone(dec.Heads[h].Evicted)
			slices.Sort(ev)
			if len(ev) != 0 || len(eh.EvictedIDs) != 0 {
				if !slices.Equal(ev, eh.EvictedIDs) {
					t.Fatalf("update %d head %d: evicted %v, want %v", u, h, ev, eh.EvictedIDs)
				}
			}
			for i, r := range rows {
				if !closeTo(r.rho, eh.Density[i]) {
					t.Errorf("update %d head %d id %d: density %.9g, want %.9g", u, h, r.id, r.rho, eh.Density[i])
				}
				if !closeTo(r.base, eh.Baseline[i]) {
					t.Errorf("update %d head %d id %d: baseline %.9g, want %.9g", u, h, r.id, r.base, eh.Baseline[i])
				}
			}
		}
	}
}
