package video

import (
	"bufio"
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

// The authors' encode settings: DefaultFPS frames per second (frame i at
// i/DefaultFPS s), x264's constant rate factor DefaultCRF, Preset.
const (
	DefaultFPS = 16
	DefaultCRF = 18
	Preset     = "medium"
)

// MaxFPS bounds the frame rate; MaxCRF is x264's largest constant rate
// factor (0 is the best quality, 51 the worst).
const (
	MaxFPS = 240
	MaxCRF = 51
)

// Names inside a video folder.
const (
	DirSegments = "segments"
	DirFrames   = "frames"
	DirLossless = "lossless" // the default Options.Lossless, inside the folder
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
	// Tags are written into every segment and every encoded video.
	Tags []Tag
	// FPS is the frame rate (1..MaxFPS: frame i is at i/FPS s) and CRF
	// x264's constant rate factor (0..MaxCRF) of the segments and the
	// encoded videos; DefaultFPS and DefaultCRF are the authors'.
	FPS, CRF int
	// Lossless is the folder of the segments' lossless copies (default:
	// DirLossless inside the folder).
	Lossless string
}

// CheckEncoding checks a frame rate and constant rate factor.
func CheckEncoding(fps, crf int) error {
	if fps < 1 || fps > MaxFPS {
		return fmt.Errorf("video: %d frames per second, want 1..%d", fps, MaxFPS)
	}
	if crf < 0 || crf > MaxCRF {
		return fmt.Errorf("video: crf %d, want 0..%d", crf, MaxCRF)
	}
	return nil
}

// Folder is one video being written into a folder, segment by segment.
// Its methods must not be called concurrently.
type Folder struct {
	dir      string
	lossless string
	opt      Options
	done     int // finished segments (mp4 mode)
	// ends[i] is the number of frames in segments 0..i, −1 where unknown
	// (segments kept by Truncate, but the last).
	ends []int
}

// Open prepares dir (created if needed) for a video. Existing segments,
// lossless copies and frames are kept: Truncate cuts a resumed video back
// to where it continues.
func Open(dir string, o Options) (*Folder, error) {
	for _, t := range o.Tags {
		if t.Key == "" || strings.ContainsAny(t.Key, "= \t\n") {
			return nil, fmt.Errorf("video: metadata key %q must be a non-empty word", t.Key)
		}
	}
	if err := CheckEncoding(o.FPS, o.CRF); err != nil {
		return nil, err
	}
	f := &Folder{dir: dir, lossless: o.Lossless, opt: o}
	if f.lossless == "" {
		f.lossless = filepath.Join(dir, DirLossless)
	}
	subs := []string{filepath.Join(dir, DirFrames)}
	if o.FFmpeg != "" {
		subs = []string{filepath.Join(dir, DirSegments), f.lossless}
	}
	for _, s := range subs {
		if err := os.MkdirAll(s, 0o755); err != nil {
			return nil, fmt.Errorf("video: %w", err)
		}
	}
	return f, nil
}

// MP4 reports whether the folder gets mp4 segments (ffmpeg) rather than
// PNG frames.
func (f *Folder) MP4() bool { return f.opt.FFmpeg != "" }

// Dir is the folder.
func (f *Folder) Dir() string { return f.dir }

// FPS is the frame rate of the folder's videos.
func (f *Folder) FPS() int { return f.opt.FPS }

// SegmentPath is the path of segment i.
func (f *Folder) SegmentPath(i int) string {
	return filepath.Join(f.dir, DirSegments, fmt.Sprintf("segment_%05d.mp4", i))
}

// LosslessPath is the path of segment i's lossless copy.
func (f *Folder) LosslessPath(i int) string {
	return filepath.Join(f.lossless, fmt.Sprintf("segment_%05d.mkv", i))
}

// LosslessDir is the folder of the lossless copies.
func (f *Folder) LosslessDir() string { return f.lossless }

// HasLossless reports whether segment i's lossless copy exists.
func (f *Folder) HasLossless(i int) bool {
	st, err := os.Stat(f.LosslessPath(i))
	return err == nil && st.Mode().IsRegular()
}

// RemoveLossless removes the lossless copies (once the videos are encoded
// for good); Encode cannot run again afterwards.
func (f *Folder) RemoveLossless() error {
	if err := os.RemoveAll(f.lossless); err != nil {
		return fmt.Errorf("video: %w", err)
	}
	return nil
}

// FramePath is the path of PNG frame i.
func (f *Folder) FramePath(i int) string {
	return filepath.Join(f.dir, DirFrames, fmt.Sprintf("frame_%06d.png", i))
}

// VideoPath is the whole video's path.
func (f *Folder) VideoPath() string { return filepath.Join(f.dir, FileVideo) }

// Truncate cuts a resumed video back to where it continues: in mp4 mode
// it keeps segments 0..segments−1 (frames frames), which must all exist,
// and those of their lossless copies that exist (HasLossless;
// BeginLossless makes a missing one again), and removes later and partial
// ones; in PNG mode it keeps frames 0..frames−1, which must exist, and
// removes later ones. The whole video is removed in both.
func (f *Folder) Truncate(segments, frames int) error {
	os.Remove(f.VideoPath())
	if !f.MP4() {
		for i := 0; i < frames; i++ {
			if _, err := os.Stat(f.FramePath(i)); err != nil {
				return fmt.Errorf("video: frame %d of the %d kept: %w", i, frames, err)
			}
		}
		removeAfter(filepath.Join(f.dir, DirFrames), "frame_", "frame_%06d.png", frames)
		return nil
	}
	f.done, f.ends = 0, nil
	for i := 0; i < segments; i++ {
		if _, err := os.Stat(f.SegmentPath(i)); err != nil {
			return fmt.Errorf("video: segment %d of the %d kept: %w", i, segments, err)
		}
		f.ends = append(f.ends, -1)
	}
	if segments > 0 {
		f.ends[segments-1] = frames
	}
	f.done = segments
	removeAfter(filepath.Join(f.dir, DirSegments), "segment_", "segment_%05d.mp4", segments)
	removeAfter(f.lossless, "segment_", "segment_%05d.mkv", segments)
	if segments == 0 {
		os.Remove(filepath.Join(f.dir, DirSegments, FileList))
		return nil
	}
	return f.writeList()
}

// removeAfter removes the files of dir named prefix… that are not
// format's names of indices below keep.
func removeAfter(dir, prefix, format string, keep int) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if i, ok := index(e.Name(), format); (!ok || i >= keep) && strings.HasPrefix(e.Name(), prefix) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
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
func (f *Folder) Segments() int { return f.done }

// inputArgs are ffmpeg's arguments up to its input: rgb24 frames of w×h
// on stdin at the folder's frame rate (frame i at i/FPS s).
func (f *Folder) inputArgs(w, h int) []string {
	return []string{"-hide_banner", "-loglevel", "error", "-y",
		"-f", "rawvideo", "-pix_fmt", "rgb24", "-s", fmt.Sprintf("%dx%d", w, h), "-r", strconv.Itoa(f.opt.FPS), "-i", "pipe:0"}
}

// x264Args are the output arguments of an mp4 (a segment or a whole
// video): the authors' libx264 encode with the folder's crf and tags.
func (f *Folder) x264Args(path string) []string {
	a := []string{"-map", "0:v", "-an", "-c:v", "libx264", "-preset", Preset, "-crf", strconv.Itoa(f.opt.CRF), "-pix_fmt", "yuv420p"}
	a = append(a, metaArgs(f.opt.Tags)...)
	return append(a, "-f", "mp4", path)
}

// losslessArgs are the output arguments of a lossless copy: FFV1 (version
// 3, every frame a keyframe, slice CRCs) of the frames in bgr0, the rgb24
// bytes reordered, in Matroska.
func losslessArgs(path string) []string {
	return []string{"-map", "0:v", "-c:v", "ffv1", "-level", "3", "-g", "1", "-slicecrc", "1", "-pix_fmt", "bgr0", "-f", "matroska", path}
}

// metaArgs are ffmpeg's output options for the tags.
func metaArgs(tags []Tag) []string {
	a := []string{"-movflags", "+faststart+use_metadata_tags"}
	for _, t := range tags {
		a = append(a, "-metadata", t.Key+"="+t.Value)
	}
	return a
}

// proc is an ffmpeg reading frames on its stdin, writing files through
// temporary names renamed into place when it succeeds.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	tmps   []string // temporary files, renamed to paths
	paths  []string
}

