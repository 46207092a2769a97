package generate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"reflect"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/record"
)

// streamRecord is the --record-stream file: a synth stream of the clean
// passes, written through a counter so that a checkpoint can note (and
// resume cut back to) its size after a block.
type streamRecord struct {
	f    atomicfile.File
	cw   *hashWriter // counts the file's bytes
	sw   *record.Writer
	done bool
}

// recordHeader is the --record-stream file's header: the policy's layout
// and the run's attention budget (which simulate and eval replay with).
func recordHeader(pol memory.Policy, mem memory.Config, g config.GenerateSection) (record.Header, error) {
	r, err := mem.Resolve()
	if err != nil {
		return record.Header{}, err
	}
	return record.Header{Layout: pol.Layout(), DType: record.Float32, Blocks: g.Blocks, Source: "densitykv generate " + filepath.Base(g.Checkpoint),
		Memory: record.BudgetOf(r)}, nil
}

// newStreamRecord creates the recording, or with resume reopens it cut
// back to size bytes, which must hold the header and blocks 0..next−1 and,
// when sum is not empty, have that SHA-256 (hex); without one every
// record's CRC-32 is checked instead. The recording hashes what it writes
// (streamRecord.sum).
func newStreamRecord(path string, h record.Header, resume bool, size int64, sum string, next int) (*streamRecord, error) {
	if !resume {
		f, err := atomicfile.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		cw := &hashWriter{w: f, h: sha256.New()}
		sw, err := record.NewWriter(cw, h)
		if err != nil {
			f.Close()
			return nil, err
		}
		return &streamRecord{f: f, cw: cw, sw: sw}, nil
	}
	if size < 0 {
		return nil, fmt.Errorf("%s: the checkpoint has no recording position", path)
	}
	f, err := atomicfile.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*streamRecord, error) {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if st.Size() < size {
		return fail(fmt.Errorf("%d bytes, fewer than the %d the checkpoint recorded", st.Size(), size))
	}
	r, err := record.NewFileReader(io.NewSectionReader(f, 0, size))
	if err != nil {
		return fail(err)
	}
	// Source names the checkpoint file the run began with, which resume
	// may read from elsewhere (identified by its content): the recording
	// keeps its source.
	have := r.Header()
	h.Source = have.Source
	if !reflect.DeepEqual(have, h) {
		return fail(fmt.Errorf("header %+v, want %+v", have, h))
	}
	// The content: its SHA-256 (also the running hash the recording
	// continues), or without one every record's CRC-32.
	hw := sha256.New()
	if _, err := io.Copy(hw, io.NewSectionReader(f, 0, size)); err != nil {
		return fail(err)
	}
	if sum != "" {
		if got := hex.EncodeToString(hw.Sum(nil)); got != sum {
			return fail(fmt.Errorf("its first %d bytes (blocks 0..%d) have SHA-256 %s, the checkpoint records %s: the recording was changed or damaged since the checkpoint", size, next-1, got, sum))
		}
	} else if err := checkRecords(r, next); err != nil {
		return fail(fmt.Errorf("the recording of blocks 0..%d is damaged: %w", next-1, err))
	}
	if err := f.Truncate(size); err != nil {
		return fail(err)
	}
	if _, err := f.Seek(size, io.SeekStart); err != nil {
		return fail(err)
	}
	cw := &hashWriter{w: f, h: hw, n: size}
	sw, err := record.ResumeWriter(cw, h, 0, next)
	if err != nil {
		return fail(err)
	}
	return &streamRecord{f: f, cw: cw, sw: sw}, nil
}

// checkRecords reads blocks 0..next−1 of r, every layer, which checks each
// record's CRC-32 and order.
func checkRecords(r *record.FileReader, next int) error {
	for b := 0; b < next; b++ {
		info, err := r.NextBlock()
		if err != nil {
			return err
		}
		if info.Index != b {
			return fmt.Errorf("block %d where block %d was expected", info.Index, b)
		}
		for l := 0; l < r.Layout().Layers; l++ {
			if _, _, _, err := r.Layer(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// sum returns the SHA-256 (hex) of the recording's bytes so far.
func (r *streamRecord) sum() string { return hex.EncodeToString(r.cw.h.Sum(nil)) }

// sync flushes the recording to the file and returns its size.
func (r *streamRecord) sync() (int64, error) {
	if err := r.sw.Flush(); err != nil {
		return 0, err
	}
	return r.cw.n, r.f.Sync()
}

// finish writes the end record and closes the file (once).
func (r *streamRecord) finish() error {
	if r.done {
		return nil
	}
	r.done = true
	return errors.Join(r.sw.Close(), r.f.Close())
}

// hashWriter counts what passes through it and, when h is set, hashes it.
type hashWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (h *hashWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	if h.h != nil {
		h.h.Write(p[:n])
	}
	h.n += int64(n)
	return n, err
}
