package video

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tw, th = 64, 48

// frame is a smooth moving pattern (compresses well, differs per frame).
func frame(i int) []byte {
	b := make([]byte, 3*tw*th)
	for y := 0; y < th; y++ {
		for x := 0; x < tw; x++ {
			o := 3 * (y*tw + x)
			b[o] = byte(2*x + 37*i)
			b[o+1] = byte(3*y + 23*i)
			b[o+2] = byte(x + y + 53*i)
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

// TestSegmentsJoin: segments of 9, 12 and 12 frames join into one video of
// 33 frames whose decoded pixels are the segments' decoded pixels in order
// (no frame lost or repeated), at 16 fps, H.264 yuv420p, with the tags.
func TestSegmentsJoin(t *testing.T) {
	ff, fp := mustFFmpeg(t)
	dir := t.TempDir()
	tags := []Tag{{"title", "a heron lands on a lake"}, {"densitykv_prompt", "multi\nline, 'quoted' \"é\""}, {"densitykv_seed", "7"}}
	f, err := Open(dir, Options{FFmpeg: ff, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	in := writeSegments(t, f, 0, 9, 12, 12)
	list, _ := os.ReadFile(filepath.Join(dir, DirSegments, FileList))
	if string(list) != "file 'segment_00000.mp4'\nfile 'segment_00001.mp4'\nfile 'segment_00002.mp4'\n" {
		t.Fatalf("list.txt:\n%s", list)
	}
	out, err := f.Join()
	if err != nil {
		t.Fatal(err)
	}
	info, err := Probe(fp, out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Frames != 33 || info.Width != tw || info.Height != th || info.Codec != "h264" || info.PixFmt != "yuv420p" || info.FrameRate != "16/1" {
		t.Fatalf("video.mp4: %+v", info)
	}
	for _, tg := range tags {
		if info.Tags[tg.Key] != tg.Value {
			t.Errorf("tag %s = %q, want %q", tg.Key, info.Tags[tg.Key], tg.Value)
		}
	}
	got, n, err := ReadFrames(ff, out, tw, th)
	if err != nil || n != 33 {
		t.Fatalf("%d frames (%v)", n, err)
	}
	var segs []byte
	for i := 0; i < 3; i++ {
		b, _, err := ReadFrames(ff, f.SegmentPath(i), tw, th)
		if err != nil {
			t.Fatal(err)
		}
		segs = append(segs, b...)
	}
	if !bytes.Equal(got, segs) {
		t.Fatal("the joined video's frames differ from its segments' frames")
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
	// The encode is deterministic: the same frames give the same bytes.
	again, err := Open(filepath.Join(dir, "again"), Options{FFmpeg: ff, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	writeSegments(t, again, 0, 9)
	a, _ := os.ReadFile(f.SegmentPath(0))
	b, _ := os.ReadFile(again.SegmentPath(0))
	if !bytes.Equal(a, b) {
		t.Error("re-encoding segment 0 gave other bytes")
	}
}

// TestTruncateResumes: a video cut back to 2 segments continues with
// segment 2; the joined result equals an uninterrupted one frame for frame.
func TestTruncateResumes(t *testing.T) {
	ff, fp := mustFFmpeg(t)
	dir := t.TempDir()
	f, _ := Open(dir, Options{FFmpeg: ff})
	writeSegments(t, f, 0, 9, 12, 12)
	if _, err := f.Join(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, DirSegments, "segment_00003.partial.mp4"), []byte("junk"), 0o644)
	g, _ := Open(dir, Options{FFmpeg: ff})
	if err := g.Truncate(2, 21); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, DirSegments))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "list.txt segment_00000.mp4 segment_00001.mp4" {
		t.Fatalf("after Truncate(2): %v", names)
	}
	if _, err := os.Stat(g.VideoPath()); err == nil {
		t.Fatal("Truncate kept video.mp4")
	}
	if _, err := g.Begin(3, 33, tw, th); err == nil {
		t.Fatal("segment 3 begun after 2 segments")
	}
	writeSegments(t, g, 21, 12)
	out, err := g.Join()
	if err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(t.TempDir(), "ref")
	r, _ := Open(ref, Options{FFmpeg: ff})
	writeSegments(t, r, 0, 9, 12, 12)
	refOut, _ := r.Join()
	a, n, _ := ReadFrames(ff, out, tw, th)
	b, m, _ := ReadFrames(ff, refOut, tw, th)
	if n != 33 || m != 33 || !bytes.Equal(a, b) {
		t.Fatalf("resumed video: %d frames, reference %d, equal %v", n, m, bytes.Equal(a, b))
	}
	if info, _ := Probe(fp, out); info.Frames != 33 {
		t.Fatalf("ffprobe counts %d frames", info.Frames)
	}
	if err := g.Truncate(5, 0); err == nil {
		t.Fatal("Truncate kept segments that do not exist")
	}
}

// TestPNGFrames: without ffmpeg the frames are PNG files, exact, named by
// their index in the video; Truncate removes the frames after a point.
func TestPNGFrames(t *testing.T) {
	dir := t.TempDir()
	f, err := Open(dir, Options{})
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
	if _, err := f.Join(); err != ErrNoFFmpeg {
		t.Fatalf("Join without ffmpeg: %v", err)
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
	if _, err := Open(dir, Options{Tags: []Tag{{"a=b", "c"}}}); err == nil || !strings.Contains(err.Error(), "a=b") {
		t.Fatalf("bad tag key: %v", err)
	}
	f, _ := Open(dir, Options{})
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
	g, _ := Open(filepath.Join(dir, "v"), Options{FFmpeg: fake})
	s, err := g.Begin(0, 0, tw, th)
	if err != nil {
		t.Fatal(err)
	}
	s.WriteFrame(frame(0))
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "Unknown encoder libx264") {
		t.Fatalf("failing ffmpeg: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "v", DirSegments))
	if len(ents) != 0 || g.Segments() != 0 {
		t.Fatalf("a failed segment left %d files, %d segments", len(ents), g.Segments())
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
