package generate

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runinput"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/video"
)

// tinyPipeline is a generate configuration on the golden tiny models: the
// tiny umT5 and tokenizer, the tiny DiT (DensityKV, capacity 24, σ 4: the
// bank admits from block 2 on), the pipeline VAE, 4 blocks of 6×8 latents.
func tinyPipeline(t *testing.T, out, name string, prompts ...config.PromptSpec) config.GenerateConfig {
	t.Helper()
	gc := config.GenerateDefaults()
	g := &gc.Generate
	g.Arch, g.Checkpoint = "tiny", filepath.Join(golden.Wan(t), "weights.safetensors")
	g.TextEncoder = filepath.Join(golden.T5(t), "weights.pth")
	g.Tokenizer = filepath.Join(golden.T5(t), "spiece.model")
	g.VAE = filepath.Join(golden.PipelineVAE(t), "weights.pth")
	g.Prompts = prompts
	g.LatentHeight, g.LatentWidth, g.Blocks, g.Preview, g.TraceStep = 6, 8, 4, false, -1
	gc.Run.Out, gc.Run.Name = out, name
	gc.Memory.Capacity, gc.Memory.Bank.Sigma = 24, 4
	keys := config.NewKeys()
	keys.Set["memory.capacity"], keys.Set["memory.bank.sigma"] = true, true
	if err := runinput.ResolveGenerate(&gc, keys, "test"); err != nil {
		t.Fatal(err)
	}
	return gc
}

func mustFF(t *testing.T) (string, string) {
	t.Helper()
	ff, err := video.LookFFmpeg()
	if err != nil {
		t.Fatalf("%v (CI installs it)", err)
	}
	fp, err := video.LookFFprobe()
	if err != nil {
		t.Fatal(err)
	}
	return ff, fp
}

