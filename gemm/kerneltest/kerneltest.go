// Package kerneltest helps tests check that results are the same bits
// whichever matrix kernel runs and in every build: it runs a computation
// under each gemm kernel this machine can run (and the Go emulations of
// the others), hashes float32 results, and compares hashes with ones
// pinned in a package's testdata/bits.json, so that the default build,
// the -tags noasm build and every CPU are held to the same bits.
//
// A hash of results computed from inputs made in the test (a model drawn
// from a fixed seed, say) is pinned with Pinned. A hash of results
// computed from files (the golden folders, which DENSITYKV_GOLDEN* may
// point at another valid set) is pinned with PinnedFor, for the content of
// those files only: on other inputs there is no pin, the check is the
// comparison across kernels the test made, and the test logs that.
//
// A pinned hash is updated with
//
//	go test ./PKG -run TestBits -update-bits
//
// which is right only when a numerical definition changed on purpose
// (say so in the commit); a hash that differs otherwise is a determinism
// bug: a kernel, build or CPU that computes other bits.
package kerneltest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
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

var update = flag.Bool("update-bits", false, "rewrite testdata/bits.json with the hashes computed now")

// Names returns the kernels of precision p that this machine can run:
// the assembly ones that passed their self-test, the pure-Go one and the
// Go emulations of the AMX and AVX512_BF16 layouts.
func Names(p gemm.Precision) []string {
	ks, _ := gemm.KernelInfo()
	var names []string
	for _, k := range ks {
		if k.Precision == p && k.Available == "" {
			names = append(names, k.Name)
		}
	}
	return names
}

// Each runs f once per kernel of precision p (Names), with products of
// that precision forced onto it, and restores the selection afterwards.
func Each(t testing.TB, p gemm.Precision, f func(kernel string)) {
	t.Helper()
	for _, name := range Names(p) {
		restore, err := gemm.Force(p.String() + ":" + name)
		if err != nil {
			t.Fatalf("gemm.Force(%v:%s): %v", p, name, err)
		}
		f(name)
		restore()
	}
}

// Hash returns the SHA-256 (hex) of the little-endian bits of the values,
// slice after slice, each preceded by its length.
func Hash(data ...[]float32) string {
	h := sha256.New()
	var b [8]byte
	for _, d := range data {
		binary.LittleEndian.PutUint64(b[:], uint64(len(d)))
		h.Write(b[:])
		for _, v := range d {
			binary.LittleEndian.PutUint32(b[:4], math.Float32bits(v))
			h.Write(b[:4])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// HashBytes returns the SHA-256 (hex) of b (a snapshot, say).
func HashBytes(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// FirstDiff returns the first index where a and b differ in their bits
// (any two NaNs equal), or -1; a length difference is index 0.
func FirstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		x, y := math.Float32bits(a[i]), math.Float32bits(b[i])
		if x != y && !(a[i] != a[i] && b[i] != b[i]) {
			return i
		}
	}
	return -1
}

// file is the package's pinned hashes, relative to the test's working
// directory (the package folder): a JSON object from key to a hash
// (Pinned) or to a list of input pins (PinnedFor).
var file = "testdata/bits.json"

// inputPin is a hash pinned for the results computed from given inputs:
// Inputs maps each input file's base name to the SHA-256 (hex) of its
// content.
type inputPin struct {
	Inputs map[string]string `json:"inputs"`
	Bits   string            `json:"bits"`
}

// readPins reads file (none yet is an empty set only with -update-bits).
func readPins(t testing.TB) (map[string]json.RawMessage, bool) {
	t.Helper()
	pinned := map[string]json.RawMessage{}
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &pinned); err != nil {
			t.Fatalf("%s: %v", file, err)
			return nil, false
		}
	case !os.IsNotExist(err) || !*update:
		t.Fatalf("%s: %v (record it with -update-bits)", file, err)
		return nil, false
	}
	return pinned, true
}

// writePins rewrites file with key set to v.
func writePins(t testing.TB, pinned map[string]json.RawMessage, key string, v any) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
		return
	}
	pinned[key] = raw
	b, err := json.MarshalIndent(pinned, "", "  ")
	if err != nil {
		t.Fatal(err)
		return
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
		return
	}
	if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// amd64Only skips the test on other architectures and reports whether it
// may go on.
func amd64Only(t testing.TB) bool {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("bits pinned for amd64; this build (%s) computes the standard library's transcendental functions with other roundings", runtime.GOARCH)
		return false
	}
	return true
}

// mismatch fails t for a hash that differs from the pinned one.
func mismatch(t testing.TB, key, hash, want string) {
	t.Helper()
	note := ""
	if amd64Level > 2 {
		note = fmt.Sprintf(" (a GOAMD64=v%d build: if the default build matches, look at fused multiply-adds, ours or the standard library's)", amd64Level)
	}
	t.Fatalf("%s: the results hash to %s, pinned %s: this build or CPU computes other bits (or a numerical definition changed: then -update-bits, and say why)%s", key, hash, want, note)
}

