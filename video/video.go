package video

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/densitykv/densitykv/internal/atomicfile"
)

// The authors' encode settings.
const (
	FPS    = 16
	CRF    = 18
	Preset = "medium"
)

// Names inside a video folder.
const (
	DirSegments = "segments"
	DirFrames   = "frames"
	FileVideo   = "video.mp4"
	FileList    = "list.txt"
)

// MaxSide bounds a frame's width and height (8K is 7680).
const MaxSide = 1 << 14

// InstallHint says how to get ffmpeg.
const InstallHint = "install ffmpeg (Debian/Ubuntu: apt-get install ffmpeg)"

// ErrNoFFmpeg: ffmpeg is not on PATH.
var ErrNoFFmpeg = errors.New("video: ffmpeg not found on PATH; " + InstallHint)

// LookFFmpeg returns the path of ffmpeg on PATH, or ErrNoFFmpeg.
func LookFFmpeg() (string, error) { return look("ffmpeg") }

// LookFFprobe returns the path of ffprobe on PATH.
func LookFFprobe() (string, error) { return look("ffprobe") }

func look(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		if name == "ffmpeg" {
			return "", ErrNoFFmpeg
		}
		return "", fmt.Errorf("video: %s not found on PATH; %s", name, InstallHint)
	}
	return p, nil
}

// Tag is one metadata entry of the mp4 files.
type Tag struct{ Key, Value string }

// Options configures a Folder.
type Options struct {
	// FFmpeg is the ffmpeg executable; empty writes PNG frames instead.
	FFmpeg string
	// Tags are written into every segment and the joined video.
	Tags []Tag
}

// Folder is one video being written into a folder, segment by segment.
// Its methods must not be called concurrently.
type Folder struct {
	dir  string
	opt  Options
	done []bool // finished segments (mp4 mode)
}

// Open prepares dir (created if needed) for a video. Existing segments
// and frames are kept: Truncate cuts a resumed video back to where it
// continues.
func Open(dir string, o Options) (*Folder, error) {
	for _, t := range o.Tags {
		if t.Key == "" || strings.ContainsAny(t.Key, "= \t\n") {
			return nil, fmt.Errorf("video: metadata key %q must be a non-empty word", t.Key)
		}
	}
	sub := DirFrames
	if o.FFmpeg != "" {
		sub = DirSegments
	}
	if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
		return nil, fmt.Errorf("video: %w", err)
	}
	return &Folder{dir: dir, opt: o}, nil
}

// MP4 reports whether the folder gets mp4 segments (ffmpeg) rather than
// PNG frames.
func (f *Folder) MP4() bool { return f.opt.FFmpeg != "" }

// Dir is the folder.
func (f *Folder) Dir() string { return f.dir }

// SegmentPath is the path of segment i.
func (f *Folder) SegmentPath(i int) string {
	return filepath.Join(f.dir, DirSegments, fmt.Sprintf("segment_%05d.mp4", i))
}

// FramePath is the path of PNG frame i.
func (f *Folder) FramePath(i int) string {
	return filepath.Join(f.dir, DirFrames, fmt.Sprintf("frame_%06d.png", i))
}

// VideoPath is the joined video's path.
func (f *Folder) VideoPath() string { return filepath.Join(f.dir, FileVideo) }

// Truncate cuts a resumed video back to where it continues: in mp4 mode
// it keeps segments 0..segments−1 and removes later and partial segments;
// in PNG mode it keeps frames 0..frames−1 and removes later ones. The kept
// segments or frames must all exist. The joined video is removed in both.
func (f *Folder) Truncate(segments, frames int) error {
	os.Remove(f.VideoPath())
	if !f.MP4() {
		for i := 0; i < frames; i++ {
			if _, err := os.Stat(f.FramePath(i)); err != nil {
				return fmt.Errorf("video: frame %d of the %d kept: %w", i, frames, err)
			}
		}
		ents, _ := os.ReadDir(filepath.Join(f.dir, DirFrames))
		for _, e := range ents {
			if i, ok := index(e.Name(), "frame_%06d.png"); !ok || i >= frames {
				if strings.HasPrefix(e.Name(), "frame_") {
					os.Remove(filepath.Join(f.dir, DirFrames, e.Name()))
				}
			}
		}
		return nil
	}
	f.done = f.done[:0]
	for i := 0; i < segments; i++ {
		if _, err := os.Stat(f.SegmentPath(i)); err != nil {
			return fmt.Errorf("video: segment %d of the %d kept: %w", i, segments, err)
		}
		f.done = append(f.done, true)
	}
	ents, _ := os.ReadDir(filepath.Join(f.dir, DirSegments))
	for _, e := range ents {
		if i, ok := index(e.Name(), "segment_%05d.mp4"); !ok || i >= segments {
			if strings.HasPrefix(e.Name(), "segment_") {
				os.Remove(filepath.Join(f.dir, DirSegments, e.Name()))
			}
		}
	}
	if segments == 0 {
		os.Remove(filepath.Join(f.dir, DirSegments, FileList))
		return nil
	}
	return f.writeList()
}

