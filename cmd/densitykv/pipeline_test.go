package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/video"
)

// readmeCommand is the README's (and issue #12's) end-to-end command, with
// ../shared/golden standing for the golden folders.
const readmeCommand = `densitykv generate --arch tiny --checkpoint ../shared/golden/wan/weights.safetensors \
    --text-encoder ../shared/golden/t5/weights.pth --tokenizer ../shared/golden/t5/spiece.model \
    --vae ../shared/golden/pipeline/vae/weights.pth --prompt "a heron lands on a lake" \
    --latent-height 6 --latent-width 8 --blocks 4 --policy densitykv --capacity 24 \
    --sigma 4 --out runs --name e2e`

// pipelineArgs is the README command's arguments with the golden folders
// found by package golden, out and name replaced, and extra appended.
func pipelineArgs(t *testing.T, out, name string, extra ...string) []string {
	t.Helper()
	a := []string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(golden.Wan(t), "weights.safetensors"),
		"--text-encoder", filepath.Join(golden.T5(t), "weights.pth"), "--tokenizer", filepath.Join(golden.T5(t), "spiece.model"),
		"--vae", filepath.Join(golden.PipelineVAE(t), "weights.pth"), "--prompt", "a heron lands on a lake",
		"--latent-height", "6", "--latent-width", "8", "--blocks", "4", "--policy", "densitykv", "--capacity", "24",
		"--sigma", "4", "--out", out, "--name", name}
	return append(a, extra...)
}

func ffTools(t *testing.T) (string, string) {
	t.Helper()
	ff, err := video.LookFFmpeg()
	if err != nil {
		t.Fatalf("%v (CI installs it in .ci/run)", err)
	}
	fp, err := video.LookFFprobe()
	if err != nil {
		t.Fatal(err)
	}
	return ff, fp
}

