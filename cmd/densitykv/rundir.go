package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"io"
	"os"
)

// Files of a run folder <out>/<name>/.
const (
	fileConfig      = "config.resolved.yaml" // every default filled in
	fileLog         = "memory_log.jsonl"     // one line per block, policy and layer
	fileSummary     = "summary.json"         // totals per policy
	fileProvenance  = "provenance.csv"       // the final DensityKV banks, one row per state
	fileAdmissions  = "admissions.json"      // admission aggregates behind the montage
	fileStorageRun  = "storage.json"         // live bytes per policy after every block
	dirPlots        = "plots"                // PNG and SVG figures
	dirState        = "state"                // resume checkpoint
	fileCheckpoint  = "checkpoint.json"      // inside dirState
	fileProvenanceH = "policy,layer,head,slot,source,source_frame,token_row,token_col,admitted_update,admitted_block,density,baseline"
)

// writeFileAtomic writes data to path atomically (package atomicfile).
func writeFileAtomic(path string, data []byte) error { return atomicfile.WriteBytes(path, data) }

// writeJSONAtomic writes v as indented JSON to path atomically.
func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// readJSON decodes the JSON file at path into v, naming the file on error.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// jsonlWriter appends JSON lines to a file and can report how many bytes
// are durably written (for resume: the log is truncated back to the size
// recorded with the last checkpoint).
type jsonlWriter struct {
	f   *os.File
	w   *bufio.Writer
	off int64
}

// openLog opens path for appending after truncating it to size bytes
// (size < 0: truncate to empty).
func openLog(path string, size int64) (*jsonlWriter, error) {
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
	return &jsonlWriter{f: f, w: bufio.NewWriterSize(f, 1<<16), off: size}, nil
}

func (j *jsonlWriter) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	n, err := j.w.Write(b)
	j.off += int64(n)
	return err
}

// sync flushes and fsyncs, returning the durable size.
func (j *jsonlWriter) sync() (int64, error) {
	if err := j.w.Flush(); err != nil {
		return 0, err
	}
	return j.off, j.f.Sync()
}

func (j *jsonlWriter) close() error {
	_, err := j.sync()
	return errors.Join(err, j.f.Close())
}
