package gpu

import (
	"strings"
	"testing"

	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestCopyRows: the strided copy moves every word's bits (NaN payloads
// and signed zeros too), zeroes the rows past the copied ones, leaves the
// rest of the destination, and refuses bad shapes and short buffers.
func TestCopyRows(t *testing.T) {
	dev := vulkantest.Open(t)
	const rows, zrows, cols, srcOff, srcLd, dstOff, dstLd = 5, 7, 3, 2, 4, 1, 6
	src := make([]uint32, srcOff+rows*srcLd)
	for i := range src {
		src[i] = 0x7fc00001 + uint32(i)*0x01010101 // NaN payloads and others
	}
	src[srcOff] = 0x80000000 // −0
	dst := make([]uint32, dstOff+zrows*dstLd+2)
	for i := range dst {
		dst[i] = 0xdeadbeef
	}
	want := append([]uint32(nil), dst...)
	for r := range zrows {
		for c := range cols {
			w := uint32(0)
			if r < rows {
				w = src[srcOff+r*srcLd+c]
			}
			want[dstOff+r*dstLd+c] = w
		}
	}
	sb, db := exUpload(t, dev, src), exUpload(t, dev, dst)
	batch := dev.NewBatch()
	if err := CopyRows(dev, batch, db, dstOff, dstLd, sb, srcOff, srcLd, rows, zrows, cols); err != nil {
		t.Fatal(err)
	}
	if err := batch.Run(); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, len(dst))
	if err := dev.DownloadUint32s(db, 0, got); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("word %d: %#x, want %#x", i, got[i], want[i])
		}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{CopyRows(dev, batch, db, 0, 2, sb, 0, 4, 1, 2, 3), "stride 2"},
		{CopyRows(dev, batch, db, 0, 6, sb, 0, 4, 3, 2, 3), "3 of 2 rows"},
		{CopyRows(dev, batch, db, 0, 6, sb, 0, 4, 8, 8, 3), "source holds"},
		{CopyRows(dev, batch, db, 44, 6, sb, 0, 4, 1, 1, 3), "destination holds"},
		{CopyRows(dev, batch, db, 0, 6, db, 0, 6, 1, 1, 3), "share a buffer"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%v, want an error with %q", c.err, c.want)
		}
	}
}