// TestREADMEGenerateCommand: the README's command, run as written from a
// folder beside ../shared (the paths resolve), writes runs/e2e/video.mp4
// with 45 frames of 64×48.
func TestREADMEGenerateCommand(t *testing.T) {
	_, fp := ffTools(t)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), readmeCommand) {
		t.Fatalf("README lacks the end-to-end command:\n%s", readmeCommand)
	}
	args := strings.Fields(strings.NewReplacer(`"a heron lands on a lake"`, "PROMPT", "\\\n", " ").Replace(readmeCommand))[1:]
	for i, a := range args {
		switch {
		case a == "PROMPT":
			args[i] = "a heron lands on a lake"
		case strings.HasPrefix(a, "../shared/golden/"):
			rest := strings.TrimPrefix(a, "../shared/golden/")
			sub, file, _ := strings.Cut(rest, "/")
			if strings.HasPrefix(rest, "pipeline/vae/") {
				args[i] = filepath.Join(golden.PipelineVAE(t), filepath.Base(rest))
			} else {
				args[i] = filepath.Join(golden.MustFind(t, "DENSITYKV_GOLDEN_"+strings.ToUpper(sub), sub), file)
			}
		}
	}
	dir := t.TempDir()
	t.Chdir(dir)
	code, out, errs := run(t, context.Background(), args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	info, err := video.Probe(fp, filepath.Join("runs", "e2e", "video.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Frames != 45 || info.Width != 64 || info.Height != 48 {
		t.Fatalf("runs/e2e/video.mp4: %+v", info)
	}
	if !strings.Contains(out, "video: runs/e2e/video.mp4 (45 frames at 16 fps") || !strings.Contains(errs, "text length 8 keeps the first 7") {
		t.Fatalf("output:\n%s\n%s", out, errs)
	}
	if _, err := os.Stat(filepath.Join("runs", "e2e", runfolder.DirPreview)); err == nil {
		t.Fatal("a latent preview with --vae (it is off unless asked for)")
	}
}

// TestGenerateVideoResume: a run stopped after block 1 of 4 and resumed
// has the video of an uninterrupted run: the same video.mp4 bytes (one
// continuous encode at exactly 16 fps, fewer keyframes than blocks) and
// the same segment bytes, also when a lossless copy of a completed block
// (state/video/) was damaged meanwhile: resume makes it again from the
// latents. --fps and --crf cannot change on resume.
func TestGenerateVideoResume(t *testing.T) {
	ff, fp := ffTools(t)
	dir := t.TempDir()
	extra := []string{"--quiet", "--snapshot-every", "2"}
	if code, _, errs := run(t, context.Background(), pipelineArgs(t, dir, "full", extra...)...); code != 0 {
		t.Fatal(errs)
	}
	stopAfterBlocks(t, 2, pipelineArgs(t, dir, "stop", extra...))
	segs, _ := filepath.Glob(filepath.Join(dir, "stop", "segments", "segment_*.mp4"))
	if len(segs) != 2 {
		t.Fatalf("stopped after 2 blocks with segments %v", segs)
	}
	if info, err := video.Probe(fp, filepath.Join(dir, "stop", "video.mp4")); err != nil || info.Frames != 1+4*5 {
		t.Fatalf("the stopped run's video.mp4 (its finished blocks): %+v %v", info, err)
	}
	// A damaged segment of a completed block stops --resume.
	seg := filepath.Join(dir, "stop", "segments", "segment_00001.mp4")
	data, _ := os.ReadFile(seg)
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 1
	os.WriteFile(seg, bad, 0o644)
	code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "stop", "--resume", "--quiet")
	if code == 0 || !strings.Contains(errs, "segment_00001.mp4 of completed block 1") || !strings.Contains(errs, "densitykv decode") {
		t.Fatalf("damaged segment: exit %d: %s", code, errs)
	}
	os.WriteFile(seg, data, 0o644)
	for _, fl := range [][]string{{"--fps", "24"}, {"--crf", "23"}} {
		code, _, errs = run(t, context.Background(), append([]string{"generate", "--out", dir, "--name", "stop", "--resume", "--quiet"}, fl...)...)
		if code != exitUsage || !strings.Contains(errs, "drop ["+fl[0]+"]") {
			t.Fatalf("resume %v: exit %d: %s", fl, code, errs)
		}
	}
	// A damaged lossless copy is made again.
	lossless := filepath.Join(dir, "stop", runfolder.DirState, runfolder.DirVideoState, "segment_00000.mkv")
	ldata, err := os.ReadFile(lossless)
	if err != nil {
		t.Fatal(err)
	}
	ldata[len(ldata)/2] ^= 1
	os.WriteFile(lossless, ldata, 0o644)
	blocks := 0
	genHook = func() { blocks++ }
	code, _, errs = run(t, context.Background(), "generate", "--out", dir, "--name", "stop", "--resume")
	genHook = nil
	if code != 0 || blocks != 2 || !strings.Contains(errs, "1 of the 2 lossless copies") {
		t.Fatalf("resume: exit %d, %d blocks: %s", code, blocks, errs)
	}
	a, na, err := video.ReadFrames(ff, filepath.Join(dir, "full", "video.mp4"), 64, 48)
	if err != nil {
		t.Fatal(err)
	}
	b, nb, err := video.ReadFrames(ff, filepath.Join(dir, "stop", "video.mp4"), 64, 48)
	if err != nil || na != 45 || nb != na || !bytes.Equal(a, b) {
		t.Fatalf("resumed video: %d frames, uninterrupted %d, equal %v (%v)", nb, na, bytes.Equal(a, b), err)
	}
	x, _ := os.ReadFile(filepath.Join(dir, "full", "video.mp4"))
	y, _ := os.ReadFile(filepath.Join(dir, "stop", "video.mp4"))
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Fatalf("resumed video.mp4: %d bytes, uninterrupted %d, equal %v", len(y), len(x), bytes.Equal(x, y))
	}
	if info, err := video.Probe(fp, filepath.Join(dir, "stop", "video.mp4")); err != nil || info.AvgFrameRate != "16/1" || info.NbFrames != 45 || info.Duration != "2.812500" || info.KeyFrames >= 4 {
		t.Fatalf("resumed video.mp4: %+v (%v), want one encode of 45 frames at exactly 16 fps", info, err)
	}
	for i := 0; i < 4; i++ {
		x, _ := os.ReadFile(filepath.Join(dir, "full", "segments", fmt.Sprintf("segment_%05d.mp4", i)))
		y, _ := os.ReadFile(filepath.Join(dir, "stop", "segments", fmt.Sprintf("segment_%05d.mp4", i)))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("segment %d: other bytes after resume", i)
		}
	}
}

