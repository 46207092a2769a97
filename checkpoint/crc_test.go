package checkpoint

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// flipInRecord returns a copy of the zip archive arc with one byte flipped
// at offset at of record name's data (stored records only).
func flipInRecord(t *testing.T, arc []byte, name string, at int64) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(arc), int64(len(arc)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if f.Name != name {
			continue
		}
		if f.Method != zip.Store || at >= int64(f.UncompressedSize64) {
			t.Fatalf("%s: method %d, %d bytes: cannot flip byte %d", name, f.Method, f.UncompressedSize64, at)
		}
		off, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		bad := append([]byte(nil), arc...)
		bad[off+at] ^= 0x10
		return bad
	}
	t.Fatalf("no record %s", name)
	return nil
}

// TestTorchCRC: a byte flipped in a storage record of a .pt file is found
// by the record's zip CRC-32, by LoadTorch/LoadFile and by OpenRaw's lazy
// reads, wherever it lies in the record: inside the tensor's view, before
// it, or after it (the CRC covers the whole record); the errors name the
// file, the tensor and the record and wrap ErrChecksum. The intact archive
// loads.
func TestTorchCRC(t *testing.T) {
	st := map[string][]byte{
		"0": f32bytes(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11),
		"1": f32bytes(20, 21, 22, 23),
	}
	ents := map[string][]named{"generator": {
		{"model.mid", ptTensor{"0", "FloatStorage", 12, 4, []int{2, 2}, []int{2, 1}}}, // elements 4..7, contiguous
		{"model.t", ptTensor{"0", "FloatStorage", 12, 0, []int{2, 2}, []int{1, 2}}},   // strided
		{"model.whole", ptTensor{"1", "FloatStorage", 4, 0, []int{4}, []int{1}}},      // the whole record
		{"model.head", ptTensor{"1", "FloatStorage", 4, 0, []int{2}, []int{1}}},       // its first half
	}}
	arc := rezip(t, ptArchive(ents, []string{"generator"}, st), zip.Store)
	dir := t.TempDir()
	if _, err := LoadTorch(bytes.NewReader(arc), int64(len(arc)), TorchOptions{}); err != nil {
		t.Fatalf("intact archive: %v", err)
	}
	for _, c := range []struct {
		name   string
		record string
		at     int64
		// tensors whose raw reads must fail (they read the damaged record)
		bad []string
	}{
		{"in the view", "archive/data/0", 5 * 4, []string{"mid", "t"}},
		{"before the view", "archive/data/0", 1, []string{"mid", "t"}},
		{"after the view", "archive/data/0", 11 * 4, []string{"mid", "t"}},
		{"whole record", "archive/data/1", 3*4 + 2, []string{"whole", "head"}},
		{"after a prefix view", "archive/data/1", 3 * 4, []string{"whole", "head"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := flipInRecord(t, arc, c.record, c.at)
			p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".pt")
			if err := os.WriteFile(p, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFile(p, TorchOptions{})
			if err == nil || !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), c.record) || !strings.Contains(err.Error(), p) {
				t.Fatalf("LoadFile: %v, want a checksum error naming %s and %s", err, c.record, p)
			}
			rf, err := OpenRaw(p, TorchOptions{})
			if err != nil {
				t.Fatalf("OpenRaw (lazy: the data is checked when read): %v", err)
			}
			defer rf.Close()
			for _, rt := range rf.Tensors {
				want := false
				for _, b := range c.bad {
					want = want || rt.Name == b
				}
				err := readAllOf(rt)
				if !want {
					if err != nil {
						t.Fatalf("tensor %s of an intact record: %v", rt.Name, err)
					}
					continue
				}
				if err == nil || !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), c.record) ||
					!strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `"`+rt.Name+`"`) {
					t.Fatalf("raw read of %s: %v, want a checksum error naming the tensor, %s and %s", rt.Name, err, c.record, p)
				}
				// io.ReadFull of exactly the tensor's bytes sees it too.
				r, err := rt.Reader()
				if err == nil {
					_, err = io.ReadFull(r, make([]byte, rt.Bytes()))
				}
				if err == nil || !errors.Is(err, ErrChecksum) {
					t.Fatalf("io.ReadFull of %s: %v, want a checksum error", rt.Name, err)
				}
			}
		})
	}
	// data.pkl is checked too.
	bad := flipInRecord(t, arc, "archive/data.pkl", 3)
	if _, err := LoadTorch(bytes.NewReader(bad), int64(len(bad)), TorchOptions{}); err == nil || !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "data.pkl") {
		t.Fatalf("damaged data.pkl: %v", err)
	}
}

func readAllOf(rt RawTensor) error {
	r, err := rt.Reader()
	if err != nil {
		return err
	}
	_, err = io.ReadAll(r)
	return err
}