// TestGenerateEndToEnd: prompt → tiny umT5 → tiny DiT rollout with the
// DensityKV policy (the bank admits and evicts) → pipeline VAE → mp4.
// video.mp4 has 1 + 4·(12 − 1) = 45 frames of 64×48 at exactly 16 fps
// (duration 45/16 s, fewer keyframes than blocks) whose content changes
// over time, its metadata names the prompt, seed, policy, backbone and
// every file's hash, and its frames are the VAE's decode of the saved
// latents (the PNG path, without ffmpeg, gives those bytes exactly; the
// mp4 is within lossy-coding distance of them): it is byte for byte one
// encode of those frames, and the lossless copies it was encoded from are
// gone once the run is complete.
func TestGenerateEndToEnd(t *testing.T) {
	ff, fp := mustFF(t)
	dir := t.TempDir()
	const prompt = "a heron lands on a lake"
	gc := tinyPipeline(t, dir, "e2e", config.PromptSpec{Text: prompt})
	var warns []string
	res, err := Generate(context.Background(), gc, false, false, runfolder.Hooks{Warn: func(m string) { warns = append(warns, m) }})
	if err != nil {
		t.Fatal(err)
	}
	rd := filepath.Join(dir, "e2e")
	if len(warns) != 1 || !strings.Contains(warns[0], "has 11 tokens; the text length 8") {
		t.Fatalf("warnings %q, want the truncation at the tiny DiT's text length 8", warns)
	}
	info, err := video.Probe(fp, filepath.Join(rd, video.FileVideo))
	if err != nil {
		t.Fatal(err)
	}
	if info.Frames != 45 || info.NbFrames != 45 || info.Width != 64 || info.Height != 48 || info.FrameRate != "16/1" || info.AvgFrameRate != "16/1" ||
		info.Duration != "2.812500" || info.KeyFrames >= gc.Generate.Blocks || info.Codec != "h264" || info.PixFmt != "yuv420p" {
		t.Fatalf("video.mp4: %+v, want 45 frames at exactly 16 fps for 2.8125 s, one encode (not a keyframe per block)", info)
	}
	if _, err := os.Stat(filepath.Join(rd, runfolder.DirState, runfolder.DirVideoState)); !os.IsNotExist(err) {
		t.Fatalf("the lossless copies are kept after the run is complete: %v", err)
	}
	if !strings.Contains(res.Video, "45 frames") {
		t.Fatalf("result %q", res.Video)
	}
	for k, want := range map[string]string{"title": prompt, "densitykv_seed": "0", "densitykv_policy": "densitykv", "densitykv_backbone": "tiny",
		"densitykv_prompts": `[{"from_block":0,"prompt":"` + prompt + `"}]`} {
		if info.Tags[k] != want {
			t.Errorf("tag %s = %q, want %q", k, info.Tags[k], want)
		}
	}
	for _, k := range []string{"densitykv_checkpoint", "densitykv_vae", "densitykv_text_encoder", "densitykv_tokenizer"} {
		if !strings.HasPrefix(info.Tags[k], "sha256:") {
			t.Errorf("tag %s = %q", k, info.Tags[k])
		}
	}
	var prov Provenance
	if err := runfolder.ReadJSON(filepath.Join(rd, runfolder.FileGeneration), &prov); err != nil || len(prov.Prompts) != 1 || !prov.Prompts[0].Truncated || len(prov.Files) != 4 {
		t.Fatalf("generation.json: %+v %v", prov, err)
	}
	// The bank really admits (blocks 0 and 1 offer nothing).
	lines, err := runfolder.ReadLog(filepath.Join(rd, runfolder.FileLog))
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for _, ln := range lines {
		admitted += ln.AdmittedTotal
	}
	if admitted == 0 {
		t.Fatal("the DensityKV bank admitted nothing")
	}
	// Frames change over time.
	got, n, err := video.ReadFrames(ff, filepath.Join(rd, video.FileVideo), 64, 48)
	if err != nil || n != 45 {
		t.Fatalf("%d frames: %v", n, err)
	}
	fb := 64 * 48 * 3
	same := 0
	for i := 1; i < n; i++ {
		if bytes.Equal(got[(i-1)*fb:i*fb], got[i*fb:(i+1)*fb]) {
			same++
		}
	}
	if same > 0 || meanAbs(got[:fb], got[44*fb:]) < 5 {
		t.Fatalf("%d frames equal their predecessor; first vs last differ by %.2f levels", same, meanAbs(got[:fb], got[44*fb:]))
	}
	// The frames are the VAE's decode of the saved latents.
	// (lossy: each mp4 frame is nearest to its own decoded frame).
	want := decodeRun(t, rd, gc.Generate.VAE, gemm.F32)
	for i := 0; i < n; i++ {
		own := meanAbs(got[i*fb:(i+1)*fb], want[i*fb:(i+1)*fb])
		for j := 0; j < n; j++ {
			if d := meanAbs(got[i*fb:(i+1)*fb], want[j*fb:(j+1)*fb]); j != i && d <= own {
				t.Fatalf("mp4 frame %d is as near to decoded frame %d (%.2f levels) as to its own (%.2f)", i, j, d, own)
			}
		}
	}
	// video.mp4 is the one encode of those frames, with the run's tags.
	one, err := video.Open(t.TempDir(), video.Options{FFmpeg: ff, Tags: prov.Tags(), FPS: 16, CRF: 18})
	if err != nil {
		t.Fatal(err)
	}
	seg, err := one.Begin(0, 0, 64, 48)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := seg.WriteFrame(want[i*fb : (i+1)*fb]); err != nil {
			t.Fatal(err)
		}
	}
	if err := seg.Close(); err != nil {
		t.Fatal(err)
	}
	ref, _, err := one.Video()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(rd, video.FileVideo))
	b, _ := os.ReadFile(ref)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("video.mp4 (%d bytes) is not the one encode of the decoded frames (%d bytes)", len(a), len(b))
	}
	// Without ffmpeg: PNG frames, exactly the decode.
	t.Setenv("PATH", t.TempDir())
	gc2 := tinyPipeline(t, dir, "png", config.PromptSpec{Text: prompt})
	warns = nil
	res, err = Generate(context.Background(), gc2, false, false, runfolder.Hooks{Warn: func(m string) { warns = append(warns, m) }})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(warns, "\n"), "apt-get install ffmpeg") || !strings.Contains(res.Video, "45 PNG frames") || !strings.Contains(res.Video, "apt-get install ffmpeg") {
		t.Fatalf("no-ffmpeg messages: %q, %q", warns, res.Video)
	}
	var png []byte
	for i := 0; i < 46; i++ {
		b, w, h, err := video.ReadPNG(filepath.Join(dir, "png", video.DirFrames, frameName(i)))
		if i == 45 {
			if err == nil {
				t.Fatal("a 46th frame")
			}
			break
		}
		if err != nil || w != 64 || h != 48 {
			t.Fatalf("frame %d: %v", i, err)
		}
		png = append(png, b...)
	}
	if !bytes.Equal(png, want) {
		t.Fatal("the PNG frames differ from the decoded latents")
	}
	if _, err := os.Stat(filepath.Join(dir, "png", video.FileVideo)); err == nil {
		t.Fatal("video.mp4 without ffmpeg")
	}
}

