package kerneltest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

func TestHashAndFirstDiff(t *testing.T) {
	nan := float32(math.NaN())
	a, b := []float32{1, 2, nan}, []float32{1, 2, float32(math.Float32frombits(0x7fc00001))}
	if i := FirstDiff(a, b); i != -1 {
		t.Fatalf("NaNs differ at %d", i)
	}
	if i := FirstDiff([]float32{0}, []float32{float32(math.Copysign(0, -1))}); i != 0 {
		t.Fatalf("+0 and -0: %d", i)
	}
	if i := FirstDiff(a, a[:2]); i != 0 {
		t.Fatalf("lengths: %d", i)
	}
	// The hash covers the split into slices and every bit.
	h := Hash([]float32{1, 2}, []float32{3})
	for _, other := range [][][]float32{{{1}, {2, 3}}, {{1, 2, 3}}, {{1, 2}, {math.Nextafter32(3, 4)}}} {
		if Hash(other...) == h {
			t.Fatalf("%v hashes like [[1 2] [3]]", other)
		}
	}
	if Hash([]float32{1, 2}, []float32{3}) != h || len(h) != 64 || HashBytes([]byte("x")) == HashBytes([]byte("y")) {
		t.Fatal("hashes not stable or not SHA-256 hex")
	}
}

func TestEachRunsEveryKernelAndRestores(t *testing.T) {
	for _, p := range []gemm.Precision{gemm.F32, gemm.BF16} {
		before := gemm.KernelName(p)
		var seen []string
		Each(t, p, func(k string) {
			if gemm.KernelName(p) != k {
				t.Fatalf("running %s, gemm runs %s", k, gemm.KernelName(p))
			}
			seen = append(seen, k)
		})
		if !slices.Contains(seen, "go") || !slices.Equal(seen, Names(p)) {
			t.Fatalf("%v: ran %v, Names %v", p, seen, Names(p))
		}
		if p == gemm.BF16 && (!slices.Contains(seen, "emu-amx") || !slices.Contains(seen, "emu-avx512bf16")) {
			t.Fatalf("bf16 kernels %v lack the emulations", seen)
		}
		if gemm.KernelName(p) != before {
			t.Fatalf("%v: %s after Each, was %s", p, gemm.KernelName(p), before)
		}
	}
}

