package rawio

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"
)

// shortWriter accepts at most n bytes in all, then fails.
type shortWriter struct{ n int }

func (s *shortWriter) Write(p []byte) (int, error) {
	k := min(len(p), s.n)
	s.n -= k
	if k < len(p) {
		return k, errors.New("full")
	}
	return k, nil
}

// TestCRCWriter: the CRC and count cover exactly the bytes the underlying
// writer accepted, across several writes and a short one.
func TestCRCWriter(t *testing.T) {
	data := []byte("the quick brown fox jumps over the lazy dog")
	var buf bytes.Buffer
	c := &CRCWriter{W: &buf}
	c.Write(data[:10])
	c.Write(data[10:])
	if c.N != int64(len(data)) || c.CRC != crc32.Checksum(data, Castagnoli) || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("N %d CRC %08x, want %d %08x", c.N, c.CRC, len(data), crc32.Checksum(data, Castagnoli))
	}
	s := &CRCWriter{W: &shortWriter{n: 7}}
	if k, err := s.Write(data); err == nil || k != 7 || s.N != 7 || s.CRC != crc32.Checksum(data[:7], Castagnoli) {
		t.Fatalf("short write: k %d err %v N %d CRC %08x", k, err, s.N, s.CRC)
	}
}
