// Package kerneltest helps tests check that results are the same bits
// whichever matrix kernel runs and in every build: it runs a computation
// under each gemm kernel this machine can run (and the Go emulations of
// the others), hashes float32 results, and compares hashes with ones
// pinned in a package's testdata/bits.json, so that the default build,
// the -tags noasm build and every CPU are held to the same bits.
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
	"math"
	"os"
	"path/filepath"
	"runtime"
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

const file = "testdata/bits.json"

// Pinned compares hash with the one pinned under key in the package's
// testdata/bits.json (or, with -update-bits, records it). The hashes are
// those of amd64 builds; they also hold at GOAMD64=v3 and v4 (checked when
// they were recorded), where Go fuses a*b + c into one multiply-add unless
// the product is converted explicitly, as the models' code does; only the
// standard library's math.Pow and math.Sincos (the time embeddings) could
// differ there, and a failure at those levels says so. On other
// architectures the check is skipped with a message.
func Pinned(t testing.TB, key, hash string) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("bits pinned for amd64; this build (%s) computes the standard library's transcendental functions with other roundings", runtime.GOARCH)
	}
	pinned := map[string]string{}
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &pinned); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	case !os.IsNotExist(err) || !*update:
		t.Fatalf("%s: %v (record it with -update-bits)", file, err)
	}
	if *update {
		if pinned[key] != hash {
			pinned[key] = hash
			b, _ := json.MarshalIndent(pinned, "", "  ")
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s = %s recorded", file, key, hash)
		}
		return
	}
	want, ok := pinned[key]
	if !ok {
		t.Fatalf("%s has no hash for %q (record it with -update-bits)", file, key)
	}
	if hash != want {
		note := ""
		if amd64Level > 2 {
			note = fmt.Sprintf(" (a GOAMD64=v%d build: if the default build matches, look at fused multiply-adds, ours or the standard library's)", amd64Level)
		}
		t.Fatalf("%s: the results hash to %s, pinned %s: this build or CPU computes other bits (or a numerical definition changed: then -update-bits, and say why)%s", key, hash, want, note)
	}
}
