// Package limitread reads whole input files with a bound on their size,
// checked before and while reading, so that a wrong path (/dev/zero, a
// video given as a prompt list, a checkpoint given as a config file) is
// refused with an error naming the file and the limit instead of ending
// the process out of memory.
package limitread

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// TooLargeError is the error of a file over its limit.
type TooLargeError struct {
	Path  string
	Limit int64
	What  string // what the file was read as, plural ("configuration files")
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s, the limit for %s (is it the right file?)", e.Path, Size(e.Limit), e.What)
}

// ErrTooLarge matches every TooLargeError (errors.Is).
var ErrTooLarge = errors.New("file over its size limit")

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// File reads the file at path, which must hold at most limit bytes;
// what names what the file is read as, for the error. A regular file's
// size is checked before anything is read; any other file (a pipe, a
// device) is read up to limit+1 bytes and refused past limit.
func File(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Reader(f, path, limit, what)
}

// Reader is File for an open file (or any reader named path).
func Reader(r io.Reader, path string, limit int64, what string) ([]byte, error) {
	if limit < 0 {
		return nil, fmt.Errorf("limitread: limit %d for %s is negative", limit, path)
	}
	if f, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limit {
			return nil, &TooLargeError{Path: path, Limit: limit, What: what}
		}
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Path: path, Limit: limit, What: what}
	}
	return b, nil
}

// Size writes a byte count the way limits are named: 64 MiB, 512 KiB, 100 bytes.
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
