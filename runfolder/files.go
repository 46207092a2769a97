package runfolder

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/internal/limitread"
)

// Files of a run folder <out>/<name>/.
const (
	FileConfig       = "config.resolved.yaml"               // every default filled in
	FileLog          = "memory_log.jsonl"                   // one line per block, policy and layer
	FileSummary      = "summary.json"                       // totals per policy
	FileProvenance   = "provenance.csv"                     // the final DensityKV banks, one row per state
	FileAdmissions   = "admissions.json"                    // admission aggregates behind the montage
	FileStorage      = "storage.json"                       // live bytes per policy after every block
	FileTrace        = "attention_trace.json"               // generate: attention mass by query and source frame
	FileTraceLayers  = "attention_trace_layers.safetensors" // generate: the same per layer and head
	DirPlots         = "plots"                              // PNG and SVG figures
	DirState         = "state"                              // resume checkpoint
	DirPreview       = "latent_preview"                     // generate: latent preview frames (latent_preview.mp4 beside)
	FilePreviewVideo = "latent_preview.mp4"                 // generate: the latent preview frames as a video (ffmpeg)
	FileGeneration   = "generation.json"                    // generate: prompts, seed, policy, backbone, input files (generate.Provenance)
	DirText          = "text"                               // generate: the prompts' text embeddings
	FileCheckpoint   = "checkpoint.json"                    // inside DirState
	DirVideoState    = "video"                              // inside DirState: the video segments' lossless copies (generate), until the run is complete
	DirDecodeState   = "decode-video"                       // inside DirState: decode's lossless copies, while it runs
	ProvenanceHeader = "policy,layer,head,slot,source,source_frame,token_row,token_col,admitted_update,admitted_block,density,baseline"
)

// ErrInterrupted is returned by a run stopped through its context after it
// has left its run folder consistent (a checkpoint to resume from).
var ErrInterrupted = errors.New("interrupted")

// UserError marks an error in what was asked of a run (a run folder that
// cannot be resumed or overwritten, an input that cannot be used) rather
// than a failure while running; the command reports it as a usage error.
type UserError struct{ Err error }

func (e *UserError) Error() string { return e.Err.Error() }
func (e *UserError) Unwrap() error { return e.Err }

func userf(format string, a ...any) error { return &UserError{fmt.Errorf(format, a...)} }

// WriteFile writes data to path atomically (package atomicfile).
func WriteFile(path string, data []byte) error { return atomicfile.WriteBytes(path, data) }

// WriteJSON writes v as indented JSON to path atomically.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return WriteFile(path, append(b, '\n'))
}

// ReadRecord reads one of a run folder's records (at most MaxRecordFile
// bytes).
func ReadRecord(path string) ([]byte, error) {
	return limitread.File(path, MaxRecordFile, "run folder records")
}