// Pinned compares hash with the one pinned under key in the package's
// testdata/bits.json (or, with -update-bits, records it). Use it for
// results of inputs the test makes itself (PinnedFor for inputs read from
// files). The hashes are those of amd64 builds; they also hold at
// GOAMD64=v3 and v4 (checked when they were recorded), where Go fuses
// a*b + c into one multiply-add unless the product is converted
// explicitly, as the models' code does; only the standard library's
// math.Pow and math.Sincos (the time embeddings) could differ there, and
// a failure at those levels says so. On other architectures the check is
// skipped with a message.
func Pinned(t testing.TB, key, hash string) {
	t.Helper()
	if !amd64Only(t) {
		return
	}
	pinned, ok := readPins(t)
	if !ok {
		return
	}
	var want string
	if raw, ok := pinned[key]; ok {
		if err := json.Unmarshal(raw, &want); err != nil && *update {
			want = "" // pinned per input before: recorded anew, plain
		} else if err != nil {
			t.Fatalf("%s: %q is not a plain hash (pinned per input? use PinnedFor): %v", file, key, err)
			return
		}
	}
	if *update {
		if want != hash {
			writePins(t, pinned, key, hash)
			t.Logf("%s: %s = %s recorded", file, key, hash)
		}
		return
	}
	if want == "" {
		t.Fatalf("%s has no hash for %q (record it with -update-bits)", file, key)
		return
	}
	if hash != want {
		mismatch(t, key, hash, want)
	}
}

// FileSums returns the SHA-256 (hex) of each file's content by its base
// name (two files of one base name are an error).
func FileSums(paths ...string) (map[string]string, error) {
	sums := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("kerneltest: %w", err)
		}
		name := filepath.Base(p)
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("kerneltest: two inputs named %s", name)
		}
		sums[name] = HashBytes(b)
	}
	return sums, nil
}

// PinnedFor is Pinned for results computed from the files inputs (the
// golden files the computation read, all of them): the hash is pinned
// under key for the content of those files, and only for it. When the
// files are those a pin was recorded for (the shared golden set, say),
// hash must equal that pin. When they are not (another valid set of the
// same schema, from DENSITYKV_GOLDEN*), no pin applies: PinnedFor logs so,
// naming the files that differ, and returns; the test's own comparison
// across kernels (and builds) is then the check. -update-bits records the
// hash for these inputs beside the pins of other inputs.
func PinnedFor(t testing.TB, key, hash string, inputs ...string) {
	t.Helper()
	if len(inputs) == 0 {
		t.Fatalf("kerneltest.PinnedFor(%q): no inputs (Pinned pins results of inputs made in the test)", key)
		return
	}
	sums, err := FileSums(inputs...)
	if err != nil {
		t.Fatal(err)
		return
	}
	if !amd64Only(t) {
		return
	}
	pinned, ok := readPins(t)
	if !ok {
		return
	}
	var pins []inputPin
	if raw, ok := pinned[key]; ok {
		if err := json.Unmarshal(raw, &pins); err != nil && *update {
			pins = nil // a plain hash before: recorded anew per input
		} else if err != nil {
			t.Fatalf("%s: %q is not a list of input pins (a plain hash? use Pinned): %v", file, key, err)
			return
		}
	}
	at := slices.IndexFunc(pins, func(p inputPin) bool { return maps.Equal(p.Inputs, sums) })
	if *update {
		switch {
		case at < 0:
			pins = append(pins, inputPin{Inputs: sums, Bits: hash})
		case pins[at].Bits != hash:
			pins[at].Bits = hash
		default:
			return
		}
		writePins(t, pinned, key, pins)
		t.Logf("%s: %s = %s recorded for inputs %v", file, key, hash, sums)
		return
	}
	if at >= 0 {
		if hash != pins[at].Bits {
			mismatch(t, key, hash, pins[at].Bits)
		}
		return
	}
	if len(pins) == 0 {
		t.Fatalf("%s has no hash for %q (record it with -update-bits)", file, key)
		return
	}
	// Other content of the same files: another input set. Other files: the
	// test changed what it reads, and its pins must be recorded again.
	names := slices.Sorted(maps.Keys(sums))
	var differ []string
	for _, p := range pins {
		if !slices.Equal(slices.Sorted(maps.Keys(p.Inputs)), names) {
			continue
		}
		for _, name := range names {
			if p.Inputs[name] != sums[name] {
				differ = append(differ, name)
			}
		}
		break
	}
	if len(differ) == 0 {
		t.Fatalf("%s: %q is pinned for inputs named %v, the test read %v (record it with -update-bits)", file, key, slices.Sorted(maps.Keys(pins[0].Inputs)), names)
		return
	}
	t.Logf("%s: no bits pinned for these inputs (%s differ from the pinned ones'): the results agree across kernels, their hash %s is not compared", key, strings.Join(differ, ", "), hash)
}