// TestGenerateRefusesBadInputs: a missing or corrupt input file, or one
// that does not fit the others, is refused before the run folder exists,
// with the flag and the file named.
func TestGenerateRefusesBadInputs(t *testing.T) {
	dir := t.TempDir()
	cut := func(src, name string) string {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		os.WriteFile(p, b[:len(b)/2], 0o644)
		return p
	}
	vaeCut := cut(filepath.Join(golden.PipelineVAE(t), "weights.pth"), "vae_cut.pth")
	encCut := cut(filepath.Join(golden.T5(t), "weights.pth"), "t5_cut.pth")
	garbage := filepath.Join(dir, "spiece.model")
	os.WriteFile(garbage, []byte("not a sentencepiece model"), 0o644)
	// A backbone checkpoint missing one tensor.
	sd, err := checkpoint.LoadFile(filepath.Join(golden.Wan(t), "weights.safetensors"), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ws []checkpoint.WriteTensor
	for _, n := range sd.Names() {
		if n != "blocks.1.cross_attn.o.weight" {
			ws = append(ws, checkpoint.WriteTensor{Name: n, Shape: sd[n].Shape, Data: sd[n].Data})
		}
	}
	partial := filepath.Join(dir, "partial.safetensors")
	if err := checkpoint.WriteSafetensorsFile(partial, ws, nil); err != nil {
		t.Fatal(err)
	}
	flag := func(name, value string) func([]string) []string {
		return func(a []string) []string {
			for i := range a {
				if a[i] == name {
					a[i+1] = value
				}
			}
			return a
		}
	}
	for _, c := range []struct {
		name string
		mod  func([]string) []string
		want []string
	}{
		{"vae missing", flag("--vae", filepath.Join(dir, "none.pth")), []string{"--vae", "none.pth"}},
		{"vae cut", flag("--vae", vaeCut), []string{"--vae", vaeCut}},
		{"vae of other channels", flag("--vae", filepath.Join(golden.VAE(t), "weights.pth")),
			[]string{"--vae", fmt.Sprintf("decodes %d latent channels, the DiT makes 16", goldenConfigInt(t, golden.VAE(t), "weights.json", "z_dim"))}},
		{"vae statistics", func(a []string) []string { return append(a, "--vae-mean", "0,0", "--vae-std", "1,1") }, []string{"--vae", "2 values"}},
		{"text encoder cut", flag("--text-encoder", encCut), []string{"--text-encoder", encCut}},
		{"tokenizer garbage", flag("--tokenizer", garbage), []string{"--tokenizer", garbage}},
		{"checkpoint tensor", flag("--checkpoint", partial), []string{"--checkpoint", partial, "blocks.1.cross_attn.o.weight"}},
		{"checkpoint missing", flag("--checkpoint", filepath.Join(dir, "none.safetensors")), []string{"--checkpoint", "none.safetensors"}},
		{"no encoder", func(a []string) []string { return a[:2] }, nil},
	} {
		args := c.mod(pipelineArgs(t, dir, "x", "--quiet"))
		if c.name == "no encoder" {
			args = []string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(golden.Wan(t), "weights.safetensors"), "--prompt", "a",
				"--latent-height", "6", "--latent-width", "8", "--blocks", "1", "--out", dir, "--name", "x"}
			c.want = []string{"--prompt and --prompts need --text-encoder"}
		}
		code, _, errs := run(t, context.Background(), args...)
		if code != exitUsage {
			t.Errorf("%s: exit %d: %s", c.name, code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: %q lacks %q", c.name, strings.TrimSpace(errs), w)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
			t.Fatalf("%s: the refused run made its folder", c.name)
		}
	}
}

// TestGenerateWithoutFFmpeg: with no ffmpeg on PATH the video is PNG
// frames, and the command says how to get mp4; decode, with ffmpeg back,
// writes video.mp4 from the latents.
func TestGenerateWithoutFFmpeg(t *testing.T) {
	ff, fp := ffTools(t)
	dir := t.TempDir()
	path := os.Getenv("PATH")
	t.Setenv("PATH", t.TempDir())
	code, out, errs := run(t, context.Background(), pipelineArgs(t, dir, "png", "--quiet", "--blocks", "2")...)
	if code != 0 {
		t.Fatal(errs)
	}
	if !strings.Contains(errs, "ffmpeg is not on PATH") || !strings.Contains(out, "21 PNG frames") || !strings.Contains(out, "apt-get install ffmpeg") {
		t.Fatalf("no-ffmpeg messages:\nstdout %s\nstderr %s", out, errs)
	}
	frames, _ := filepath.Glob(filepath.Join(dir, "png", "frames", "frame_*.png"))
	if len(frames) != 21 {
		t.Fatalf("%d PNG frames", len(frames))
	}
	var pngs [][]byte
	for _, f := range frames {
		b, _, _, err := video.ReadPNG(f)
		if err != nil {
			t.Fatal(err)
		}
		pngs = append(pngs, b)
	}
	t.Setenv("PATH", path)
	code, out, errs = run(t, context.Background(), "decode", filepath.Join(dir, "png"), "--quiet")
	if code != 0 || !strings.Contains(out, "into 21 frames of 64×48") {
		t.Fatalf("decode: exit %d\n%s\n%s", code, out, errs)
	}
	info, err := video.Probe(fp, filepath.Join(dir, "png", "video.mp4"))
	if err != nil || info.Frames != 21 || info.Tags["title"] != "a heron lands on a lake" {
		t.Fatalf("decoded video: %+v %v", info, err)
	}
	// The mp4 frames are the PNG frames, lossily coded: each nearest its own.
	got, n, err := video.ReadFrames(ff, filepath.Join(dir, "png", "video.mp4"), 64, 48)
	if err != nil || n != 21 {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "png", "frames")); err == nil {
		t.Error("decode kept the PNG frames beside the mp4")
	}
	for i := 0; i < n; i++ {
		if dist(got[i*9216:(i+1)*9216], pngs[i]) >= dist(got[i*9216:(i+1)*9216], pngs[(i+1)%n]) {
			t.Fatalf("mp4 frame %d is not nearest its PNG frame", i)
		}
	}
}

