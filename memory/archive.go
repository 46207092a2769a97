package memory

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/densitykv/densitykv/internal/rawio"
)

// Archiver is implemented by the policies whose memory grows without bound
// with the video, FullHistory (every historical token) and LongLive-RAG
// (every frame that left the window): UseArchive keeps those frames in a
// file instead of memory, so that the resident memory stays bounded (a
// context reads its frames from the file) and the run can go on as long as
// the disk holds the archive. Results are bit-identical either way (the
// frames are stored as float32 and read back exactly). A snapshot of a
// policy with an archive records the archive's frame count and a checksum
// of every record instead of the frames (the file is part of the resumable
// state): Load needs the same file, attached with UseArchive first, and
// cuts it back to the snapshot's frames; every record read is checked.
type Archiver interface {
	// UseArchive keeps the policy's archived frames in the file at path,
	// created empty (or, for Load of a snapshot with an archive, opened).
	// Call it before the policy's first call. Policies that do not archive
	// (FIFO, uniform stride) return an error.
	UseArchive(path string) error
	// CloseArchive closes the archive file; with remove it also deletes it.
	CloseArchive(remove bool) error
}

// ErrArchive is wrapped by every error about an archive file that does not
// hold what the policy recorded.
var ErrArchive = errors.New("memory: bad archive")

// archive is an append-only file of frames: record (i, l) holds frame i's
// layer-l keys then values, n float32 each, little-endian, at offset
// (i·layers + l)·2·4n. crc[i·layers + l] is the record's CRC-32C, checked
// on every read. Reads may run concurrently; appends may not run with
// reads.
type archive struct {
	path   string
	f      *os.File
	layers int
	n      int
	ids    []int    // frame id of each archived frame
	crc    []uint32 // [frame·layers + layer]
	// fresh: the file has been created for this policy and nothing was
	// loaded into it (a Load may attach its frames).
	fresh bool
}

func (a *archive) recBytes() int64 { return 8 * int64(a.n) }

// size returns the bytes of frames [0, frames).
func (a *archive) size(frames int) int64 { return int64(frames) * int64(a.layers) * a.recBytes() }

// openArchive opens the archive file at path, creating it if needed. It
// starts empty: the first add cuts the file to what it writes, and a Load
// of a snapshot with an archive restores the frames the file holds.
func openArchive(path string, layers, n int) (*archive, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("memory: archive: %w", err)
	}
	return &archive{path: path, f: f, layers: layers, n: n, fresh: true}, nil
}

// len returns the number of archived frames.
func (a *archive) len() int { return len(a.ids) }

// add appends frames (their keys as the policy reads them, keys(f, l),
// and values, values(f, l)) at the end. On error nothing is added (what
// was written is overwritten by the next add, or cut off by Load).
func (a *archive) add(frames []*frame, keys, values func(f *frame, l int) []float32) error {
	if a.fresh {
		if err := a.f.Truncate(0); err != nil {
			return fmt.Errorf("memory: archive %s: %w", a.path, err)
		}
		a.fresh = false
	}
	crcs := make([]uint32, 0, len(frames)*a.layers)
	for i, f := range frames {
		for l := 0; l < a.layers; l++ {
			k, v := keys(f, l), values(f, l)
			if len(k) != a.n || len(v) != a.n {
				return fmt.Errorf("memory: archive %s: frame %d layer %d has %d/%d values, want %d", a.path, f.ID, l, len(k), len(v), a.n)
			}
			off := a.size(len(a.ids)+i) + int64(l)*a.recBytes()
			kb, vb := rawio.Bytes(k), rawio.Bytes(v)
			if _, err := a.f.WriteAt(kb, off); err != nil {
				return fmt.Errorf("memory: archive %s: frame %d layer %d: %w", a.path, f.ID, l, err)
			}
			if _, err := a.f.WriteAt(vb, off+int64(len(kb))); err != nil {
				return fmt.Errorf("memory: archive %s: frame %d layer %d: %w", a.path, f.ID, l, err)
			}
			crcs = append(crcs, crc32.Update(crc32.Update(0, castagnoli, kb), castagnoli, vb))
		}
	}
	for _, f := range frames {
		a.ids = append(a.ids, f.ID)
	}
	a.crc = append(a.crc, crcs...)
	return nil
}