// start runs ffmpeg with args, whose outputs are tmps.
func start(ffmpeg string, args, tmps, paths []string) (*proc, error) {
	p := &proc{cmd: exec.Command(ffmpeg, args...), stderr: &tailBuffer{max: 4096}, tmps: tmps, paths: paths}
	p.cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", ffmpeg, err)
	}
	return p, nil
}

func (p *proc) write(b []byte) error {
	if _, err := p.stdin.Write(b); err != nil {
		return fmt.Errorf("writing to ffmpeg: %w%s", err, p.stderr.suffix())
	}
	return nil
}

// finish closes ffmpeg's input, waits for it and renames its outputs into
// place (in order); on failure it removes them.
func (p *proc) finish() error {
	werr := p.stdin.Close()
	if err := p.cmd.Wait(); err != nil || werr != nil {
		p.remove()
		return fmt.Errorf("ffmpeg: %w%s", errors.Join(err, werr), p.stderr.suffix())
	}
	for i, t := range p.tmps {
		if err := os.Rename(t, p.paths[i]); err != nil {
			p.remove()
			return err
		}
	}
	return nil
}

// kill stops ffmpeg and removes its outputs.
func (p *proc) kill() {
	p.stdin.Close()
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
	p.cmd.Wait()
	p.remove()
}

