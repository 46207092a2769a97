package generate

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/record"
)

// TestStreamRecordResumeChecksContent: resuming a --record-stream
// recording checks its content, not only its length: a byte flipped in the
// checkpointed blocks is refused by the recorded SHA-256 and, for
// checkpoints without one, by the records' CRC-32; an intact recording
// resumes, and the hash it carries on equals the final file's.
func TestStreamRecordResumeChecksContent(t *testing.T) {
	lay := memory.Layout{Height: 2, Width: 2, FramesPerBlock: 1, Layers: 2, Heads: 1, HeadDim: 6}
	h := record.Header{Layout: lay, DType: record.Float32, Blocks: 4, Source: "test"}
	dir := t.TempDir()
	path := filepath.Join(dir, "r.dkvs")
	n := lay.TokensPerBlock() * lay.Heads * lay.HeadDim
	q, k, v := make([]float32, n), make([]float32, n), make([]float32, n)
	write := func(r *streamRecord, from, to int) {
		t.Helper()
		for b := from; b < to; b++ {
			if err := r.sw.BeginBlock(b, nil, [4]int{}); err != nil {
				t.Fatal(err)
			}
			for l := 0; l < lay.Layers; l++ {
				for i := range q {
					q[i], k[i], v[i] = float32(b*100+l*10+i), float32(-i), float32(b)
				}
				if err := r.sw.WriteLayer(l, q, k, v); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	r, err := newStreamRecord(path, h, false, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	write(r, 0, 2)
	size, err := r.sync()
	if err != nil {
		t.Fatal(err)
	}
	sum := r.sum()
	write(r, 2, 3) // written after the checkpoint: cut back on resume
	if err := r.f.Close(); err != nil {
		t.Fatal(err)
	}
	intact, _ := os.ReadFile(path)
	if s := sha256.Sum256(intact[:size]); hex.EncodeToString(s[:]) != sum {
		t.Fatal("the recording's running SHA-256 differs from its bytes'")
	}
	for _, c := range []struct {
		name string
		at   int64 // byte flipped (−1: none)
		sum  string
		want string
	}{
		{"flipped, sha", size / 2, sum, "SHA-256"},
		{"flipped in the last record, sha", size - 2, sum, "SHA-256"},
		{"flipped, crc", size / 2, "", "checksum"},
		{"flipped in the last record, crc", size - 2, "", "checksum"},
		{"foreign sha", -1, strings.Repeat("0", 64), "SHA-256"},
	} {
		b := append([]byte(nil), intact...)
		if c.at >= 0 {
			b[c.at] ^= 0x04
		}
		os.WriteFile(path, b, 0o644)
		_, err := newStreamRecord(path, h, true, size, c.sum, 2)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming %s and %q", c.name, err, path, c.want)
		}
	}
	for _, s := range []string{sum, ""} {
		os.WriteFile(path, intact, 0o644)
		r, err := newStreamRecord(path, h, true, size, s, 2)
		if err != nil {
			t.Fatalf("intact recording (sum %q): %v", s, err)
		}
		write(r, 2, 4)
		if _, err := r.sync(); err != nil {
			t.Fatal(err)
		}
		got := r.sum()
		if err := r.finish(); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		// The end record follows the last sync.
		fr, err := record.NewFileReader(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkRecords(fr, 4); err != nil {
			t.Fatalf("resumed recording: %v", err)
		}
		synced := b[:len(b)-(5+4+4)]
		if s := sha256.Sum256(synced); hex.EncodeToString(s[:]) != got {
			t.Fatal("the resumed recording's running SHA-256 differs from its bytes'")
		}
	}
}
