package golden

// Coverage: the tests account for everything in the Wan golden folder
// (see the package comment).

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
)

// Owners of golden items: the package whose tests must mark them.
const (
	OwnerWan     = "wan"     // model config, weights, forward outputs and intermediates
	OwnerRollout = "rollout" // rollouts, schedules, bank decisions, memory logs
	OwnerSelf    = "golden"  // sidecar tensor listings (checked against the files)
	// Prose marks sidecar text that describes rather than records data
	// (descriptions of the procedure, layouts and formulas): nothing to
	// compare, so nobody has to mark it.
	OwnerProse = "prose"
)

// prose lists the sidecar paths that are prose.
var prose = map[string]bool{
	"source": true, "description": true, "init": true, "notes": true, "case": true, "cache": true,
	"noise_order": true, "step_arrays": true, "bank_update": true, "bank_arrays": true,
	"density.kernel": true, "density.distance": true,
	// The reference's arithmetic precision: the Go port runs float32 by
	// design, against the README's tolerances.
	"density.compute_dtype": true,
}

// Owner returns who must compare item of the golden file named file: Wan,
// Rollout, Self or Prose, or "" when no rule covers it.
func Owner(file, item string) string {
	if p, ok := strings.CutPrefix(item, "json:"); ok {
		switch {
		case prose[p]:
			return OwnerProse
		case strings.HasPrefix(p, "tensors."):
			return OwnerSelf
		case strings.HasPrefix(p, "model_config."), p == "latent_frame_shape_CHW", p == "tokens_per_frame", p == "frames_per_block":
			return OwnerWan // every sidecar's model config and latent geometry
		}
	}
	switch {
	case strings.HasPrefix(file, "weights"):
		return OwnerWan
	case strings.HasPrefix(file, "forward_"):
		if item == "x0_pred" {
			return OwnerRollout // needs the schedule's σ(t)
		}
		return OwnerWan
	case strings.HasPrefix(file, "rollout_"):
		return OwnerRollout
	}
	return ""
}

// Registry records marked items per file.
type Registry struct {
	mu     sync.Mutex
	marked map[string]map[string]bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{marked: map[string]map[string]bool{}} }

// Mark records that items of file were compared.
func (r *Registry) Mark(file string, items ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.marked[file]
	if m == nil {
		m = map[string]bool{}
		r.marked[file] = m
	}
	for _, it := range items {
		m[it] = true
	}
}

// Marked reports whether item of file was marked.
func (r *Registry) Marked(file, item string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.marked[file][item]
}

// Unmarked returns, for every file of dir, the items owned by owner that
// were not marked ("file: item", sorted).
func (r *Registry) Unmarked(dir, owner string) ([]string, error) {
	files, err := Files(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		items, err := Items(dir, f)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if Owner(f, it) == owner && !r.Marked(f, it) {
				out = append(out, f+": "+it)
			}
		}
	}
	return out, nil
}

var std = NewRegistry()

// Mark records in the package registry that the running test compared
// items of the golden file named file (a base name, e.g.
// "rollout_native.safetensors").
func Mark(file string, items ...string) { std.Mark(file, items...) }

// Files lists the golden files of dir that hold items: everything except
// README.md.
func Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && e.Name() != "README.md" {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Items lists the items of one golden file (see the package comment). A
// file of another kind is an error.
func Items(dir, file string) ([]string, error) {
	p := filepath.Join(dir, file)
	switch filepath.Ext(file) {
	case ".safetensors":
		s, err := checkpoint.OpenSafetensors(p)
		if err != nil {
			return nil, fmt.Errorf("golden: %w", err)
		}
		defer s.Close()
		return s.Names(), nil
	case ".pt":
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("golden: %w", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("golden: %w", err)
		}
		ents, err := checkpoint.TorchEntries(f, st.Size())
		if err != nil {
			return nil, fmt.Errorf("golden: %s: %w", file, err)
		}
		var out []string
		for _, e := range ents {
			sd, err := checkpoint.LoadTorch(f, st.Size(), checkpoint.TorchOptions{Entry: e})
			if err != nil {
				return nil, fmt.Errorf("golden: %s: %w", file, err)
			}
			for _, n := range sd.Names() {
				out = append(out, e+":"+n)
			}
		}
		return out, nil
	case ".json":
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("golden: %w", err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("golden: %s: %w", file, err)
		}
		set := map[string]bool{}
		flatten("", v, set)
		out := make([]string, 0, len(set))
		for k := range set {
			out = append(out, "json:"+k)
		}
		sort.Strings(out)
		return out, nil
	}
	return nil, fmt.Errorf("golden: %s: unknown kind of golden file (want .safetensors, .pt or .json)", file)
}

// flatten adds the leaf paths of v under prefix to set.
func flatten(prefix string, v any, set map[string]bool) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			set[prefix] = true
		}
		for k, e := range x {
			flatten(join(k), e, set)
		}
	case []any:
		objects := len(x) > 0
		for _, e := range x {
			if _, ok := e.(map[string]any); !ok {
				objects = false
			}
		}
		if !objects {
			set[prefix] = true
			return
		}
		for _, e := range x {
			flatten(prefix+"[]", e, set)
		}
	default:
		set[prefix] = true
	}
}

// Sidecar reads the JSON sidecar file of the golden folder into v.
func Sidecar(dir, file string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return fmt.Errorf("golden: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("golden: %s: %w", file, err)
	}
	return nil
}

// filtered reports whether the test binary runs a subset of the package's
// tests (or none), so that unmarked items would not mean untested ones.
func filtered() bool {
	for _, n := range []string{"test.run", "test.skip", "test.list"} {
		if f := flag.Lookup(n); f != nil && f.Value.String() != "" {
			return true
		}
	}
	return false
}

// Main runs the package's tests (m.Run) and returns the exit code. When
// every test ran (no -run, -skip or -list) and passed, it also checks that
// the tests marked every golden item owned by owner, and fails, listing
// them, when some are not. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(Main(m, OwnerWan)) }
func Main(m *testing.M, owner string) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if filtered() {
		if testing.Verbose() {
			fmt.Println("golden: golden coverage not checked (filtered run)")
		}
		return code
	}
	dir, err := Find(EnvWan, "wan")
	if err != nil {
		fmt.Fprintf(os.Stderr, "golden: %v\n", err)
		return 1
	}
	miss, err := std.Unmarked(dir, owner)
	if err != nil {
		fmt.Fprintf(os.Stderr, "golden: %v\n", err)
		return 1
	}
	if len(miss) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL golden: %d golden items owned by package %s were compared by no test:\n\t%s\n", len(miss), owner, strings.Join(miss, "\n\t"))
		return 1
	}
	if testing.Verbose() {
		fmt.Printf("golden: every golden item owned by package %s was compared\n", owner)
	}
	return code
}

// SameJSON reports whether the JSON value raw equals want once both are
// decoded the same way (or their encodings are identical); it fails t if
// want cannot be encoded.
func SameJSON(t testing.TB, raw json.RawMessage, want any) bool {
	t.Helper()
	wb, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal(wb, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b) || strings.TrimSpace(string(raw)) == string(wb)
}