func (p *proc) remove() {
	for _, t := range p.tmps {
		os.Remove(t)
	}
}

// partial is the temporary name of path while it is written.
func partial(path string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + ".partial" + ext
}

// Segment is one segment being written: its frames go to ffmpeg's stdin
// (or to PNG files) as they arrive.
type Segment struct {
	f          *Folder
	index      int
	first      int // global index of the first frame
	next       int // global index of the next frame (PNG names)
	frames     int
	w, h       int
	p          *proc
	lossless   bool // only the lossless copy (BeginLossless)
	closed     bool
	pngScratch *image.RGBA
}

// Begin starts segment index (the segments must come in order, 0, 1, …),
// whose first frame is frame firstFrame of the video, for frames of
// width×height pixels (even sizes: yuv420p halves them). In mp4 mode one
// ffmpeg writes both the segment (x264, playable as soon as it is closed)
// and its lossless copy, from which Encode makes the whole video.
func (f *Folder) Begin(index, firstFrame, width, height int) (*Segment, error) {
	if err := checkSize(index, width, height); err != nil {
		return nil, err
	}
	if firstFrame < 0 {
		return nil, fmt.Errorf("video: segment %d: first frame %d", index, firstFrame)
	}
	s := &Segment{f: f, index: index, first: firstFrame, next: firstFrame, w: width, h: height}
	if !f.MP4() {
		return s, nil
	}
	if index != f.done {
		return nil, fmt.Errorf("video: segment %d begun after %d finished segments, want segment %d", index, f.done, f.done)
	}
	seg, loss := f.SegmentPath(index), f.LosslessPath(index)
	args := append(f.inputArgs(width, height), f.x264Args(partial(seg))...)
	args = append(args, losslessArgs(partial(loss))...)
	var err error
	if s.p, err = start(f.opt.FFmpeg, args, []string{partial(loss), partial(seg)}, []string{loss, seg}); err != nil {
		return nil, fmt.Errorf("video: segment %d: %w", index, err)
	}
	return s, nil
}

