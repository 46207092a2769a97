package video

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const tw, th = 64, 48

// frame is a smooth pattern moving by a few pixels a frame, as in video
// (compresses well, differs per frame, no scene cut).
func frame(i int) []byte {
	b := make([]byte, 3*tw*th)
	for y := 0; y < th; y++ {
		for x := 0; x < tw; x++ {
			o := 3 * (y*tw + x)
			u, v := float64(x+3*i), float64(y+2*i)
			b[o] = byte(128 + 100*math.Sin(u/9))
			b[o+1] = byte(128 + 100*math.Cos(v/7))
			b[o+2] = byte(128 + 60*math.Sin((u+v)/11))
		}
	}
	return b
}

func mustFFmpeg(t *testing.T) (string, string) {
	t.Helper()
	ff, err := LookFFmpeg()
	if err != nil {
		t.Fatalf("%v (CI installs it; tests of the mp4 path fail without it)", err)
	}
	fp, err := LookFFprobe()
	if err != nil {
		t.Fatal(err)
	}
	return ff, fp
}

// writeSegments writes segments of the given frame counts and returns
// the frames in order.
func writeSegments(t *testing.T, f *Folder, first int, counts ...int) [][]byte {
	t.Helper()
	var all [][]byte
	n := first
	for _, c := range counts {
		s, err := f.Begin(f.Segments(), n, tw, th)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < c; k++ {
			fr := frame(n)
			if err := s.WriteFrame(fr); err != nil {
				t.Fatal(err)
			}
			all = append(all, fr)
			n++
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return all
}

// opts are the authors' settings with ffmpeg ff and tags.
func opts(ff string, tags ...Tag) Options {
	return Options{FFmpeg: ff, Tags: tags, FPS: DefaultFPS, CRF: DefaultCRF}
}

// checkContinuous fails unless path is one H.264 encode of frames frames of
// tw×th at fps exactly: r_frame_rate and avg_frame_rate fps/1, the
// container's and the decoded frame count frames, the duration
// frames/fps, and keyframes as x264 places them in one pass (fewer than
// segments, the count a join of segments has).
func checkContinuous(t *testing.T, fp, path string, frames, fps, segments int) Info {
	t.Helper()
	info, err := Probe(fp, path)
	if err != nil {
		t.Fatal(err)
	}
	rate := fmt.Sprintf("%d/1", fps)
	dur := strconv.FormatFloat(float64(frames)/float64(fps), 'f', 6, 64)
	if info.Frames != frames || info.NbFrames != frames || info.Width != tw || info.Height != th || info.Codec != "h264" || info.PixFmt != "yuv420p" ||
		info.FrameRate != rate || info.AvgFrameRate != rate || info.Duration != dur {
		t.Fatalf("%s: %+v, want %d frames of %d×%d h264 yuv420p at %s for %s s", filepath.Base(path), info, frames, tw, th, rate, dur)
	}
	if info.KeyFrames < 1 || segments > 1 && info.KeyFrames >= segments {
		t.Fatalf("%s: %d keyframes for %d segments: a keyframe forced at every segment, not one encode", filepath.Base(path), info.KeyFrames, segments)
	}
	return info
}

// TestSegmentsAndVideo: segments of 9, 12 and 12 frames make one video of
// 33 frames: one continuous encode at exactly 16 fps (not a keyframe per
// segment), byte for byte the authors' single encode of the 33 frames
// (the same as from one segment of them all), with the tags; each decoded
// frame is nearest to its own input; the segments stay playable on their
// own and their lossless copies hold the frames exactly.
func TestSegmentsAndVideo(t *testing.T) {
	ff, fp := mustFFmpeg(t)
	dir := t.TempDir()
	tags := []Tag{{"title", "a heron lands on a lake"}, {"densitykv_prompt", "multi\nline, 'quoted' \"é\""}, {"densitykv_seed", "7"}}
	f, err := Open(dir, opts(ff, tags...))
	if err != nil {
		t.Fatal(err)
	}
	in := writeSegments(t, f, 0, 9, 12, 12)
	list, _ := os.ReadFile(filepath.Join(dir, DirSegments, FileList))
	if string(list) != "file 'segment_00000.mp4'\nfile 'segment_00001.mp4'\nfile 'segment_00002.mp4'\n" {
		t.Fatalf("list.txt:\n%s", list)
	}
	out, n, err := f.Video()
	if err != nil || n != 33 || out != filepath.Join(dir, FileVideo) {
		t.Fatalf("Video: %s, %d frames, %v", out, n, err)
	}
	info := checkContinuous(t, fp, out, 33, 16, 3)
	for _, tg := range tags {
		if info.Tags[tg.Key] != tg.Value {
			t.Errorf("tag %s = %q, want %q", tg.Key, info.Tags[tg.Key], tg.Value)
		}
	}
	// The lossless copies hold the frames exactly; the segments are
	// playable mp4s of their frames.
	for i, k := range []int{0, 9, 21} {
		c := []int{9, 12, 12}[i]
		got, m, err := ReadFrames(ff, f.LosslessPath(i), tw, th)
		if err != nil || m != c || !bytes.Equal(got, bytes.Join(in[k:k+c], nil)) {
			t.Fatalf("lossless copy %d: %d frames, exact %v (%v)", i, m, err == nil && bytes.Equal(got, bytes.Join(in[k:k+c], nil)), err)
		}
		if si, err := Probe(fp, f.SegmentPath(i)); err != nil || si.Frames != c || si.FrameRate != "16/1" {
			t.Fatalf("segment %d: %+v %v", i, si, err)
		}
	}
	got, n, err := ReadFrames(ff, out, tw, th)
	if err != nil || n != 33 {
		t.Fatalf("%d frames (%v)", n, err)
	}
	// Lossy, but each decoded frame is nearest to its own input frame.
	fb := 3 * tw * th
	dist := func(a, b []byte) float64 {
		var sum int
		for k, v := range a {
			d := int(v) - int(b[k])
			sum += max(d, -d)
		}
		return float64(sum) / float64(len(a))
	}
	for i := range in {
		dec := got[i*fb : (i+1)*fb]
		own := dist(in[i], dec)
		for j := range in {
			if j != i && dist(in[j], dec) <= own {
				t.Fatalf("decoded frame %d is as near to input frame %d (%.2f) as to its own (%.2f)", i, j, dist(in[j], dec), own)
			}
		}
		if own > 8 {
			t.Errorf("frame %d: mean abs error %.2f levels", i, own)
		}
	}
	// The same bytes as the authors' command on the 33 frames, and as one
	// segment of them all.
	authors := filepath.Join(t.TempDir(), "authors.mp4")
	cmd := exec.Command(ff, append(append([]string{"-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", fmt.Sprintf("%dx%d", tw, th), "-r", "16", "-i", "pipe:0",
		"-an", "-c:v", "libx264", "-preset", "medium", "-crf", "18", "-pix_fmt", "yuv420p"}, metaArgs(tags)...), authors)...)
	cmd.Stdin = bytes.NewReader(bytes.Join(in, nil))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the authors' command: %v: %s", err, b)
	}
	one, err := Open(filepath.Join(dir, "one"), opts(ff, tags...))
	if err != nil {
		t.Fatal(err)
	}
	writeSegments(t, one, 0, 33)
	oneOut, _, err := one.Video()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	for _, p := range []string{authors, oneOut} {
		if b, _ := os.ReadFile(p); len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("video.mp4 of 3 segments (%d bytes) differs from %s (%d bytes)", len(a), p, len(b))
		}
	}
	// The encode is deterministic: the same frames give the same bytes.
	again, err := Open(filepath.Join(dir, "again"), opts(ff, tags...))
	if err != nil {
		t.Fatal(err)
	}
	writeSegments(t, again, 0, 9)
	a, _ = os.ReadFile(f.SegmentPath(0))
	b, _ := os.ReadFile(again.SegmentPath(0))
	if !bytes.Equal(a, b) {
		t.Error("re-encoding segment 0 gave other bytes")
	}
}