// TestGeneratePrecision: generate.precision bf16 runs all three models at
// bf16. The text encoder: the run's embedding is the bf16 encode (it
// records its precision, and differs from the fp32 one). The DiT: an fp32
// run fed that same embedding makes other latents. The VAE: the frames
// (PNG, exact) are the bf16 decode of the run's latents, not the fp32 one;
// decode reproduces them at the run's precision and --precision fp32 gives
// the fp32 decode. generation.json and the configuration record it. (Two
// blocks: bf16 products are slow in the pure-Go build.)
func TestGeneratePrecision(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", t.TempDir()) // PNG frames: the decoder's exact output
	const prompt = "a heron lands on a lake"
	gc := tinyPipeline(t, dir, "bf16", config.PromptSpec{Text: prompt})
	gc.Generate.Precision, gc.Generate.Blocks = compute.BF16, 2 // 21 frames (bf16 is slow in the pure-Go build)
	if _, err := Generate(context.Background(), gc, false, false, runfolder.Hooks{}); err != nil {
		t.Fatal(err)
	}
	rd := filepath.Join(dir, "bf16")
	var prov Provenance
	if err := runfolder.ReadJSON(filepath.Join(rd, runfolder.FileGeneration), &prov); err != nil || prov.Precision != "bf16" {
		t.Fatalf("generation.json precision %q (%v)", prov.Precision, err)
	}
	var saved config.GenerateConfig
	if err := runfolder.LoadConfig(rd, &saved); err != nil || saved.Generate.Precision != compute.BF16 {
		t.Fatalf("%s precision %v (%v)", runfolder.FileConfig, saved.Generate.Precision, err)
	}
	// The text encoder.
	emb, err := ReadEmbedding(runfolder.EmbeddingPath(rd, 0))
	if err != nil || emb.Precision != "bf16" {
		t.Fatalf("the run's embedding: precision %q (%v)", emb.Precision, err)
	}
	encode := func(p gemm.Precision) []float32 {
		o := TextOptions{Encoder: gc.Generate.TextEncoder, Tokenizer: gc.Generate.Tokenizer, TextLen: gc.Generate.Model.TextLen, Precision: compute.Exactly(p)}
		in, err := CheckText(o)
		if err != nil {
			t.Fatal(err)
		}
		es, err := EncodePrompts(o, in, []string{prompt})
		if err != nil {
			t.Fatal(err)
		}
		return es[0].Values
	}
	if e16, e32 := encode(gemm.BF16), encode(gemm.F32); !slices.Equal(emb.Values, e16) || slices.Equal(e16, e32) {
		t.Fatalf("the run's embedding equals the bf16 encode %v; bf16 and fp32 encodes equal %v", slices.Equal(emb.Values, e16), slices.Equal(e16, e32))
	}
	// The DiT: the same embedding at fp32 gives other latents.
	gf := tinyPipeline(t, dir, "fp32", config.PromptSpec{Text: prompt})
	gf.Generate.Prompts, gf.Generate.Blocks, gf.Generate.VAE = nil, 2, "" // latents only
	gf.Generate.Texts = []config.TextSpec{{Path: runfolder.EmbeddingPath(rd, 0)}}
	if _, err := Generate(context.Background(), gf, false, false, runfolder.Hooks{}); err != nil {
		t.Fatal(err)
	}
	man16, err1 := rollout.ReadManifest(rd)
	man32, err2 := rollout.ReadManifest(filepath.Join(dir, "fp32"))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	z16, err1 := rollout.ReadBlock(rd, man16, 1)
	z32, err2 := rollout.ReadBlock(filepath.Join(dir, "fp32"), man32, 1)
	if err1 != nil || err2 != nil || slices.Equal(z16, z32) {
		t.Fatalf("block 1's latents at bf16 and fp32 from one embedding: equal %v (%v %v)", slices.Equal(z16, z32), err1, err2)
	}
	// The VAE.
	frames := func(run string) []byte {
		var out []byte
		for i := 0; i < 21; i++ {
			b, _, _, err := video.ReadPNG(filepath.Join(dir, run, video.DirFrames, frameName(i)))
			if err != nil {
				t.Fatalf("%s frame %d: %v", run, i, err)
			}
			out = append(out, b...)
		}
		return out
	}
	// (The precision is fp32 or bf16: frames that are not the fp32
	// decode, and that decode at the run's precision reproduces, are the
	// bf16 one.)
	got, want32 := frames("bf16"), decodeRun(t, rd, gc.Generate.VAE, gemm.F32)
	if bytes.Equal(got, want32) {
		t.Fatal("the bf16 run's frames are the fp32 decode of its latents")
	}
	if _, err := Decode(context.Background(), rd, DecodeOptions{}, runfolder.Hooks{}); err != nil || !bytes.Equal(frames("bf16"), got) {
		t.Fatalf("decode at the run's precision: %v, frames equal the run's %v", err, bytes.Equal(frames("bf16"), got))
	}
	f32 := gemm.F32
	if _, err := Decode(context.Background(), rd, DecodeOptions{Precision: &f32}, runfolder.Hooks{}); err != nil || !bytes.Equal(frames("bf16"), want32) {
		t.Fatalf("decode --precision fp32: %v, frames equal the fp32 decode %v", err, bytes.Equal(frames("bf16"), want32))
	}
}

