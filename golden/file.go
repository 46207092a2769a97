package golden

// Files: the Wan golden files (tensors of a safetensors file, its JSON
// sidecar, the coverage marks) for the wan and rollout tests.

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
)

// File is an opened golden safetensors file.
type File struct {
	t    testing.TB
	name string // file name in the golden folder
	s    *checkpoint.Safetensors
}

// Open opens the golden file name; it is closed when the test ends.
func Open(t testing.TB, name string) *File {
	t.Helper()
	s, err := checkpoint.OpenSafetensors(filepath.Join(Wan(t), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &File{t, name, s}
}

// Name returns the file's name in the golden folder.
func (g *File) Name() string { return g.name }

// Names returns the file's tensor names.
func (g *File) Names() []string { return g.s.Names() }

// Info returns tensor name's dtype, shape and byte range.
func (g *File) Info(name string) (checkpoint.Info, bool) { return g.s.Info(name) }

// F32 reads tensor name as float32.
func (g *File) F32(name string) []float32 {
	g.t.Helper()
	v, _, err := g.s.Float32(name)
	if err != nil {
		g.t.Fatal(err)
	}
	return v
}

// F64 reads tensor name as float64.
func (g *File) F64(name string) []float64 {
	g.t.Helper()
	v, _, err := g.s.Float64(name)
	if err != nil {
		g.t.Fatal(err)
	}
	return v
}

// I64 reads integer tensor name as int64, with its shape.
func (g *File) I64(name string) ([]int64, []int) {
	g.t.Helper()
	v, sh, err := g.s.Int64(name)
	if err != nil {
		g.t.Fatal(err)
	}
	return v, sh
}

// Mark records that the test compared the named tensors of this file
// (Mark).
func (g *File) Mark(names ...string) { Mark(g.name, names...) }

// sidecarName is the file's JSON sidecar.
func (g *File) sidecarName() string { return strings.TrimSuffix(g.name, ".safetensors") + ".json" }

// Sidecar reads the file's JSON sidecar into v.
func (g *File) Sidecar(v any) {
	g.t.Helper()
	if err := Sidecar(Wan(g.t), g.sidecarName(), v); err != nil {
		g.t.Fatal(err)
	}
}

// Prose reports whether the sidecar field at path is prose (nothing to
// compare; see Owner).
func (g *File) Prose(path string) bool {
	return Owner(g.sidecarName(), "json:"+path) == OwnerProse
}

// MarkSidecar records that the test compared the named sidecar fields.
func (g *File) MarkSidecar(paths ...string) {
	for _, p := range paths {
		Mark(g.sidecarName(), "json:"+p)
	}
}

// RelErr returns max|got − want| / max|want| (max|got − want| when want is
// all zero).
func RelErr(got []float32, want []float64) float64 {
	var md, mw float64
	for i, w := range want {
		md = math.Max(md, math.Abs(float64(got[i])-w))
		mw = math.Max(mw, math.Abs(w))
	}
	if mw == 0 {
		return md
	}
	return md / mw
}
