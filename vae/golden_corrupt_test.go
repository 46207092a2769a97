package vae

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/internal/goldendir"
)

// corruptCopy writes a copy of the safetensors file src to dst with
// element i of tensor name changed by f.
func corruptCopy(t *testing.T, src, dst, name string, i int, f func(b []byte)) {
	t.Helper()
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	s, err := checkpoint.OpenSafetensors(src)
	if err != nil {
		t.Fatal(err)
	}
	info, ok := s.Info(name)
	s.Close()
	if !ok {
		t.Fatalf("%s: no tensor %s", src, name)
	}
	off := 8 + int64(binary.LittleEndian.Uint64(raw)) + info.Begin + int64(i*info.DType.Size())
	f(raw[off : off+int64(info.DType.Size())])
	if err := os.WriteFile(dst, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func addF64(d float64) func(b []byte) {
	return func(b []byte) {
		binary.LittleEndian.PutUint64(b, math.Float64bits(math.Float64frombits(binary.LittleEndian.Uint64(b))+d))
	}
}

// TestGoldenDetectsCorruption checks that the golden comparison fails when
// one value of a golden tensor is corrupted (slightly, in a large tensor;
// an intermediate; the uint8 video off by 2), when a golden tensor has no
// computed counterpart, and that a missing golden folder is an error.
func TestGoldenDetectsCorruption(t *testing.T) {
	dir := goldendir.VAE(t)
	m, _ := goldenModels(t, dir)
	got, _, _, err := fullDecodeOnce(m, dir)
	if err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "decode_full.safetensors")
	if _, fails := compareFile(full, got); len(fails) > 0 {
		t.Fatalf("pristine file fails: %v", fails)
	}
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "decode_full.safetensors")
	for _, c := range []struct {
		name  string
		i     int
		delta float64
	}{
		{"video", 40000, 0.01},                   // 115,200 values: the relative L2 error stays below 1e-4
		{"frame2.upsamples.14", 1234, 0.01},      // an intermediate
		{"frame1.upsamples.3.time_conv", 0, 0.5}, // before the interleave
		{"z", 5, 1e-3},                           // the input
		{"video_unclamped", 7, -0.05},
	} {
		corruptCopy(t, full, bad, c.name, c.i, addF64(c.delta))
		_, fails := compareFile(bad, got)
		if len(fails) != 1 || !strings.Contains(fails[0], c.name) {
			t.Errorf("%s[%d] + %g: failures %v", c.name, c.i, c.delta, fails)
		}
	}
	g2 := map[string]tensor{}
	for k, v := range got {
		g2[k] = v
	}
	delete(g2, "frame1.middle.1")
	if _, fails := compareFile(full, g2); len(fails) != 1 || !strings.Contains(fails[0], "frame1.middle.1 not compared") {
		t.Errorf("an uncompared tensor: failures %v", fails)
	}

	// The uint8 video off by 2 in one value.
	sgot, _, _, sf := streamDecode(m, dir, Options{Mean: []float32{0.25, -0.5, 0.125, -0.375}, Std: []float32{1.5, 0.75, 2, 1.25}})
	if len(sf) > 0 {
		t.Fatal(sf)
	}
	stream := filepath.Join(dir, "decode_stream.safetensors")
	badS := filepath.Join(tmp, "decode_stream.safetensors")
	corruptCopy(t, stream, badS, "video_u8", 999, func(b []byte) { b[0] += 2 })
	if _, fails := compareFile(badS, sgot); len(fails) != 1 || !strings.Contains(fails[0], "video_u8[999]") {
		t.Errorf("video_u8 off by 2: failures %v", fails)
	}

	// A missing golden folder is an error (goldendir.VAE fails the test).
	t.Setenv(goldendir.EnvVAE, filepath.Join(tmp, "missing"))
	if _, err := goldendir.Find(goldendir.EnvVAE, "vae"); err == nil || !strings.Contains(err.Error(), goldendir.EnvVAE) {
		t.Errorf("missing folder: %v", err)
	}
	t.Setenv(goldendir.EnvPipeline, tmp+"/none")
	if _, err := goldendir.Find(goldendir.EnvPipeline, "pipeline/vae"); err == nil {
		t.Error("missing pipeline folder: no error")
	}
}