func frameName(i int) string { return filepath.Base((&video.Folder{}).FramePath(i)) }

// decodeRun decodes a run folder's latents with the VAE in one stream at
// precision prec and returns the rgb24 frames.
func decodeRun(t *testing.T, dir, vaePath string, prec gemm.Precision) []byte {
	t.Helper()
	man, err := rollout.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := vae.Load(vaePath)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := m.NewDecoder(vae.Options{Precision: prec})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	rgb := make([]byte, 64*48*3)
	for b := range man.Shards {
		z, err := rollout.ReadBlock(dir, man, b)
		if err != nil {
			t.Fatal(err)
		}
		err = dec.DecodeFunc(z, 3, 16, 6, 8, func(_ int, px []float32) error {
			vae.RGB24(rgb, px, 48, 64)
			out = append(out, rgb...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func meanAbs(a, b []byte) float64 {
	var s int
	for i := range a {
		d := int(a[i]) - int(b[i])
		s += max(d, -d)
	}
	return float64(s) / float64(len(a))
}

// TestGenerateBatch: a prompts file of 4 lines, one blank, gives 3 run
// folders named by line index (00000, 00002, 00003: the blank line keeps
// its index and makes no video) with a video each (2 blocks: 21 frames);
// run again, every video is skipped; stopped in the second video and run
// again, the first is skipped, the second resumed and the third made,
// with the same frames as the uninterrupted batch.
func TestGenerateBatch(t *testing.T) {
	ff, _ := mustFF(t)
	dir := t.TempDir()
	pf := filepath.Join(dir, "prompts.txt")
	os.WriteFile(pf, []byte("a heron lands on a lake\n\n  a red panda walks through snow  \r\na kangaroo in the desert\n"), 0o644)
	batch := func(name string) config.GenerateConfig {
		gc := tinyPipeline(t, dir, name, config.PromptSpec{Text: "x"})
		gc.Generate.Prompts, gc.Generate.PromptsFile, gc.Generate.Blocks = nil, pf, 2
		if err := runinput.ResolveGenerate(&gc, config.NewKeys(), "test"); err != nil {
			t.Fatal(err)
		}
		return gc
	}
	blocks := 0
	hooks := runfolder.Hooks{Block: func(int, []runfolder.LogLine) { blocks++ }}
	res, err := Generate(context.Background(), batch("full"), false, false, hooks)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Batch) != 4 || blocks != 6 || res.Batch[2].Prompt != "  a red panda walks through snow" || res.Batch[1].State != "blank" {
		t.Fatalf("batch %+v, %d blocks", res.Batch, blocks)
	}
	for _, i := range []int{0, 2, 3} {
		e := res.Batch[i]
		if e.Index != i || e.State != "generated" || e.Video != "" && !strings.Contains(e.Video, runfolder.BatchDir(filepath.Join(dir, "full"), i)) {
			t.Fatalf("prompt %d: %+v", i, e)
		}
		if _, err := os.Stat(filepath.Join(runfolder.BatchDir(filepath.Join(dir, "full"), i), video.FileVideo)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(runfolder.BatchDir(filepath.Join(dir, "full"), 1)); !os.IsNotExist(err) {
		t.Fatalf("the blank line has a folder: %v", err)
	}
	blocks = 0
	if res, err = Generate(context.Background(), batch("full"), false, false, hooks); err != nil {
		t.Fatal(err)
	}
	if blocks != 0 || res.Batch[3].State != "done" {
		t.Fatalf("second run: %d blocks, %+v", blocks, res.Batch)
	}
	// Stopped during the second video, after its block 0.
	ctx, cancel := context.WithCancel(context.Background())
	blocks = 0
	stop := runfolder.Hooks{Block: func(int, []runfolder.LogLine) {
		if blocks++; blocks == 3 {
			cancel()
		}
	}}
	res, err = Generate(ctx, batch("stop"), false, false, stop)
	if err != runfolder.ErrInterrupted || res.Batch[2].State != "interrupted" || res.Batch[3].State != "pending" {
		t.Fatalf("stopped batch: %v %+v", err, res.Batch)
	}
	blocks = 0
	if res, err = Generate(context.Background(), batch("stop"), true, false, hooks); err != nil {
		t.Fatal(err)
	}
	if blocks != 1+2 || res.Batch[0].State != "done" || res.Batch[2].State != "resumed" || res.Batch[3].State != "generated" {
		t.Fatalf("continued batch: %d blocks, %+v", blocks, res.Batch)
	}
	for _, i := range []int{0, 2, 3} {
		a, na, err := video.ReadFrames(ff, filepath.Join(runfolder.BatchDir(filepath.Join(dir, "full"), i), video.FileVideo), 64, 48)
		if err != nil {
			t.Fatal(err)
		}
		b, nb, err := video.ReadFrames(ff, filepath.Join(runfolder.BatchDir(filepath.Join(dir, "stop"), i), video.FileVideo), 64, 48)
		if err != nil || na != 21 || nb != 21 || !bytes.Equal(a, b) {
			t.Fatalf("prompt %d: %d and %d frames, equal %v (%v)", i, na, nb, bytes.Equal(a, b), err)
		}
	}
	var status runfolder.ShardStatus
	if b, err := os.ReadFile(filepath.Join(dir, "stop", runfolder.DirShards, "shard-0-of-1.json")); err != nil || json.Unmarshal(b, &status) != nil || len(status.Entries) != 4 || !status.Complete {
		t.Fatalf("shard status: %v %+v", err, status)
	}
	// Another prompts file in the same folder is refused.
	os.WriteFile(pf, []byte("something else\n"), 0o644)
	if _, err := Generate(context.Background(), batch("full"), false, false, hooks); err == nil || !strings.Contains(err.Error(), "another prompts file") {
		t.Fatalf("changed prompts file: %v", err)
	}
}
