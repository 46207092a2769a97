// Package runfoldertest reads run folders whole for tests that compare
// two runs (an interrupted and resumed one against an uninterrupted one, a
// moved folder against its original).
package runfoldertest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/runfolder"
)

// Skip, returned by a Files fix, leaves the file out.
var Skip = errors.New("runfoldertest: skip this file")

// Files reads every file of run folder dir but those of state/ (the resume
// checkpoint), by path relative to dir, each passed through fix (nil: kept
// as it is), which returns the bytes to compare (wall-clock fields blanked,
// places replaced) or Skip. An error fails the test.
func Files(t testing.TB, dir string, fix func(rel string, b []byte) ([]byte, error)) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if rel == runfolder.DirState {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if fix != nil {
			if b, err = fix(rel, b); errors.Is(err, Skip) {
				return nil
			} else if err != nil {
				return err
			}
		}
		out[rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Diff names the files that differ between two Files readings ("missing
// F", "differs F", "extra F", sorted), "" when they are the same.
func Diff(want, got map[string][]byte) string {
	var diffs []string
	for f, b := range want {
		if g, ok := got[f]; !ok {
			diffs = append(diffs, "missing "+f)
		} else if !bytes.Equal(b, g) {
			diffs = append(diffs, "differs "+f)
		}
	}
	for f := range got {
		if _, ok := want[f]; !ok {
			diffs = append(diffs, "extra "+f)
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, ", ")
}