// TestEncodePrefix: the first 2 of 3 segments encode into a named file,
// one continuous encode of their 21 frames: the bytes of the video of a
// folder holding only those 2 segments. Bad prefixes and names are refused.
func TestEncodePrefix(t *testing.T) {
	ff, fp := mustFFmpeg(t)
	dir := t.TempDir()
	f, _ := Open(dir, opts(ff))
	writeSegments(t, f, 0, 9, 12, 12)
	out, n, err := f.Encode(2, "video_1.25s.mp4")
	if err != nil || n != 21 || out != filepath.Join(dir, "video_1.25s.mp4") {
		t.Fatalf("Encode(2): %s, %d frames, %v", out, n, err)
	}
	checkContinuous(t, fp, out, 21, 16, 2)
	g, _ := Open(filepath.Join(dir, "two"), opts(ff))
	writeSegments(t, g, 0, 9, 12)
	ref, _, err := g.Video()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(ref)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatal("the 2-segment prefix differs from the video of those 2 segments")
	}
	for _, c := range []struct {
		n    int
		name string
		want string
	}{{0, "a.mp4", "first 0 segments"}, {4, "a.mp4", "3 are finished"}, {1, "../a.mp4", "plain .mp4"}, {1, "a.mkv", "plain .mp4"}, {1, "a.partial.mp4", "plain .mp4"}} {
		if _, _, err := f.Encode(c.n, c.name); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Encode(%d, %q): %v, want %q", c.n, c.name, err, c.want)
		}
	}
}

