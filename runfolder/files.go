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
	FileGeneration   = "generation.json"                    // generate: prompts, seed, policy, backbone, input files (pipeline.Provenance)
	DirText          = "text"                               // generate: the prompts' text embeddings
	FileCheckpoint   = "checkpoint.json"                    // inside DirState
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

// ReadJSON decodes the JSON file at path into v, naming the file on error.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
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
	b, err := os.ReadFile(path)
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
func Prepare(dir string, force bool) error {
	if _, err := os.Stat(filepath.Join(dir, FileConfig)); err == nil {
		checkpointed, logged := Status(dir)
		switch {
		case force:
		case checkpointed:
			return userf("run folder %s already exists; continue it with --resume, overwrite it with --force, or pick another --name", dir)
		case logged:
			return userf("run folder %s already exists with logged blocks but no checkpoint to continue from; overwrite it with --force or pick another --name", dir)
		}
		for _, f := range []string{FileConfig, FileLog, FileSummary, FileProvenance, FileAdmissions, FileStorage, DirPlots, DirState} {
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
	f   *os.File
	w   *bufio.Writer
	off int64
}

// OpenLog opens path for appending after cutting it to size bytes (size <
// 0: to empty); a file shorter than size is an error.
func OpenLog(path string, size int64) (*LogWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
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
	return &LogWriter{f: f, w: bufio.NewWriterSize(f, 1<<16), off: size}, nil
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
	return j.off, j.f.Sync()
}

// Close syncs and closes the file.
func (j *LogWriter) Close() error {
	_, err := j.Sync()
	return errors.Join(err, j.f.Close())
}

// ReadLog reads memory_log.jsonl, naming the line of a decoding error.
func ReadLog(path string) ([]LogLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<28)
	var out []LogLine
	for n := 1; sc.Scan(); n++ {
		var ln LogLine
		if err := json.Unmarshal(sc.Bytes(), &ln); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		out = append(out, ln)
	}
	return out, sc.Err()
}
