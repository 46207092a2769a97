package rawio

import (
	"hash/crc32"
	"io"
)

// Castagnoli is the CRC-32C table of the snapshot and archive formats.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRCWriter passes writes to W and keeps the CRC-32C (Castagnoli) and the
// count of the bytes W accepted: the streaming snapshot writers' trailer.
type CRCWriter struct {
	W   io.Writer
	CRC uint32
	N   int64
}

func (c *CRCWriter) Write(p []byte) (int, error) {
	k, err := c.W.Write(p)
	c.CRC = crc32.Update(c.CRC, Castagnoli, p[:k])
	c.N += int64(k)
	return k, err
}

// CountReader passes reads to R and counts the bytes it returned.
type CountReader struct {
	R io.Reader
	N int64
}

func (c *CountReader) Read(p []byte) (int, error) {
	k, err := c.R.Read(p)
	c.N += int64(k)
	return k, err
}