// goldenConfigInt returns the integer config.key of the JSON sidecar file
// in the golden folder dir (the text encoder's dim, the VAE's z_dim: other
// golden sets may have others).
func goldenConfigInt(t *testing.T, dir, file, key string) int {
	t.Helper()
	var side struct {
		Config map[string]json.RawMessage `json:"config"`
	}
	var v int
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err == nil {
		err = json.Unmarshal(b, &side)
	}
	if err == nil {
		err = json.Unmarshal(side.Config[key], &v)
	}
	if err != nil || v <= 0 {
		t.Fatalf("%s: config.%s = %s (%v)", file, key, side.Config[key], err)
	}
	return v
}

func dist(a, b []byte) float64 {
	var s int
	for i := range a {
		d := int(a[i]) - int(b[i])
		s += max(d, -d)
	}
	return float64(s) / float64(len(a))
}

// TestEncodeTextAndSchedules (2 blocks, 21 frames): encode-text writes the embedding generate
// --prompt computes (a --text run of it gives the same frames); --prompt
// TEXT@BLOCK switches prompts; decode makes the same video again.
func TestEncodeTextAndSchedules(t *testing.T) {
	ff, _ := ffTools(t)
	dir := t.TempDir()
	emb := filepath.Join(dir, "emb.safetensors")
	code, out, errs := run(t, context.Background(), "encode-text", "--text-encoder", filepath.Join(golden.T5(t), "weights_bf16.pth"),
		"--tokenizer", golden.T5(t), "--prompt", "a heron lands on a lake", "--text-len", "8", "-o", emb, "--json", "--quiet")
	if code != 0 {
		t.Fatal(errs)
	}
	var r struct {
		SeqLen    int    `json:"seq_len"`
		Dim       int    `json:"dim"`
		Truncated bool   `json:"truncated"`
		Precision string `json:"precision"`
	}
	// A test-size encoder computes at fp32 by default (as generate --arch
	// tiny does: the frames below match).
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.SeqLen != 8 || r.Dim != goldenConfigInt(t, golden.T5(t), "encode.json", "dim") || !r.Truncated || r.Precision != "fp32" || !strings.Contains(errs, "warning") {
		t.Fatalf("encode-text: %s %s (%v)", out, errs, err)
	}
	if code, _, errs := run(t, context.Background(), pipelineArgs(t, dir, "prompt", "--quiet", "--blocks", "2")...); code != 0 {
		t.Fatal(errs)
	}
	textArgs := []string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(golden.Wan(t), "weights.safetensors"), "--text", emb,
		"--vae", filepath.Join(golden.PipelineVAE(t), "weights.pth"), "--latent-height", "6", "--latent-width", "8", "--blocks", "2",
		"--policy", "densitykv", "--capacity", "24", "--sigma", "4", "--out", dir, "--name", "text", "--quiet"}
	if code, _, errs := run(t, context.Background(), textArgs...); code != 0 {
		t.Fatal(errs)
	}
	frames := func(name string) []byte {
		b, n, err := video.ReadFrames(ff, filepath.Join(dir, name, "video.mp4"), 64, 48)
		if err != nil || n != 21 {
			t.Fatalf("%s: %d frames %v", name, n, err)
		}
		return b
	}
	if !bytes.Equal(frames("prompt"), frames("text")) {
		t.Fatal("--text of encode-text's file and --prompt give other frames")
	}
	// decode: the same frames again.
	before := frames("prompt")
	if code, _, errs := run(t, context.Background(), "decode", filepath.Join(dir, "prompt"), "--quiet"); code != 0 {
		t.Fatal(errs)
	}
	if !bytes.Equal(before, frames("prompt")) {
		t.Fatal("decode made other frames")
	}
	// A schedule: another prompt from block 1 changes block 1 only.
	sched := pipelineArgs(t, dir, "sched", "--quiet", "--blocks", "2", "--prompt", "a kangaroo jumps@1")
	for i := range sched {
		if sched[i] == "a heron lands on a lake" {
			sched[i] += "@0"
		}
	}
	if code, _, errs := run(t, context.Background(), sched...); code != 0 {
		t.Fatal(errs)
	}
	// Compared by block: each block's segment is an encode of that block's
	// frames alone (video.mp4 is one encode of all of them, whose rate
	// control may let later frames move earlier ones' pixels); the
	// segments' bytes differ anyway by their metadata (the prompts).
	segment := func(name string, k int) []byte {
		b, n, err := video.ReadFrames(ff, filepath.Join(dir, name, "segments", fmt.Sprintf("segment_%05d.mp4", k)), 64, 48)
		if err != nil || n == 0 {
			t.Fatalf("%s segment %d: %d frames %v", name, k, n, err)
		}
		return b
	}
	if !bytes.Equal(segment("prompt", 0), segment("sched", 0)) || bytes.Equal(segment("prompt", 1), segment("sched", 1)) {
		t.Fatal("the prompt switch at block 1 does not change exactly the frames from block 1 on")
	}
	var prov struct {
		Prompts []struct {
			FromBlock int    `json:"from_block"`
			Text      string `json:"text"`
		} `json:"prompts"`
	}
	if err := runfolder.ReadJSON(filepath.Join(dir, "sched", runfolder.FileGeneration), &prov); err != nil || len(prov.Prompts) != 2 || prov.Prompts[1].FromBlock != 1 {
		t.Fatalf("generation.json: %+v %v", prov, err)
	}
}

