// Package atomicfile writes files so that readers see either the old
// content or the complete new one, never a partial file, and so that a
// completed write survives a crash: the data goes to a temporary file in
// the destination's folder, which is synced, given mode 0644 and renamed
// over the destination; the folder is then synced so the rename is durable.
//
// Every write goes through an FS, the process's file system by default.
// Tests swap it (Use) for a Faulty one that fails the k-th write with
// ENOSPC or EIO, to check that a writer leaves no torn file behind and
// says so. Files written as they go (logs, streams) are opened with
// OpenFile so that the same injection reaches them.
//
// How writers call it:
//
//	atomicfile.WriteBytes(path, data)               // a whole result file
//	atomicfile.Write(path, func(w io.Writer) error { … }) // streamed into the temp file
//	f, err := atomicfile.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644) // appended as it goes; f.Sync() before recording its size
//	atomicfile.SameFile / CheckOutputs (alias.go)   // refuse an output that is an input
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// File is an open file of an FS (*os.File has every method).
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Seeker
	Name() string
	Stat() (fs.FileInfo, error)
	Sync() error
	Truncate(size int64) error
	Chmod(mode fs.FileMode) error
	Close() error
}

// FS is the file system the writers use: the operations that create,
// change or remove files.
type FS interface {
	CreateTemp(dir, pattern string) (File, error)
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	// SyncDir makes the renames and creations in dir durable.
	SyncDir(dir string) error
}

// OS is the process's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) CreateTemp(dir, pattern string) (File, error) { return os.CreateTemp(dir, pattern) }
func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	return os.OpenFile(name, flag, perm)
}
func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error             { return os.Remove(name) }

// SyncDir syncs the folder; systems that cannot open or sync a folder
// (some network and Windows file systems) are not an error: the files
// themselves are complete.
func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) && !isInvalid(err) {
		return err
	}
	return nil
}

var (
	mu      sync.RWMutex
	current = OS
)

// Current returns the FS the package's functions use.
func Current() FS {
	mu.RLock()
	defer mu.RUnlock()
	return current
}

// Use makes the package's functions use fsys until the returned restore
// is called (tests: fault injection). It affects the whole process.
func Use(fsys FS) (restore func()) {
	mu.Lock()
	prev := current
	current = fsys
	mu.Unlock()
	return func() {
		mu.Lock()
		current = prev
		mu.Unlock()
	}
}

// Write writes path atomically with the bytes fn writes to w. If fn or any
// step fails, the temporary file is removed, path is left as it was, and
// the error names path.
func Write(path string, fn func(w io.Writer) error) error {
	return WriteFS(Current(), path, fn)
}

// WriteFS is Write on fsys.
func WriteFS(fsys FS, path string, fn func(w io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := fsys.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	werr := fn(f)
	if werr == nil {
		werr = f.Chmod(0o644)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		fsys.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fsys.Rename(f.Name(), path); err != nil {
		fsys.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("write %s: sync folder: %w", path, err)
	}
	return nil
}

// WriteBytes writes data to path atomically (see Write).
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// OpenFile opens a file that is written as it goes (a log, a recorded
// stream) on the current FS; its writer calls Sync before it records the
// file's size as durable.
func OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	return Current().OpenFile(name, flag, perm)
}

// Remove removes a file on the current FS.
func Remove(name string) error { return Current().Remove(name) }

// SyncDir syncs a folder on the current FS (after creating files in it).
func SyncDir(dir string) error { return Current().SyncDir(dir) }

func isInvalid(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && (errors.Is(pe.Err, syscall.EINVAL))
}

// IsTemp reports whether name (a base name) is one of Write's temporary
// files: "." + the destination's name + ".tmp" + digits.
func IsTemp(name string) bool {
	if !strings.HasPrefix(name, ".") {
		return false
	}
	i := strings.LastIndex(name, ".tmp")
	if i <= 0 {
		return false
	}
	for _, c := range name[i+4:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// CleanTemps removes, in dir and the folders below it, the temporary
// files that writes interrupted by a crash left (IsTemp): their
// destinations were never touched. Call it before a run continues in or
// takes over a folder.
func CleanTemps(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && IsTemp(d.Name()) {
			return Current().Remove(p)
		}
		return nil
	})
}