// index parses name as format (one %0Nd verb), exactly.
func index(name, format string) (int, bool) {
	var i int
	if _, err := fmt.Sscanf(name, format, &i); err != nil || i < 0 || fmt.Sprintf(format, i) != name {
		return 0, false
	}
	return i, true
}

// Segments returns the number of finished segments (mp4 mode).
func (f *Folder) Segments() int { return len(f.done) }

// Segment is one segment being written: its frames go to ffmpeg's stdin
// (or to PNG files) as they arrive.
type Segment struct {
	f          *Folder
	index      int
	next       int // global index of the next frame (PNG names)
	frames     int
	w, h       int
	path, tmp  string
	cmd        *exec.Cmd
	stdin      io.WriteCloser
	stderr     *tailBuffer
	closed     bool
	pngScratch *image.RGBA
}

// Begin starts segment index (the segments must come in order, 0, 1, …),
// whose first frame is frame firstFrame of the video, for frames of
// width×height pixels (even sizes: yuv420p halves them).
func (f *Folder) Begin(index, firstFrame, width, height int) (*Segment, error) {
	if width <= 0 || height <= 0 || width > MaxSide || height > MaxSide || width%2 != 0 || height%2 != 0 {
		return nil, fmt.Errorf("video: segment %d: frame size %d×%d, want even sides in 2..%d", index, width, height, MaxSide)
	}
	if firstFrame < 0 {
		return nil, fmt.Errorf("video: segment %d: first frame %d", index, firstFrame)
	}
	s := &Segment{f: f, index: index, next: firstFrame, w: width, h: height}
	if !f.MP4() {
		return s, nil
	}
	if index != len(f.done) {
		return nil, fmt.Errorf("video: segment %d begun after %d finished segments, want segment %d", index, len(f.done), len(f.done))
	}
	s.path = f.SegmentPath(index)
	s.tmp = strings.TrimSuffix(s.path, ".mp4") + ".partial.mp4"
	args := []string{"-hide_banner", "-loglevel", "error", "-y",
		"-f", "rawvideo", "-pix_fmt", "rgb24", "-s", fmt.Sprintf("%dx%d", width, height), "-r", strconv.Itoa(FPS), "-i", "pipe:0",
		"-an", "-c:v", "libx264", "-preset", Preset, "-crf", strconv.Itoa(CRF), "-pix_fmt", "yuv420p"}
	args = append(args, metaArgs(f.opt.Tags)...)
	args = append(args, "-f", "mp4", s.tmp)
	s.cmd = exec.Command(f.opt.FFmpeg, args...)
	s.stderr = &tailBuffer{max: 4096}
	s.cmd.Stderr = s.stderr
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("video: segment %d: %w", index, err)
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("video: segment %d: starting %s: %w", index, f.opt.FFmpeg, err)
	}
	return s, nil
}

// metaArgs are ffmpeg's output options for the tags.
func metaArgs(tags []Tag) []string {
	a := []string{"-movflags", "+faststart+use_metadata_tags"}
	for _, t := range tags {
		a = append(a, "-metadata", t.Key+"="+t.Value)
	}
	return a
}

// WriteFrame adds one frame: rgb24 bytes [h][w][3].
func (s *Segment) WriteFrame(rgb []byte) error {
	if s.closed {
		return fmt.Errorf("video: segment %d is closed", s.index)
	}
	if len(rgb) != 3*s.w*s.h {
		return fmt.Errorf("video: segment %d frame %d: %d bytes, want 3×%d×%d", s.index, s.frames, len(rgb), s.w, s.h)
	}
	if s.cmd == nil {
		if err := s.writePNG(rgb); err != nil {
			return err
		}
	} else if _, err := s.stdin.Write(rgb); err != nil {
		return fmt.Errorf("video: segment %d frame %d: writing to ffmpeg: %w%s", s.index, s.frames, err, s.stderr.suffix())
	}
	s.frames++
	s.next++
	return nil
}