// TestEncoding: the frame rate and crf are the folder's (24 fps: frame i
// at i/24 s; crf 40 gives a smaller file than 18), and out-of-range ones
// are refused.
func TestEncoding(t *testing.T) {
	ff, fp := mustFFmpeg(t)
	dir := t.TempDir()
	size := map[int]int64{}
	for _, crf := range []int{18, 40} {
		f, err := Open(filepath.Join(dir, strconv.Itoa(crf)), Options{FFmpeg: ff, FPS: 24, CRF: crf})
		if err != nil {
			t.Fatal(err)
		}
		writeSegments(t, f, 0, 9, 12)
		out, _, err := f.Video()
		if err != nil {
			t.Fatal(err)
		}
		checkContinuous(t, fp, out, 21, 24, 2)
		st, _ := os.Stat(out)
		size[crf] = st.Size()
		if si, err := Probe(fp, f.SegmentPath(1)); err != nil || si.FrameRate != "24/1" {
			t.Fatalf("segment at 24 fps: %+v %v", si, err)
		}
	}
	if size[40] >= size[18] {
		t.Errorf("crf 40 gave %d bytes, crf 18 %d", size[40], size[18])
	}
	for _, c := range [][2]int{{0, 18}, {-1, 18}, {MaxFPS + 1, 18}, {16, -1}, {16, MaxCRF + 1}} {
		if _, err := Open(filepath.Join(dir, "bad"), Options{FFmpeg: ff, FPS: c[0], CRF: c[1]}); err == nil {
			t.Errorf("fps %d crf %d accepted", c[0], c[1])
		}
	}
	if err := CheckEncoding(MaxFPS, 0); err != nil {
		t.Error(err)
	}
}