// recorder is a testing.TB that records what Pinned and PinnedFor report
// instead of failing or skipping.
type recorder struct {
	testing.TB
	fatal, logs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Fatal(a ...any)            { r.fatal = append(r.fatal, fmt.Sprint(a...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.fatal = append(r.fatal, fmt.Sprintf(f, a...)) }
func (r *recorder) Skipf(f string, a ...any) {
	r.fatal = append(r.fatal, "skip: "+fmt.Sprintf(f, a...))
}
func (r *recorder) Logf(f string, a ...any) { r.logs = append(r.logs, fmt.Sprintf(f, a...)) }
func (r *recorder) String() string          { return fmt.Sprintf("fatal %q, logs %q", r.fatal, r.logs) }

// clean reports no failure; failed, exactly one failure saying substr;
// logged, exactly one log line saying substr.
func (r *recorder) clean() bool { return len(r.fatal) == 0 }
func (r *recorder) failed(substr string) bool {
	return len(r.fatal) == 1 && strings.Contains(r.fatal[0], substr)
}
func (r *recorder) logged(substr string) bool {
	return len(r.logs) == 1 && strings.Contains(r.logs[0], substr)
}

// usePins points the package at the pin file path, with -update-bits set
// to up, until the test ends.
func usePins(t *testing.T, path string, up bool) {
	oldFile, oldUp := file, *update
	file, *update = path, up
	t.Cleanup(func() { file, *update = oldFile, oldUp })
}

// TestPinnedFor: a hash pinned for input files holds for their content
// only. Other content under the same names is another input set: no pin,
// logged, not a failure; other names are a changed test: a failure. Pins
// of several input sets live side by side, -update-bits adds one without
// touching the others, and plain (Pinned) and per-input keys do not mix.
func TestPinnedFor(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("bits are pinned on amd64 only")
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shared, other := filepath.Join(dir, "shared"), filepath.Join(dir, "other")
	os.Mkdir(shared, 0o755)
	os.Mkdir(other, 0o755)
	w := write("shared/weights.bin", "shared weights")
	x := write("shared/x.bin", "shared input")
	w2 := write("other/weights.bin", "other weights")
	bits := filepath.Join(dir, "testdata", "bits.json")

	// Record the shared set's pin and a plain one.
	usePins(t, bits, true)
	r := &recorder{TB: t}
	PinnedFor(r, "model", "h-shared", w, x)
	Pinned(r, "plain", "h-plain")
	if !r.clean() {
		t.Fatalf("recording: %v", r)
	}
	*update = false
	check := func(name string, f func(r *recorder), ok func(r *recorder) bool) {
		t.Helper()
		r := &recorder{TB: t}
		f(r)
		if !ok(r) {
			t.Errorf("%s: %v", name, r)
		}
	}
	check("the shared inputs, their bits", func(r *recorder) { PinnedFor(r, "model", "h-shared", w, x) }, (*recorder).clean)
	check("the shared inputs, other bits", func(r *recorder) { PinnedFor(r, "model", "h-wrong", w, x) },
		func(r *recorder) bool { return r.failed("pinned h-shared") })
	check("another input set", func(r *recorder) { PinnedFor(r, "model", "h-other", w2, x) },
		func(r *recorder) bool { return r.clean() && r.logged("weights.bin differ") && r.logged("h-other") })
	check("inputs of other names", func(r *recorder) { PinnedFor(r, "model", "h-shared", w) },
		func(r *recorder) bool {
			return r.failed("pinned for inputs named [weights.bin x.bin], the test read [weights.bin]")
		})
	check("no inputs", func(r *recorder) { PinnedFor(r, "model", "h-shared") }, func(r *recorder) bool { return r.failed("no inputs") })
	check("a key not pinned", func(r *recorder) { PinnedFor(r, "none", "h", w, x) }, func(r *recorder) bool { return r.failed("no hash") })
	check("a plain key per input", func(r *recorder) { PinnedFor(r, "plain", "h-plain", w, x) },
		func(r *recorder) bool { return r.failed("not a list of input pins") })
	check("a per-input key plain", func(r *recorder) { Pinned(r, "model", "h-shared") },
		func(r *recorder) bool { return r.failed("not a plain hash") })
	check("plain", func(r *recorder) { Pinned(r, "plain", "h-plain") }, (*recorder).clean)
	check("plain, other bits", func(r *recorder) { Pinned(r, "plain", "h-x") }, func(r *recorder) bool { return r.failed("pinned h-plain") })

	// A second input set's pin joins the first.
	*update = true
	check("recording another set", func(r *recorder) { PinnedFor(r, "model", "h-other", w2, x) }, (*recorder).clean)
	*update = false
	check("the shared set after", func(r *recorder) { PinnedFor(r, "model", "h-shared", w, x) }, (*recorder).clean)
	check("the other set after", func(r *recorder) { PinnedFor(r, "model", "h-other", w2, x) }, (*recorder).clean)
	check("the other set, other bits", func(r *recorder) { PinnedFor(r, "model", "h-shared", w2, x) },
		func(r *recorder) bool { return r.failed("pinned h-other") })
	b, err := os.ReadFile(bits)
	if err != nil {
		t.Fatal(err)
	}
	var pins map[string]json.RawMessage
	var list []inputPin
	if err := json.Unmarshal(b, &pins); err != nil || json.Unmarshal(pins["model"], &list) != nil || len(list) != 2 || string(pins["plain"]) != `"h-plain"` {
		t.Fatalf("bits.json: %s", b)
	}
	sums, err := FileSums(w, x)
	if err != nil || !maps.Equal(list[0].Inputs, sums) || list[0].Bits != "h-shared" || sums["weights.bin"] != HashBytes([]byte("shared weights")) {
		t.Fatalf("first pin %+v, inputs %v (%v)", list[0], sums, err)
	}
	if _, err := FileSums(w, w2); err == nil {
		t.Fatal("two inputs of one name accepted")
	}
}