// TestGeneratePromptsFile: --prompts makes one video per line in
// <out>/<name>/NNNNN/; run again, it skips them all.
func TestGeneratePromptsFile(t *testing.T) {
	_, fp := ffTools(t)
	dir := t.TempDir()
	pf := filepath.Join(dir, "prompts.txt")
	os.WriteFile(pf, []byte("a heron lands on a lake\na red panda walks through snow\na kangaroo in the desert\n"), 0o644)
	args := pipelineArgs(t, dir, "generate", "--quiet", "--blocks", "2")
	for i := range args {
		if args[i] == "--prompt" {
			args[i], args[i+1] = "--prompts", pf
		}
	}
	code, out, errs := run(t, context.Background(), args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for i := 0; i < 3; i++ {
		info, err := video.Probe(fp, filepath.Join(dir, "generate", fmt.Sprintf("%05d", i), "video.mp4"))
		if err != nil || info.Frames != 21 {
			t.Fatalf("video %d: %+v %v", i, info, err)
		}
	}
	if !strings.Contains(out, "3 of 3 videos complete") {
		t.Fatalf("stdout:\n%s", out)
	}
	blocks := 0
	genHook = func() { blocks++ }
	code, out, errs = run(t, context.Background(), args...)
	genHook = nil
	if code != 0 || blocks != 0 || strings.Count(out, " done ") != 3 {
		t.Fatalf("second run: exit %d, %d blocks\n%s\n%s", code, blocks, out, errs)
	}
	code, _, errs = run(t, context.Background(), "generate", "--out", dir, "--name", "generate", "--resume", "--quiet")
	if code != 0 {
		t.Fatalf("--resume of a complete batch: exit %d: %s", code, errs)
	}
	// The list's outputs against its inputs, before anything is written:
	// an input in a prompt's run folder (here the tokenizer in 00002/text/)
	// and --record-stream (every prompt's run would write it) are refused.
	tok := filepath.Join(dir, "generate", "00002", "text", "spiece.model")
	for i := range args {
		if args[i] == "--tokenizer" {
			b, err := os.ReadFile(args[i+1])
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(tok, b, 0o644)
		}
	}
	for _, c := range []struct {
		flag, value, want string
	}{
		{"--tokenizer", tok, "holds --tokenizer " + tok + ": writing it would overwrite an input"},
		{"--record-stream", filepath.Join(dir, "stream.bin"), "--record-stream"},
	} {
		a := slices.Clone(args)
		if i := slices.Index(a, c.flag); i >= 0 {
			a[i+1] = c.value
		} else {
			a = append(a, c.flag, c.value)
		}
		code, _, errs := run(t, context.Background(), a...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%s %s: exit %d: %s, want %q", c.flag, c.value, code, errs, c.want)
		}
	}
}

// TestBenchMediaTiny: bench vae and text run on the tiny models through
// package bench's harness at each precision asked for, and print the
// kernels and one result per precision as JSON; bench pipeline prints its
// stages.
func TestBenchMediaTiny(t *testing.T) {
	for _, c := range []struct {
		args  []string
		precs []string
		keys  []string
	}{
		{[]string{"bench", "vae", "--tiny", "--frames-per-block", "3", "--blocks", "2", "--precision", "fp32,bf16", "--json", "--quiet"}, []string{"fp32", "bf16"},
			[]string{"block_seconds", "seconds_per_block", "gflops", "kernel", "precision", "peak_rss_bytes", "decoder_state_bytes"}},
		{[]string{"bench", "vae", "--tiny", "--json", "--quiet"}, []string{"bf16"}, []string{"seconds_per_block", "extrapolated"}},
		{[]string{"bench", "text", "--tiny", "--precision", "bf16,fp32", "--json", "--quiet"}, []string{"bf16", "fp32"},
			[]string{"prompt_seconds_median", "seconds_per_prompt_full_model", "gflops", "kernel", "precision", "peak_rss_bytes", "peak_rss_bytes_full_model"}},
	} {
		code, out, errs := run(t, context.Background(), c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		var m struct {
			Kernels []map[string]any `json:"kernels"`
			Results []map[string]any `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, out)
		}
		if len(m.Kernels) != 2 || len(m.Results) != len(c.precs) {
			t.Fatalf("%v: %d kernels, %d results, want 2 and %d:\n%s", c.args, len(m.Kernels), len(m.Results), len(c.precs), out)
		}
		for i, r := range m.Results {
			if r["precision"] != c.precs[i] || r["kernel"] == "" {
				t.Errorf("%v: result %d at %v on kernel %v, want %s", c.args, i, r["precision"], r["kernel"], c.precs[i])
			}
			for _, k := range c.keys {
				if v, ok := r[k]; !ok || v == nil {
					t.Errorf("%v: no %s in result %d: %s", c.args, k, i, out)
				}
			}
		}
	}
	// The default vae run times 1-frame blocks: the 3-frame block is
	// extrapolated and says so.
	code, out, errs := run(t, context.Background(), "bench", "vae", "--tiny", "--quiet")
	if code != 0 || !strings.Contains(out, "kernel bf16: ") || !strings.Contains(out, "extrapolated") || !strings.Contains(out, " bf16: ") {
		t.Fatalf("bench vae --tiny: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = run(t, context.Background(), "bench", "pipeline", "--tiny", "--json")
	if code != 0 {
		t.Fatalf("bench pipeline: exit %d: %s", code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("bench pipeline: %v\n%s", err, out)
	}
	for _, k := range []string{"stages", "generation_peak_rss_bytes_full_model", "peak_rss_bytes_full_run"} {
		if v, ok := m[k]; !ok || v == nil {
			t.Errorf("bench pipeline: no %s in %s", k, out)
		}
	}
	if code, _, errs := run(t, context.Background(), "bench", "text", "--tiny", "--precision", "fp16"); code != 2 || !strings.Contains(errs, "--precision") {
		t.Errorf("bench text --precision fp16: exit %d: %s", code, errs)
	}
}

// TestCapGenerateHeap: a real-size generate caps the heap's soft limit at
// 18 GiB (the 20 GB design budget); tiny runs and a GOMEMLIMIT leave it.
func TestCapGenerateHeap(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	debug.SetMemoryLimit(64 << 30)
	capGenerateHeap("tiny")
	if got := debug.SetMemoryLimit(-1); got != 64<<30 {
		t.Fatalf("tiny: limit %d", got)
	}
	capGenerateHeap("1.3b")
	if got := debug.SetMemoryLimit(-1); got != generateHeapLimit || generateHeapLimit >= 20e9 {
		t.Fatalf("1.3b: limit %d, want %d (< 20 GB)", got, generateHeapLimit)
	}
	debug.SetMemoryLimit(8 << 30)
	capGenerateHeap("1.3b")
	if got := debug.SetMemoryLimit(-1); got != 8<<30 {
		t.Fatalf("a lower limit raised to %d", got)
	}
	debug.SetMemoryLimit(64 << 30)
	t.Setenv("GOMEMLIMIT", "60GiB")
	capGenerateHeap("1.3b")
	if got := debug.SetMemoryLimit(-1); got != 64<<30 {
		t.Fatalf("GOMEMLIMIT set: limit changed to %d", got)
	}
}
