package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// Faulty is an FS that fails one write operation, for tests of what a
// writer leaves behind when the disk fills up or fails. Write operations
// are counted from 1 across its files: creating or opening a file for
// writing, each Write, Truncate, Chmod, Sync, Rename and SyncDir (not
// Remove).
// The FailAt-th one fails with Err; a failing Write first writes half of
// its bytes (a torn write). With Sticky every later one fails too (a full
// disk stays full); without, only that one (a transient EIO).
type Faulty struct {
	FS     FS // the file system underneath (OS when nil)
	FailAt int
	Err    error
	Sticky bool

	mu     sync.Mutex
	n      int
	failed bool
	// Failed is the description of the operation that failed ("" when
	// none did).
	Failed string
}

// Ops returns how many write operations it has counted.
func (f *Faulty) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// fail counts one operation and reports the error it must return.
func (f *Faulty) fail(what string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.n == f.FailAt || f.Sticky && f.failed {
		if !f.failed {
			f.Failed = fmt.Sprintf("operation %d: %s", f.n, what)
		}
		f.failed = true
		return f.Err
	}
	return nil
}

func (f *Faulty) base() FS {
	if f.FS == nil {
		return OS
	}
	return f.FS
}

func (f *Faulty) CreateTemp(dir, pattern string) (File, error) {
	if err := f.fail("create temp in " + dir); err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir + "/" + pattern, Err: err}
	}
	file, err := f.base().CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f}, nil
}

const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND

func (f *Faulty) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if flag&writeFlags != 0 {
		if err := f.fail("open " + name); err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
	}
	file, err := f.base().OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f}, nil
}

func (f *Faulty) Rename(oldpath, newpath string) error {
	if err := f.fail("rename " + oldpath + " to " + newpath); err != nil {
		return &fs.PathError{Op: "rename", Path: newpath, Err: err}
	}
	return f.base().Rename(oldpath, newpath)
}

// Remove is not counted and never fails: removing frees space, and a
// writer's clean-up after a failure must not be what the test breaks.
func (f *Faulty) Remove(name string) error { return f.base().Remove(name) }

func (f *Faulty) SyncDir(dir string) error {
	if err := f.fail("sync folder " + dir); err != nil {
		return &fs.PathError{Op: "sync", Path: dir, Err: err}
	}
	return f.base().SyncDir(dir)
}

type faultyFile struct {
	File
	fs *Faulty
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if err := f.fs.fail(fmt.Sprintf("write %d bytes to %s", len(p), f.Name())); err != nil {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.Write(p)
}

func (f *faultyFile) Sync() error {
	if err := f.fs.fail("sync " + f.Name()); err != nil {
		return &fs.PathError{Op: "sync", Path: f.Name(), Err: err}
	}
	return f.File.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if err := f.fs.fail("truncate " + f.Name()); err != nil {
		return &fs.PathError{Op: "truncate", Path: f.Name(), Err: err}
	}
	return f.File.Truncate(size)
}

func (f *faultyFile) Chmod(mode fs.FileMode) error {
	if err := f.fs.fail("chmod " + f.Name()); err != nil {
		return &fs.PathError{Op: "chmod", Path: f.Name(), Err: err}
	}
	return f.File.Chmod(mode)
}

// NoSync is the OS file system without fsync, for tests that check what a
// failed write leaves rather than the disk's durability (fsync on a loaded
// disk makes them slow). Never use it for real output.
var NoSync FS = noSync{}

type noSync struct{}

func (noSync) CreateTemp(dir, pattern string) (File, error) {
	f, err := OS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (noSync) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}
func (noSync) Rename(oldpath, newpath string) error { return OS.Rename(oldpath, newpath) }
func (noSync) Remove(name string) error             { return OS.Remove(name) }
func (noSync) SyncDir(string) error                 { return nil }

type noSyncFile struct{ File }

func (noSyncFile) Sync() error { return nil }