// ReadJSON decodes the JSON file at path into v, naming the file on error.
func ReadJSON(path string, v any) error {
	b, err := ReadRecord(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// LoadConfig reads a run folder's config.resolved.yaml (older layout keys
// too, unknown keys ignored) into v: a config.Config, or the
// config.GenerateConfig of a generate run.
func LoadConfig(dir string, v any) error {
	path := filepath.Join(dir, FileConfig)
	b, err := ReadRecord(path)
	if err != nil {
		return fmt.Errorf("run folder %s: %w", dir, err)
	}
	if _, err := config.Decode(b, v, false); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Status reports whether a run folder has a checkpoint to continue from
// and whether its memory log holds any block.
func Status(dir string) (checkpointed, logged bool) {
	_, err := os.Stat(filepath.Join(dir, DirState, FileCheckpoint))
	st, lerr := os.Stat(filepath.Join(dir, FileLog))
	return err == nil, lerr == nil && st.Size() > 0
}

// Prepare creates dir for a new run. An existing run folder is refused
// (a UserError) unless force is set (then the run's own files are removed
// first), or unless it holds nothing: no checkpoint and no logged block (a
// run that failed or stopped before its first block), which is reused.
//
// Commands call Claim, which also checks which command the folder belongs
// to.
func Prepare(dir string, force bool) error { return prepare(dir, force) }

func prepare(dir string, force bool) error {
	if err := atomicfile.CleanTemps(dir); err != nil {
		return fmt.Errorf("run folder: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileConfig)); err == nil {
		checkpointed, logged := Status(dir)
		switch {
		case force:
		case checkpointed:
			return userf("run folder %s already exists; continue it with --resume, overwrite it with --force, or pick another --name", dir)
		case logged:
			return userf("run folder %s already exists with logged blocks but no checkpoint to continue from; overwrite it with --force or pick another --name", dir)
		}
		for _, f := range RunFiles {
			if err := os.RemoveAll(filepath.Join(dir, f)); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("run folder: %w", err)
	}
	return nil
}

// LogWriter appends JSON lines to a file and can report how many bytes are
// durably written (for resume: the log is cut back to the size recorded
// with the last checkpoint).
type LogWriter struct {
	f      atomicfile.File
	w      *bufio.Writer
	off    int64
	synced int64 // the size at the last Sync
}

// OpenLog opens path for appending after cutting it to size bytes (size <
// 0: to empty); a file shorter than size is an error.
func OpenLog(path string, size int64) (*LogWriter, error) {
	f, err := atomicfile.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if size < 0 {
		size = 0
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.Size() < size {
		f.Close()
		return nil, fmt.Errorf("%s has %d bytes, fewer than the %d the checkpoint recorded", path, st.Size(), size)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(size, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return &LogWriter{f: f, w: bufio.NewWriterSize(f, 1<<16), off: size, synced: -1}, nil
}

// Write appends v as one JSON line.
func (j *LogWriter) Write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	n, err := j.w.Write(b)
	j.off += int64(n)
	return err
}

// Sync flushes and fsyncs, returning the durable size.
func (j *LogWriter) Sync() (int64, error) {
	if err := j.w.Flush(); err != nil {
		return 0, err
	}
	if err := j.f.Sync(); err != nil {
		return 0, err
	}
	j.synced = j.off
	return j.off, nil
}

// Close syncs (unless nothing was written since the last Sync) and closes
// the file.
func (j *LogWriter) Close() error {
	var err error
	if j.synced != j.off {
		_, err = j.Sync()
	}
	return errors.Join(err, j.f.Close())
}

// ErrTornLine is wrapped by the error of a log (memory_log.jsonl, the
// lineage) whose last line has no end: the write of a run that failed or
// was killed. The lines before it are complete.
var ErrTornLine = errors.New("the last line is torn (a write that did not finish: the run failed or was killed while logging)")

// ReadLog reads memory_log.jsonl, naming the line of a decoding error. A
// torn last line (no newline: a write that did not finish) is not
// decoded: ReadLog returns the complete lines before it with an error
// wrapping ErrTornLine.
func ReadLog(path string) ([]LogLine, error) {
	var out []LogLine
	err := readLines(path, func(n int, b []byte) error {
		var ln LogLine
		if err := json.Unmarshal(b, &ln); err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
		out = append(out, ln)
		return nil
	})
	return out, err
}

// readLines calls fn with every complete line of the file at path
// (numbered from 1); a last line without a newline is reported as
// ErrTornLine after the others.
func readLines(path string, fn func(n int, line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for n := 1; ; n++ {
		b, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: collect it.
			buf := append([]byte(nil), b...)
			for err == bufio.ErrBufferFull {
				if len(buf) > 1<<28 {
					return fmt.Errorf("%s line %d: longer than %d bytes", path, n, 1<<28)
				}
				b, err = r.ReadSlice('\n')
				buf = append(buf, b...)
			}
			b = buf
		}
		switch {
		case err == io.EOF && len(b) == 0:
			return nil
		case err == io.EOF:
			return fmt.Errorf("%s line %d: %w", path, n, ErrTornLine)
		case err != nil:
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := fn(n, b[:len(b)-1]); err != nil {
			return err
		}
	}
}