func (s *Segment) writePNG(rgb []byte) error {
	if s.pngScratch == nil {
		s.pngScratch = image.NewRGBA(image.Rect(0, 0, s.w, s.h))
	}
	pix := s.pngScratch.Pix
	for i := 0; i < s.w*s.h; i++ {
		pix[4*i], pix[4*i+1], pix[4*i+2], pix[4*i+3] = rgb[3*i], rgb[3*i+1], rgb[3*i+2], 255
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, s.pngScratch); err != nil {
		return fmt.Errorf("video: frame %d: %w", s.next, err)
	}
	if err := atomicfile.WriteBytes(s.f.FramePath(s.next), buf.Bytes()); err != nil {
		return fmt.Errorf("video: frame %d: %w", s.next, err)
	}
	return nil
}

// Frames returns the frames written so far.
func (s *Segment) Frames() int { return s.frames }

// Close finishes the segment: ffmpeg completes the mp4, which is then
// renamed into place and listed in segments/list.txt. A segment without
// frames is an error.
func (s *Segment) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.cmd == nil {
		return nil
	}
	if s.frames == 0 {
		s.kill()
		return fmt.Errorf("video: segment %d has no frames", s.index)
	}
	werr := s.stdin.Close()
	if err := s.cmd.Wait(); err != nil || werr != nil {
		os.Remove(s.tmp)
		return fmt.Errorf("video: segment %d: ffmpeg: %w%s", s.index, errors.Join(err, werr), s.stderr.suffix())
	}
	if err := os.Rename(s.tmp, s.path); err != nil {
		return fmt.Errorf("video: segment %d: %w", s.index, err)
	}
	s.f.done = append(s.f.done, true)
	return s.f.writeList()
}

// Abort stops the segment and removes its partial file.
func (s *Segment) Abort() {
	if s.closed {
		return
	}
	s.closed = true
	if s.cmd != nil {
		s.kill()
	}
}

func (s *Segment) kill() {
	s.stdin.Close()
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
	s.cmd.Wait()
	os.Remove(s.tmp)
}

// writeList writes segments/list.txt with the finished segments.
func (f *Folder) writeList() error {
	var sb strings.Builder
	for i := range f.done {
		fmt.Fprintf(&sb, "file '%s'\n", filepath.Base(f.SegmentPath(i)))
	}
	return atomicfile.WriteBytes(filepath.Join(f.dir, DirSegments, FileList), []byte(sb.String()))
}

// Join writes video.mp4: the finished segments concatenated by ffmpeg's
// concat demuxer without re-encoding (-c copy), with the folder's tags.
// It returns the video's path.
func (f *Folder) Join() (string, error) {
	if !f.MP4() {
		return "", ErrNoFFmpeg
	}
	if len(f.done) == 0 {
		return "", errors.New("video: join: no finished segment")
	}
	return f.VideoPath(), f.join(len(f.done), filepath.Join(f.dir, DirSegments, FileList), f.VideoPath())
}

// JoinPrefix writes the file name in the folder from the first n finished
// segments, joined as Join joins them all (without re-encoding, so that
// its decoded frames are exactly the first frames of the whole video). It
// returns the file's path.
func (f *Folder) JoinPrefix(n int, name string) (string, error) {
	if !f.MP4() {
		return "", ErrNoFFmpeg
	}
	if n <= 0 || n > len(f.done) {
		return "", fmt.Errorf("video: join the first %d segments: %d are finished", n, len(f.done))
	}
	if name == "" || name != filepath.Base(name) || !strings.HasSuffix(name, ".mp4") || name == FileVideo {
		return "", fmt.Errorf("video: join: %q is not a plain .mp4 file name other than %s", name, FileVideo)
	}
	var sb strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "file '%s'\n", filepath.Base(f.SegmentPath(i)))
	}
	list := filepath.Join(f.dir, DirSegments, "list_"+strings.TrimSuffix(name, ".mp4")+".txt")
	if err := atomicfile.WriteBytes(list, []byte(sb.String())); err != nil {
		return "", err
	}
	defer os.Remove(list)
	out := filepath.Join(f.dir, name)
	return out, f.join(n, list, out)
}