// read reads frame i's layer-l keys and values into k and v (n values
// each) and checks the record's checksum.
func (a *archive) read(i, l int, k, v []float32) error {
	off := a.size(i) + int64(l)*a.recBytes()
	if err := a.readAt(k[:a.n], off); err != nil {
		return fmt.Errorf("memory: archive %s: frame %d layer %d: %w", a.path, a.ids[i], l, err)
	}
	if err := a.readAt(v[:a.n], off+4*int64(a.n)); err != nil {
		return fmt.Errorf("memory: archive %s: frame %d layer %d: %w", a.path, a.ids[i], l, err)
	}
	kb, vb := rawio.Bytes(k[:a.n]), rawio.Bytes(v[:a.n])
	if got, want := crc32.Update(crc32.Update(0, castagnoli, kb), castagnoli, vb), a.crc[i*a.layers+l]; got != want {
		return fmt.Errorf("%w: %s: frame %d layer %d: checksum %08x, the policy recorded %08x (the file was changed or damaged)", ErrArchive, a.path, a.ids[i], l, got, want)
	}
	return nil
}

// readAt fills dst from the file at off.
func (a *archive) readAt(dst []float32, off int64) error {
	return rawio.ReadFull(io.NewSectionReader(a.f, off, 4*int64(len(dst))), dst)
}

// state returns the archive's record of what it holds (for a snapshot).
func (a *archive) state() archiveState {
	return archiveState{IDs: append([]int(nil), a.ids...), CRC: append([]uint32(nil), a.crc...)}
}

// archiveState is what a snapshot records of an archive.
type archiveState struct {
	IDs []int
	CRC []uint32
}

// check checks that the file can hold st (its size, and the last frame's
// first record), without changing anything.
func (a *archive) check(st archiveState) error {
	if len(st.CRC) != len(st.IDs)*a.layers {
		return fmt.Errorf("%w: %s: %d checksums for %d frames of %d layers", ErrArchive, a.path, len(st.CRC), len(st.IDs), a.layers)
	}
	fi, err := a.f.Stat()
	if err != nil {
		return fmt.Errorf("memory: archive: %w", err)
	}
	if need := a.size(len(st.IDs)); fi.Size() < need {
		return fmt.Errorf("%w: %s has %d bytes, the snapshot's %d frames need %d", ErrArchive, a.path, fi.Size(), len(st.IDs), need)
	}
	if len(st.IDs) > 0 {
		b := archive{path: a.path, f: a.f, layers: a.layers, n: a.n, ids: st.IDs, crc: st.CRC}
		k, v := make([]float32, a.n), make([]float32, a.n)
		if err := b.read(len(st.IDs)-1, 0, k, v); err != nil {
			return err
		}
	}
	return nil
}

// restore makes the archive hold st (checked), cutting the file back to it.
func (a *archive) restore(st archiveState) error {
	if err := a.f.Truncate(a.size(len(st.IDs))); err != nil {
		return fmt.Errorf("memory: archive: %w", err)
	}
	a.ids, a.crc, a.fresh = st.IDs, st.CRC, false
	return nil
}

// close closes the file; with remove it deletes it.
func (a *archive) close(remove bool) error {
	err := a.f.Close()
	if remove {
		if e := os.Remove(a.path); e != nil && !errors.Is(e, os.ErrNotExist) {
			err = errors.Join(err, e)
		}
	}
	if err != nil {
		return fmt.Errorf("memory: archive: %w", err)
	}
	return nil
}
