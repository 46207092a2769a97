package gpu

import (
	"fmt"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/vulkan"
)

// CopyRows records a strided copy of 32-bit words (shaders/copy_rows.comp:
// no arithmetic, the bits as they are): rows rows of cols words of src,
// row r at word srcOff + r·srcLd, to dst, row r at dstOff + r·dstLd, and
// zeros in dst's rows rows … zrows−1.
func CopyRows(dev *vulkan.Device, batch *vulkan.Batch, dst *vulkan.Buffer, dstOff, dstLd int, src *vulkan.Buffer, srcOff, srcLd, rows, zrows, cols int) error {
	if rows < 0 || zrows < rows || cols < 0 || dstOff < 0 || srcOff < 0 || (zrows > 1 && dstLd < cols) || (rows > 1 && srcLd < cols) {
		return fmt.Errorf("gpu: CopyRows: %d of %d rows of %d words, source offset %d stride %d, destination offset %d stride %d", rows, zrows, cols, srcOff, srcLd, dstOff, dstLd)
	}
	if zrows == 0 || cols == 0 {
		return nil
	}
	if err := checkElems("destination", dst, int64(dstOff)+int64(zrows-1)*int64(dstLd)+int64(cols), 4, "words"); err != nil {
		return fmt.Errorf("gpu: CopyRows: %w", err)
	}
	if rows > 0 {
		if err := checkElems("source", src, int64(srcOff)+int64(rows-1)*int64(srcLd)+int64(cols), 4, "words"); err != nil {
			return fmt.Errorf("gpu: CopyRows: %w", err)
		}
	} else {
		src = dst // an unused binding
	}
	if src == dst {
		if rows > 0 {
			return fmt.Errorf("gpu: CopyRows: source and destination share a buffer")
		}
	}
	const local = 256
	g, err := grid(dev, int64(zrows)*int64(cols), local)
	if err != nil {
		return fmt.Errorf("gpu: CopyRows: %w", err)
	}
	k, err := newKernel(dev, "copy_rows", vulkan.KernelSpec{Name: "copy_rows", Bindings: 2, PushSize: 28, Spec: []uint32{local}})
	if err != nil {
		return fmt.Errorf("gpu: CopyRows: %w", err)
	}
	batch.Dispatch(k, g, words(uint32(rows), uint32(zrows), uint32(cols), uint32(srcOff), uint32(srcLd), uint32(dstOff), uint32(dstLd)), src, dst)
	return nil
}

// WriteRows records on be, the Backend of this bank's device, rows rows of
// the bank as attention reads them into rows row0 … row0+rows−1 of k and v
// ([S][Heads][KeyDim], [S][Heads][ValueDim]): row i holds every head's
// i-th stored key and value, zeros where a head holds i states or fewer —
// bank.Bank.Interleaved's values, copied on the device from the states it
// keeps (memory's planned DensityKV context; memory.DeviceRows).
func (p *BankPasses) WriteRows(be compute.Backend, k, v compute.Tensor, row0, rows int) error {
	b, ok := be.(*Backend)
	if !ok || b.dev != p.dev {
		return fmt.Errorf("gpu: bank rows: the bank is on %v, the backend is %v", p.dev, be)
	}
	H := len(p.heads)
	ts := b.tensors("bank rows", compute.Need{Name: "keys", T: k, N: (row0 + rows) * H * p.dk}, compute.Need{Name: "values", T: v, N: (row0 + rows) * H * p.dv})
	if ts == nil {
		return b.err
	}
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	for h := range p.heads {
		hd := &p.heads[h]
		n := min(hd.n, rows)
		for i, c := range []struct {
			src   *vulkan.Buffer
			width int
		}{{hd.keys[hd.cur], p.dk}, {hd.vals[hd.cur], p.dv}} {
			t := ts[i]
			if err := CopyRows(b.dev, b.batch, t.buf, t.off+(row0*H+h)*c.width, H*c.width, c.src, 0, c.width, n, rows, c.width); err != nil {
				b.fail("bank rows", err)
				return b.err
			}
		}
	}
	return nil
}