// join concatenates the n segments of the concat list into out (through a
// partial file renamed into place).
func (f *Folder) join(n int, list, out string) error {
	tmp := strings.TrimSuffix(out, ".mp4") + ".partial.mp4"
	args := []string{"-hide_banner", "-loglevel", "error", "-y", "-f", "concat", "-safe", "0",
		"-i", list, "-map", "0:v", "-c", "copy", "-map_metadata", "-1"}
	args = append(args, metaArgs(f.opt.Tags)...)
	args = append(args, "-f", "mp4", tmp)
	cmd := exec.Command(f.opt.FFmpeg, args...)
	stderr := &tailBuffer{max: 4096}
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("video: join %d segments into %s: ffmpeg: %w%s", n, filepath.Base(out), err, stderr.suffix())
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("video: join: %w", err)
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it (ffmpeg's messages).
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// suffix is ": <ffmpeg's last message>" or "".
func (t *tailBuffer) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := strings.TrimSpace(string(t.b)); m != "" {
		return ": " + m
	}
	return ""
}

// Info describes a video file as ffprobe reports it.
type Info struct {
	Codec, PixFmt string
	Width, Height int
	Frames        int // counted by decoding (-count_frames)
	FrameRate     string
	Tags          map[string]string
}

// Probe runs ffprobe on path.
func Probe(ffprobe, path string) (Info, error) {
	out, err := exec.Command(ffprobe, "-v", "error", "-count_frames", "-select_streams", "v:0",
		"-show_entries", "stream=codec_name,pix_fmt,width,height,nb_read_frames,r_frame_rate:format_tags", "-of", "json", path).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return Info{}, fmt.Errorf("video: ffprobe %s: %w: %s", path, err, bytes.TrimSpace(ee.Stderr))
		}
		return Info{}, fmt.Errorf("video: ffprobe %s: %w", path, err)
	}
	var r struct {
		Streams []struct {
			Codec     string `json:"codec_name"`
			PixFmt    string `json:"pix_fmt"`
			Width     int    `json:"width"`
			Height    int    `json:"height"`
			Frames    string `json:"nb_read_frames"`
			FrameRate string `json:"r_frame_rate"`
		} `json:"streams"`
		Format struct {
			Tags map[string]string `json:"tags"`
		} `json:"format"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return Info{}, fmt.Errorf("video: ffprobe %s: %w", path, err)
	}
	if len(r.Streams) != 1 {
		return Info{}, fmt.Errorf("video: %s has %d video streams, want 1", path, len(r.Streams))
	}
	s := r.Streams[0]
	n, err := strconv.Atoi(s.Frames)
	if err != nil {
		return Info{}, fmt.Errorf("video: ffprobe %s: frame count %q", path, s.Frames)
	}
	return Info{Codec: s.Codec, PixFmt: s.PixFmt, Width: s.Width, Height: s.Height, Frames: n, FrameRate: s.FrameRate, Tags: r.Format.Tags}, nil
}

// ReadFrames decodes a video file to rgb24 frames [F][h][w][3] with
// ffmpeg, for checks and tests.
func ReadFrames(ffmpeg, path string, width, height int) ([]byte, int, error) {
	cmd := exec.Command(ffmpeg, "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-")
	stderr := &tailBuffer{max: 4096}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, 0, fmt.Errorf("video: decode %s: %w%s", path, err, stderr.suffix())
	}
	fb := 3 * width * height
	if fb == 0 || len(out)%fb != 0 {
		return nil, 0, fmt.Errorf("video: decode %s: %d bytes are not whole %d×%d frames", path, len(out), width, height)
	}
	return out, len(out) / fb, nil
}

// ReadPNG reads a PNG frame as rgb24 bytes.
func ReadPNG(path string) ([]byte, int, int, error) {
	fl, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer fl.Close()
	img, err := png.Decode(fl)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("video: %s: %w", path, err)
	}
	b := img.Bounds()
	out := make([]byte, 0, 3*b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			out = append(out, byte(r>>8), byte(g>>8), byte(bl>>8))
		}
	}
	return out, b.Dx(), b.Dy(), nil
}
