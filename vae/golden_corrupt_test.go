package vae

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/internal/torchtest"
)

// corruptCopy writes a copy of the safetensors file src to dst with
// element i of tensor name changed by f.
func corruptCopy(t *testing.T, src, dst, name string, i int, f func(b []byte)) {
	t.Helper()
	patchCopy(t, src, dst, name, func(j int, b []byte) {
		if j == i {
			f(b)
		}
	})
}

// patchCopy writes a copy of the safetensors file src to dst with every
// element j of tensor name (its bytes b) changed by f.
func patchCopy(t *testing.T, src, dst, name string, f func(j int, b []byte)) {
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
	size := int64(info.DType.Size())
	start := 8 + int64(binary.LittleEndian.Uint64(raw)) + info.Begin
	for j := 0; start+int64(j+1)*size <= 8+int64(binary.LittleEndian.Uint64(raw))+info.End; j++ {
		f(j, raw[start+int64(j)*size:start+int64(j+1)*size])
	}
	if err := os.WriteFile(dst, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func addF64(d float64) func(b []byte) {
	return func(b []byte) {
		binary.LittleEndian.PutUint64(b, math.Float64bits(math.Float64frombits(binary.LittleEndian.Uint64(b))+d))
	}
}

// maxAbsOf returns the largest magnitude of golden tensor name of path.
func maxAbsOf(t *testing.T, path, name string) (float64, int) {
	t.Helper()
	v, _, err := readF64(path, name)
	if err != nil {
		t.Fatal(err)
	}
	m := 0.0
	for _, x := range v {
		m = math.Max(m, math.Abs(x))
	}
	return m, len(v)
}

// TestGoldenDetectsCorruption checks that the golden comparison of the
// golden folder fails when one value of a golden tensor is corrupted
// (slightly, in a large tensor; an intermediate; the uint8 video off by
// 2), when a golden tensor has no computed counterpart, and that a missing
// golden folder is an error.
func TestGoldenDetectsCorruption(t *testing.T) {
	checkDetectsCorruption(t, golden.VAE(t))

	// A missing golden folder is an error (golden.VAE fails the test).
	tmp := t.TempDir()
	t.Setenv(golden.EnvVAE, filepath.Join(tmp, "missing"))
	if _, err := golden.Find(golden.EnvVAE, "vae"); err == nil || !strings.Contains(err.Error(), golden.EnvVAE) {
		t.Errorf("missing folder: %v", err)
	}
	t.Setenv(golden.EnvPipeline, tmp+"/none")
	if _, err := golden.Find(golden.EnvPipeline, "pipeline/vae"); err == nil {
		t.Error("missing pipeline folder: no error")
	}
}

// checkDetectsCorruption is TestGoldenDetectsCorruption's check of the
// golden folder dir. Everything it needs comes from the folder: the
// latent statistics from the sidecars, each corruption's size from the
// tensor it corrupts (1 % of its largest magnitude, 100 times the
// per-value tolerance of compareFile), its position from the tensor's
// length.
func checkDetectsCorruption(t *testing.T, dir string) {
	t.Helper()
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
		name string
		at   float64 // position, as a fraction of the length
		sign float64
	}{
		{"video", 0.35, 1},                     // a value of a large tensor: the relative L2 error stays below goldenTol
		{"frame2.upsamples.14", 0.1, 1},        // an intermediate
		{"frame1.upsamples.3.time_conv", 0, 1}, // before the interleave
		{"z", 0.05, 1},                         // the input
		{"video_unclamped", 0.0001, -1},
	} {
		big, n := maxAbsOf(t, full, c.name)
		i, delta := int(c.at*float64(n)), c.sign*100*goldenTol*big
		corruptCopy(t, full, bad, c.name, i, addF64(delta))
		_, fails := compareFile(bad, got)
		if len(fails) != 1 || !strings.Contains(fails[0], c.name) {
			t.Errorf("%s[%d] + %g: failures %v", c.name, i, delta, fails)
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

	// The uint8 video off by 2 in one value, decoded with the statistics
	// the stream's sidecar records.
	side, err := readSidecar(filepath.Join(dir, "decode_stream.json"))
	if err != nil {
		t.Fatal(err)
	}
	mean, std, err := statsOf(side)
	if err != nil {
		t.Fatal(err)
	}
	sgot, _, _, sf := streamDecode(m, dir, Options{Mean: mean, Std: std})
	if len(sf) > 0 {
		t.Fatal(sf)
	}
	stream := filepath.Join(dir, "decode_stream.safetensors")
	badS := filepath.Join(tmp, "decode_stream.safetensors")
	corruptCopy(t, stream, badS, "video_u8", 999, func(b []byte) {
		if b[0] < 128 {
			b[0] += 2
		} else {
			b[0] -= 2
		}
	})
	if _, fails := compareFile(badS, sgot); len(fails) != 1 || !strings.Contains(fails[0], "video_u8[999]") {
		t.Errorf("video_u8 off by 2: failures %v", fails)
	}
}

// TestGoldenDetectsCorruptionOtherStats runs checkDetectsCorruption on a
// golden folder with other latent statistics, made from the golden one:
// channel c's mean and std multiplied by a power of two s_c (2, 1/2, 4,
// 1/4, …) and conv2's input column c divided by s_c, so that conv2 sees
// s_c·x_c through weights W/s_c and every value after it is the same bits
// (z_denorm, the de-normalised latents, is multiplied by s_c, exactly).
// weights.pth is written again as a plain dictionary of the same tensors.
func TestGoldenDetectsCorruptionOtherStats(t *testing.T) {
	src, dir := golden.VAE(t), t.TempDir()
	scale := func(c int) float64 { return []float64{2, 0.5, 4, 0.25}[c%4] }
	for _, name := range []string{"decode_full.json", "decode_stream.json"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		var side map[string]any
		if err := json.Unmarshal(b, &side); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"latent_mean", "latent_std"} {
			v, ok := side[k].([]any)
			if !ok {
				t.Fatalf("%s: %s = %v", name, k, side[k])
			}
			for c := range v {
				v[c] = v[c].(float64) * scale(c)
			}
		}
		if b, err = json.MarshalIndent(side, "", " "); err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Weights: conv2's columns.
	sd, err := checkpoint.LoadFile(filepath.Join(src, "weights.safetensors"), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := sd["conv2.weight"]
	if w == nil || len(w.Shape) != 5 {
		t.Fatal("conv2.weight missing or not of rank 5")
	}
	C, inner := w.Shape[1], len(w.Data)/(w.Shape[0]*w.Shape[1]) // [out][in][1][1][1]
	for i := range w.Data {
		w.Data[i] = float32(float64(w.Data[i]) / scale(i/inner%C))
	}
	f, err := checkpoint.OpenRaw(filepath.Join(src, "weights.pth"), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ts []checkpoint.WriteTensor
	var top torchtest.Dict
	for _, rt := range f.Tensors {
		x := sd[rt.Name]
		ts = append(ts, checkpoint.WriteTensor{Name: rt.Name, Shape: x.Shape, Data: x.Data})
		top = append(top, torchtest.KV{Key: rt.Name, Value: &torchtest.Tensor{Shape: x.Shape, Data: x.Data}})
	}
	f.Close()
	st := filepath.Join(dir, "weights.safetensors")
	if err := checkpoint.WriteSafetensorsFile(st, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "weights.pth"), torchtest.Bytes(top, torchtest.Options{}), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(src, "weights.json"))
	if err != nil {
		t.Fatal(err)
	}
	var wj map[string]any
	if err := json.Unmarshal(b, &wj); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	wj["sha256_weights_safetensors"] = hex.EncodeToString(sum[:])
	if b, err = json.Marshal(wj); err == nil {
		err = os.WriteFile(filepath.Join(dir, "weights.json"), b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	// decode_full: z_denorm [C][T][h][w] × s_c.
	_, n := maxAbsOf(t, filepath.Join(src, "decode_full.safetensors"), "z_denorm")
	patchCopy(t, filepath.Join(src, "decode_full.safetensors"), filepath.Join(dir, "decode_full.safetensors"), "z_denorm", func(i int, b []byte) {
		binary.LittleEndian.PutUint64(b, math.Float64bits(math.Float64frombits(binary.LittleEndian.Uint64(b))*scale(i/(n/C))))
	})
	if err := os.Symlink(filepath.Join(src, "decode_stream.safetensors"), filepath.Join(dir, "decode_stream.safetensors")); err != nil {
		t.Fatal(err)
	}
	// The folder is a valid golden set of other statistics: the whole
	// check of decode_full passes on it.
	pth, _ := goldenModels(t, dir)
	r, _, mean, _ := checkFull(pth, dir)
	srcSide, err := readSidecar(filepath.Join(src, "decode_full.json"))
	if err != nil {
		t.Fatal(err)
	}
	srcMean, _, _ := statsOf(srcSide)
	if len(r.fails) > 0 || slices.Equal(mean, srcMean) {
		t.Fatalf("the folder of other statistics (mean %v, golden %v) fails: %v", mean, srcMean, r.fails)
	}
	checkDetectsCorruption(t, dir)
}