// BeginLossless starts writing the lossless copy of finished segment
// index again (mp4 mode), from the segment's frames: a resumed video whose
// copy is missing or damaged decodes them again.
func (f *Folder) BeginLossless(index, width, height int) (*Segment, error) {
	if err := checkSize(index, width, height); err != nil {
		return nil, err
	}
	if !f.MP4() {
		return nil, ErrNoFFmpeg
	}
	if index < 0 || index >= f.done {
		return nil, fmt.Errorf("video: lossless copy of segment %d: %d segments are finished", index, f.done)
	}
	s := &Segment{f: f, index: index, w: width, h: height, lossless: true}
	loss := f.LosslessPath(index)
	var err error
	if s.p, err = start(f.opt.FFmpeg, append(f.inputArgs(width, height), losslessArgs(partial(loss))...), []string{partial(loss)}, []string{loss}); err != nil {
		return nil, fmt.Errorf("video: lossless copy of segment %d: %w", index, err)
	}
	return s, nil
}

func checkSize(index, width, height int) error {
	if width <= 0 || height <= 0 || width > MaxSide || height > MaxSide || width%2 != 0 || height%2 != 0 {
		return fmt.Errorf("video: segment %d: frame size %d×%d, want even sides in 2..%d", index, width, height, MaxSide)
	}
	return nil
}

