package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Input is a file a command reads, with the role its flag gives it
// ("--checkpoint", "--text", "--config").
type Input struct {
	Role, Path string
}

// Output is a path a command writes: a file, or with Dir a folder whose
// contents it writes or removes.
type Output struct {
	Role, Path string
	Dir        bool
}

// CheckOutputs refuses, before anything is written, an output that would
// overwrite an input: the same file (os.SameFile: hard links, symbolic
// links, different spellings) or the same cleaned absolute path, or for a
// folder output an input inside it. The error names both roles and paths.
func CheckOutputs(outs []Output, ins []Input) error {
	for _, o := range outs {
		if o.Path == "" {
			continue
		}
		for _, in := range ins {
			if in.Path == "" {
				continue
			}
			if Aliases(o, in.Path) {
				what := "is"
				if o.Dir {
					what = "holds"
				}
				return fmt.Errorf("%s %s %s %s %s: writing it would overwrite an input; choose another output", o.Role, o.Path, what, in.Role, in.Path)
			}
		}
	}
	return nil
}

// Aliases reports whether writing o could overwrite the file at in.
func Aliases(o Output, in string) bool {
	oa, ia := absClean(o.Path), absClean(in)
	if oa == ia {
		return true
	}
	if o.Dir {
		if rel, err := filepath.Rel(oa, ia); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
		// The input reached through a link into the folder.
		if real, err := filepath.EvalSymlinks(in); err == nil {
			if od, err := filepath.EvalSymlinks(o.Path); err == nil {
				if rel, err := filepath.Rel(od, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					return true
				}
			}
		}
		return false
	}
	a, err1 := os.Stat(o.Path)
	b, err2 := os.Stat(in)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

func absClean(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// CheckWritable checks, before anything is written, that a file can be
// created at path: its folder exists and is a folder, and path is not a
// folder. The error names role and path.
func CheckWritable(role, path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("%s %s: its folder %s: %w", role, path, dir, unwrapPath(err))
	case !st.IsDir():
		return fmt.Errorf("%s %s: %s is not a folder", role, path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s %s is a folder, want a file", role, path)
	}
	return nil
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
