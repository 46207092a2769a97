package runfolder

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CheckInputs identifies a run folder's own files by their place in the
// folder (in the checkpoints of earlier versions: by the path the run
// spelled, whose tail is that place) and the files outside it by content.
func TestCheckInputsByPlaceAndContent(t *testing.T) {
	emb := FileFingerprint{Role: "embedding", Path: filepath.Join("text", "prompt_00.safetensors"), Size: 10, SHA256: "aa"}
	ck := FileFingerprint{Role: "checkpoint", Path: "/old/w.safetensors", Size: 20, SHA256: "bb"}
	at := func(f FileFingerprint, path string) FileFingerprint { f.Path = path; return f }
	changed := func(f FileFingerprint) FileFingerprint { f.SHA256 = "cc"; return f }
	for _, c := range []struct {
		name       string
		saved, now []FileFingerprint
		moved      int
		err        string
	}{
		{"same", []FileFingerprint{ck, emb}, []FileFingerprint{ck, emb}, 0, ""},
		{"older absolute", []FileFingerprint{ck, at(emb, "/runs/k/text/prompt_00.safetensors")}, []FileFingerprint{ck, emb}, 0, ""},
		{"older relative", []FileFingerprint{ck, at(emb, "runs/k/text/prompt_00.safetensors")}, []FileFingerprint{ck, emb}, 0, ""},
		{"another file of the folder", []FileFingerprint{ck, at(emb, "/runs/k/text/prompt_01.safetensors")}, []FileFingerprint{ck, emb}, 0, "input 1 is embedding"},
		{"not in text/", []FileFingerprint{ck, at(emb, "/runs/k/prompt_00.safetensors")}, []FileFingerprint{ck, emb}, 0, "input 1 is embedding"},
		{"input moved", []FileFingerprint{ck, emb}, []FileFingerprint{at(ck, "/new/w.safetensors"), emb}, 1, ""},
		{"input changed", []FileFingerprint{ck, emb}, []FileFingerprint{changed(ck), emb}, 0, "checkpoint /old/w.safetensors changed since the checkpoint"},
		{"another input elsewhere", []FileFingerprint{ck, emb}, []FileFingerprint{changed(at(ck, "/new/w.safetensors")), emb}, 0, "checkpoint /new/w.safetensors is not the file the run started with"},
		{"embedding changed", []FileFingerprint{ck, emb}, []FileFingerprint{ck, changed(emb)}, 0, "changed since the checkpoint"},
		{"roles", []FileFingerprint{ck, emb}, []FileFingerprint{emb, ck}, 0, "input 0 is checkpoint"},
		{"count", []FileFingerprint{ck, emb}, []FileFingerprint{ck}, 0, "fingerprints 2 input files"},
	} {
		moved, err := CheckInputs(c.saved, c.now)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		case len(moved) != c.moved:
			t.Errorf("%s: moved %v, want %d", c.name, moved, c.moved)
		}
	}
}

// The log records: at least the recorded bytes, and for a complete run
// nothing more than a torn line.
func TestCheckLogRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileLog)
	lines := []byte("{\"a\":1}\n{\"a\":2}\n")
	for _, c := range []struct {
		name     string
		data     []byte
		complete bool
		err      string
	}{
		{"as recorded", lines, true, ""},
		{"cut", lines[:len(lines)-3], false, "fewer than the 16"},
		{"lines after the checkpoint", append(bytes.Clone(lines), "{\"a\":3}\n"...), false, ""},
		{"a line added to a complete run", append(bytes.Clone(lines), "{\"a\":3}\n"...), true, "lines were added"},
		{"a torn line", append(bytes.Clone(lines), "{\"a\""...), true, ""},
	} {
		os.WriteFile(path, c.data, 0o644)
		err := checkLogRecord(path, int64(len(lines)), c.complete)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), path)):
			t.Errorf("%s: error %v, want %q naming the file", c.name, err, c.err)
		}
	}
}