// TestTruncateResumes: a video cut back to 2 segments continues with
// segment 2, and its video.mp4 has the bytes of an uninterrupted one; a
// missing lossless copy stops Encode, naming it, and BeginLossless makes
// it again from the segment's frames.
func TestTruncateResumes(t *testing.T) {
	ff, fp := mustFFmpeg(t)
	dir := t.TempDir()
	f, _ := Open(dir, opts(ff))
	writeSegments(t, f, 0, 9, 12, 12)
	if _, _, err := f.Video(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, DirSegments, "segment_00003.partial.mp4"), []byte("junk"), 0o644)
	os.WriteFile(filepath.Join(dir, DirLossless, "segment_00003.partial.mkv"), []byte("junk"), 0o644)
	g, _ := Open(dir, opts(ff))
	if err := g.Truncate(2, 21); err != nil {
		t.Fatal(err)
	}
	ls := func(sub string) string {
		ents, _ := os.ReadDir(filepath.Join(dir, sub))
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return strings.Join(names, " ")
	}
	if ls(DirSegments) != "list.txt segment_00000.mp4 segment_00001.mp4" || ls(DirLossless) != "segment_00000.mkv segment_00001.mkv" {
		t.Fatalf("after Truncate(2): %s; %s", ls(DirSegments), ls(DirLossless))
	}
	if _, err := os.Stat(g.VideoPath()); err == nil {
		t.Fatal("Truncate kept video.mp4")
	}
	if _, err := g.Begin(3, 33, tw, th); err == nil {
		t.Fatal("segment 3 begun after 2 segments")
	}
	writeSegments(t, g, 21, 12)
	out, _, err := g.Video()
	if err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(t.TempDir(), "ref")
	r, _ := Open(ref, opts(ff))
	writeSegments(t, r, 0, 9, 12, 12)
	refOut, _, _ := r.Video()
	want, _ := os.ReadFile(refOut)
	if got, _ := os.ReadFile(out); len(want) == 0 || !bytes.Equal(got, want) {
		t.Fatalf("resumed video.mp4: %d bytes, uninterrupted %d, equal %v", len(got), len(want), bytes.Equal(got, want))
	}
	checkContinuous(t, fp, out, 33, 16, 3)
	// A lost lossless copy: named, then made again.
	os.Remove(g.LosslessPath(1))
	if _, _, err := g.Video(); err == nil || !strings.Contains(err.Error(), "lossless copy of segment 1") {
		t.Fatalf("Video without copy 1: %v", err)
	}
	h, _ := Open(dir, opts(ff))
	if err := h.Truncate(3, 33); err != nil || h.HasLossless(1) || !h.HasLossless(2) {
		t.Fatalf("Truncate(3) with copy 1 lost: %v, copies %v %v", err, h.HasLossless(1), h.HasLossless(2))
	}
	if _, err := h.BeginLossless(3, tw, th); err == nil {
		t.Fatal("BeginLossless of an unfinished segment")
	}
	s, err := h.BeginLossless(1, tw, th)
	if err != nil {
		t.Fatal(err)
	}
	for i := 9; i < 21; i++ {
		if err := s.WriteFrame(frame(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil || h.Segments() != 3 {
		t.Fatalf("%v, %d segments", err, h.Segments())
	}
	out, _, err = h.Video()
	if got, _ := os.ReadFile(out); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("video.mp4 after the copy was made again: equal %v (%v)", bytes.Equal(got, want), err)
	}
	// A damaged copy: its frames are not whole.
	data, _ := os.ReadFile(h.LosslessPath(2))
	os.WriteFile(h.LosslessPath(2), data[:len(data)/2], 0o644)
	if _, n, err := h.Video(); err == nil || !strings.Contains(err.Error(), "hold 26 frames, the segments 33") {
		t.Fatalf("Video with copy 2 cut: %d frames, %v", n, err)
	}
	if err := h.RemoveLossless(); err != nil || h.HasLossless(0) {
		t.Fatalf("RemoveLossless: %v", err)
	}
	if err := g.Truncate(5, 0); err == nil {
		t.Fatal("Truncate kept segments that do not exist")
	}
}

// TestPNGFrames: without ffmpeg the frames are PNG files, exact, named by
// their index in the video; Truncate removes the frames after a point.
func TestPNGFrames(t *testing.T) {
	dir := t.TempDir()
	f, err := Open(dir, opts(""))
	if err != nil || f.MP4() {
		t.Fatal(err)
	}
	in := writeSegments(t, f, 0, 9, 12)
	for i, fr := range in {
		got, w, h, err := ReadPNG(f.FramePath(i))
		if err != nil || w != tw || h != th || !bytes.Equal(got, fr) {
			t.Fatalf("frame %d: %d×%d %v", i, w, h, err)
		}
	}
	if _, _, err := f.Video(); err != ErrNoFFmpeg {
		t.Fatalf("Video without ffmpeg: %v", err)
	}
	if err := f.Truncate(0, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.FramePath(8)); err != nil {
		t.Fatal("frame 8 removed")
	}
	if _, err := os.Stat(f.FramePath(9)); err == nil {
		t.Fatal("frame 9 kept")
	}
	os.Remove(f.FramePath(3))
	if err := f.Truncate(0, 9); err == nil || !strings.Contains(err.Error(), "frame 3") {
		t.Fatalf("Truncate kept frames that do not exist: %v", err)
	}
}

// TestBadInput: wrong sizes, frames and tags are errors naming the fault;
// an ffmpeg that fails leaves no partial file and reports its message.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, opts("", Tag{"a=b", "c"})); err == nil || !strings.Contains(err.Error(), "a=b") {
		t.Fatalf("bad tag key: %v", err)
	}
	f, _ := Open(dir, opts(""))
	for _, c := range [][2]int{{63, 48}, {64, 0}, {1 << 15, 2}} {
		if _, err := f.Begin(0, 0, c[0], c[1]); err == nil || !strings.Contains(err.Error(), "frame size") {
			t.Fatalf("size %v: %v", c, err)
		}
	}
	s, _ := f.Begin(0, 0, tw, th)
	if err := s.WriteFrame(make([]byte, 10)); err == nil || !strings.Contains(err.Error(), "10 bytes") {
		t.Fatalf("short frame: %v", err)
	}
	// A failing ffmpeg.
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	fake := filepath.Join(bin, "ffmpeg")
	os.WriteFile(fake, []byte("#!/bin/sh\ncat >/dev/null\necho 'Unknown encoder libx264' >&2\nexit 1\n"), 0o755)
	g, _ := Open(filepath.Join(dir, "v"), opts(fake))
	s, err := g.Begin(0, 0, tw, th)
	if err != nil {
		t.Fatal(err)
	}
	s.WriteFrame(frame(0))
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "Unknown encoder libx264") {
		t.Fatalf("failing ffmpeg: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "v", DirSegments))
	lents, _ := os.ReadDir(filepath.Join(dir, "v", DirLossless))
	if len(ents) != 0 || len(lents) != 0 || g.Segments() != 0 {
		t.Fatalf("a failed segment left %d files and %d lossless copies, %d segments", len(ents), len(lents), g.Segments())
	}
	e, _ := g.Begin(0, 0, tw, th)
	if err := e.Close(); err == nil || !strings.Contains(err.Error(), "no frames") {
		t.Fatalf("empty segment: %v", err)
	}
	t.Setenv("PATH", bin)
	os.Remove(fake)
	if _, err := LookFFmpeg(); err != ErrNoFFmpeg || !strings.Contains(err.Error(), "apt-get install ffmpeg") {
		t.Fatalf("no ffmpeg: %v", err)
	}
}