// WriteFrame adds one frame: rgb24 bytes [h][w][3].
func (s *Segment) WriteFrame(rgb []byte) error {
	if s.closed {
		return fmt.Errorf("video: segment %d is closed", s.index)
	}
	if len(rgb) != 3*s.w*s.h {
		return fmt.Errorf("video: segment %d frame %d: %d bytes, want 3×%d×%d", s.index, s.frames, len(rgb), s.w, s.h)
	}
	if s.p == nil {
		if err := s.writePNG(rgb); err != nil {
			return err
		}
	} else if err := s.p.write(rgb); err != nil {
		return fmt.Errorf("video: segment %d frame %d: %w", s.index, s.frames, err)
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

// Close finishes the segment: ffmpeg completes the mp4 and the lossless
// copy, which are then renamed into place (the copy first) and the
// segment listed in segments/list.txt. A segment without frames is an
// error.
func (s *Segment) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.p == nil {
		return nil
	}
	what := fmt.Sprintf("segment %d", s.index)
	if s.lossless {
		what = "lossless copy of " + what
	}
	if s.frames == 0 {
		s.p.kill()
		return fmt.Errorf("video: %s has no frames", what)
	}
	if err := s.p.finish(); err != nil {
		return fmt.Errorf("video: %s: %w", what, err)
	}
	if s.lossless {
		return nil
	}
	s.f.done++
	s.f.ends = append(s.f.ends, s.first+s.frames)
	return s.f.writeList()
}

// Abort stops the segment and removes its partial files.
func (s *Segment) Abort() {
	if s.closed {
		return
	}
	s.closed = true
	if s.p != nil {
		s.p.kill()
	}
}

// writeList writes segments/list.txt with the finished segments.
func (f *Folder) writeList() error {
	var sb strings.Builder
	for i := 0; i < f.done; i++ {
		fmt.Fprintf(&sb, "file '%s'\n", filepath.Base(f.SegmentPath(i)))
	}
	return atomicfile.WriteBytes(filepath.Join(f.dir, DirSegments, FileList), []byte(sb.String()))
}

// Video writes video.mp4 from every finished segment (Encode) and returns
// its path and frame count.
func (f *Folder) Video() (string, int, error) {
	if !f.MP4() {
		return "", 0, ErrNoFFmpeg
	}
	return f.Encode(f.done, FileVideo)
}

// Encode writes the file name in the folder (a plain .mp4 name) from the
// first n finished segments' lossless copies as one continuous encode: the
// frames decoded from the copies, in order, piped as rgb24 into one
// libx264 encode with the segments' settings and the folder's tags (the
// authors' command), so that its timestamps are exactly i/FPS and x264
// places its keyframes as it would in one pass over the frames. It returns
// the file's path and its number of frames, which must be the segments'
// where the folder knows it (segments finished since Open, and the frames
// Truncate kept).
func (f *Folder) Encode(n int, name string) (string, int, error) {
	if !f.MP4() {
		return "", 0, ErrNoFFmpeg
	}
	if n <= 0 || n > f.done {
		return "", 0, fmt.Errorf("video: encode the first %d segments: %d are finished", n, f.done)
	}
	if name == "" || name != filepath.Base(name) || !strings.HasSuffix(name, ".mp4") || strings.HasSuffix(name, ".partial.mp4") {
		return "", 0, fmt.Errorf("video: encode: %q is not a plain .mp4 file name", name)
	}
	for i := 0; i < n; i++ {
		if !f.HasLossless(i) {
			return "", 0, fmt.Errorf("video: encode %s: the lossless copy of segment %d (%s) is missing", name, i, f.LosslessPath(i))
		}
	}
	out := filepath.Join(f.dir, name)
	var enc *proc
	w, h, frames := 0, 0, 0
	fail := func(err error) (string, int, error) {
		if enc != nil {
			enc.kill()
		}
		return "", 0, fmt.Errorf("video: encode %s: %w", name, err)
	}
	for i := 0; i < n; i++ {
		k, err := f.readLossless(i, func(fw, fh int) error {
			if enc == nil {
				w, h = fw, fh
				args := append(f.inputArgs(w, h), f.x264Args(partial(out))...)
				var err error
				enc, err = start(f.opt.FFmpeg, args, []string{partial(out)}, []string{out})
				return err
			}
			if fw != w || fh != h {
				return fmt.Errorf("frame of %d×%d after frames of %d×%d", fw, fh, w, h)
			}
			return nil
		}, func(rgb []byte) error { return enc.write(rgb) })
		if err == nil && k == 0 {
			err = errors.New("no frame")
		}
		if err != nil {
			return fail(fmt.Errorf("segment %d's lossless copy %s: %w", i, f.LosslessPath(i), err))
		}
		frames += k
	}
	if want := f.ends[n-1]; want >= 0 && frames != want {
		return fail(fmt.Errorf("the lossless copies of %d segments hold %d frames, the segments %d", n, frames, want))
	}
	if err := enc.finish(); err != nil {
		return "", 0, fmt.Errorf("video: encode %s: %w", name, err)
	}
	return out, frames, nil
}

// readLossless decodes segment i's lossless copy to rgb24 frames (PPM
// images piped out of ffmpeg, which carry their size): size is called with
// each frame's size, then frame with its bytes. It returns the number of
// frames.
func (f *Folder) readLossless(i int, size func(w, h int) error, frame func(rgb []byte) error) (int, error) {
	cmd := exec.Command(f.opt.FFmpeg, "-hide_banner", "-loglevel", "error", "-i", f.LosslessPath(i),
		"-map", "0:v:0", "-vsync", "passthrough", "-f", "image2pipe", "-c:v", "ppm", "-pix_fmt", "rgb24", "pipe:1")
	stderr := &tailBuffer{max: 4096}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", f.opt.FFmpeg, err)
	}
	r := bufio.NewReaderSize(stdout, 1<<20)
	var buf []byte
	n := 0
	for {
		w, h, err := readPPMHeader(r)
		if err == io.EOF {
			break
		}
		if err == nil {
			if len(buf) != 3*w*h {
				buf = make([]byte, 3*w*h)
			}
			if _, err = io.ReadFull(r, buf); err != nil {
				err = fmt.Errorf("frame %d: %w", n, err)
			}
		}
		if err == nil {
			err = size(w, h)
		}
		if err == nil {
			err = frame(buf)
		}
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return n, fmt.Errorf("%w%s", err, stderr.suffix())
		}
		n++
	}
	if err := cmd.Wait(); err != nil {
		return n, fmt.Errorf("ffmpeg: %w%s", err, stderr.suffix())
	}
	return n, nil
}

// readPPMHeader reads a binary PPM header ("P6 W H 255" and one
// whitespace byte), as ffmpeg writes it; io.EOF before its first byte.
func readPPMHeader(r *bufio.Reader) (w, h int, err error) {
	if _, err := r.Peek(1); err == io.EOF {
		return 0, 0, io.EOF
	}
	var fields [4]string
	for k := range fields {
		for {
			c, err := r.ReadByte()
			if err != nil {
				return 0, 0, fmt.Errorf("PPM header: %w", err)
			}
			if c == ' ' || c == '\n' || c == '\r' || c == '\t' {
				if fields[k] != "" {
					break
				}
				continue
			}
			if len(fields[k]) > 8 {
				return 0, 0, fmt.Errorf("PPM header: field %q… too long", fields[k])
			}
			fields[k] += string(c)
		}
	}
	w, werr := strconv.Atoi(fields[1])
	h, herr := strconv.Atoi(fields[2])
	if fields[0] != "P6" || fields[3] != "255" || werr != nil || herr != nil || w <= 0 || h <= 0 || w > MaxSide || h > MaxSide {
		return 0, 0, fmt.Errorf("PPM header %q: want P6 W H 255 with sides in 1..%d", strings.Join(fields[:], " "), MaxSide)
	}
	return w, h, nil
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
	// KeyFrames are the keyframes, counted by decoding them alone
	// (-skip_frame nokey).
	KeyFrames int
	// FrameRate and AvgFrameRate are the stream's r_frame_rate and
	// avg_frame_rate ("16/1"), Duration its duration in seconds as ffprobe
	// prints it ("2.812500"), NbFrames the container's frame count.
	FrameRate, AvgFrameRate, Duration string
	NbFrames                          int
	Tags                              map[string]string
}

// Probe runs ffprobe on path.
func Probe(ffprobe, path string) (Info, error) {
	var r struct {
		Streams []struct {
			Codec        string `json:"codec_name"`
			PixFmt       string `json:"pix_fmt"`
			Width        int    `json:"width"`
			Height       int    `json:"height"`
			Frames       string `json:"nb_read_frames"`
			NbFrames     string `json:"nb_frames"`
			FrameRate    string `json:"r_frame_rate"`
			AvgFrameRate string `json:"avg_frame_rate"`
			Duration     string `json:"duration"`
		} `json:"streams"`
		Format struct {
			Tags map[string]string `json:"tags"`
		} `json:"format"`
	}
	entries := "stream=codec_name,pix_fmt,width,height,nb_read_frames,nb_frames,r_frame_rate,avg_frame_rate,duration:format_tags"
	if err := probe(ffprobe, path, &r, "-count_frames", "-show_entries", entries); err != nil {
		return Info{}, err
	}
	if len(r.Streams) != 1 {
		return Info{}, fmt.Errorf("video: %s has %d video streams, want 1", path, len(r.Streams))
	}
	s := r.Streams[0]
	var keys struct {
		Streams []struct {
			Frames string `json:"nb_read_frames"`
		} `json:"streams"`
	}
	if err := probe(ffprobe, path, &keys, "-skip_frame", "nokey", "-count_frames", "-show_entries", "stream=nb_read_frames"); err != nil {
		return Info{}, err
	}
	if len(keys.Streams) != 1 {
		return Info{}, fmt.Errorf("video: %s has %d video streams, want 1", path, len(keys.Streams))
	}
	info := Info{Codec: s.Codec, PixFmt: s.PixFmt, Width: s.Width, Height: s.Height, FrameRate: s.FrameRate, AvgFrameRate: s.AvgFrameRate,
		Duration: s.Duration, Tags: r.Format.Tags}
	for _, c := range []struct {
		dst *int
		v   string
	}{{&info.Frames, s.Frames}, {&info.NbFrames, s.NbFrames}, {&info.KeyFrames, keys.Streams[0].Frames}} {
		n, err := strconv.Atoi(c.v)
		if err != nil {
			return Info{}, fmt.Errorf("video: ffprobe %s: frame count %q", path, c.v)
		}
		*c.dst = n
	}
	return info, nil
}

// probe runs ffprobe on the first video stream of path with args and
// decodes its JSON into v.
func probe(ffprobe, path string, v any, args ...string) error {
	args = append(append([]string{"-v", "error", "-select_streams", "v:0"}, args...), "-of", "json", path)
	out, err := exec.Command(ffprobe, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("video: ffprobe %s: %w: %s", path, err, bytes.TrimSpace(ee.Stderr))
		}
		return fmt.Errorf("video: ffprobe %s: %w", path, err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("video: ffprobe %s: %w", path, err)
	}
	return nil
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
