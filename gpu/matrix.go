package gpu

import (
	"fmt"
	"math"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/vulkan"
)

// Matrix is a row-major matrix in a device buffer: element (i, j) is
// element Off + i·Ld + j of Buf, a float32 (Prec gemm.F32) or a bfloat16
// (gemm.BF16: two to a 32-bit word, the lower half first). A Matrix is a
// view: several may share a buffer (a weight's slices, a tensor's rows).
type Matrix struct {
	Buf        *vulkan.Buffer
	Prec       gemm.Precision
	Rows, Cols int
	Ld         int // leading dimension in elements, ≥ Cols
	Off        int // first element
}

// elemBytes is the size of an element of precision p.
func elemBytes(p gemm.Precision) int64 {
	if p == gemm.BF16 {
		return 2
	}
	return 4
}

// matrixBytes is the buffer of a dense matrix of n elements of precision
// prec: padded to whole 32-bit words.
func matrixBytes(prec gemm.Precision, n int64) int64 { return (n*elemBytes(prec) + 3) &^ 3 }

// NewMatrix allocates a zeroed, dense rows×cols matrix of precision prec
// on dev (its buffer padded to whole 32-bit words).
func NewMatrix(dev *vulkan.Device, prec gemm.Precision, rows, cols int) (Matrix, error) {
	if rows <= 0 || cols <= 0 || rows > maxIndex || cols > maxIndex {
		return Matrix{}, fmt.Errorf("gpu: NewMatrix: %d×%d: want 1 … %d rows and columns", rows, cols, maxIndex)
	}
	n := int64(rows) * int64(cols)
	if n > maxIndex {
		return Matrix{}, fmt.Errorf("gpu: NewMatrix: %d×%d: more than %d elements", rows, cols, maxIndex)
	}
	buf, err := dev.Alloc(matrixBytes(prec, n))
	if err != nil {
		return Matrix{}, fmt.Errorf("gpu: NewMatrix %d×%d %v: %w", rows, cols, prec, err)
	}
	return Matrix{Buf: buf, Prec: prec, Rows: rows, Cols: cols, Ld: cols}, nil
}

// UploadF32 allocates a float32 rows×cols matrix holding v (row-major,
// dense).
func UploadF32(dev *vulkan.Device, rows, cols int, v []float32) (Matrix, error) {
	if len(v) != rows*cols {
		return Matrix{}, fmt.Errorf("gpu: UploadF32: %d values for %d×%d", len(v), rows, cols)
	}
	m, err := NewMatrix(dev, gemm.F32, rows, cols)
	if err != nil {
		return Matrix{}, err
	}
	if err := dev.UploadFloat32s(m.Buf, 0, v); err != nil {
		m.Buf.Free()
		return Matrix{}, fmt.Errorf("gpu: UploadF32 %d×%d: %w", rows, cols, err)
	}
	return m, nil
}

// UploadBF16 allocates a bfloat16 rows×cols matrix holding the bfloat16
// bits v (row-major, dense).
func UploadBF16(dev *vulkan.Device, rows, cols int, v []uint16) (Matrix, error) {
	if len(v) != rows*cols {
		return Matrix{}, fmt.Errorf("gpu: UploadBF16: %d values for %d×%d", len(v), rows, cols)
	}
	m, err := NewMatrix(dev, gemm.BF16, rows, cols)
	if err != nil {
		return Matrix{}, err
	}
	if len(v)%2 == 1 {
		v = append(v[:len(v):len(v)], 0) // whole words
	}
	if err := dev.UploadUint16s(m.Buf, 0, v); err != nil {
		m.Buf.Free()
		return Matrix{}, fmt.Errorf("gpu: UploadBF16 %d×%d: %w", rows, cols, err)
	}
	return m, nil
}

// span returns the element range [first, end) the matrix touches.
func (m Matrix) span() (first, end int64) {
	return int64(m.Off), int64(m.Off) + int64(m.Rows-1)*int64(m.Ld) + int64(m.Cols)
}

// check returns an error unless m is a valid matrix of precision prec
// (any precision for prec < 0) in its buffer, naming it what.
func (m Matrix) check(what string, prec int) error {
	switch {
	case m.Buf == nil:
		return fmt.Errorf("%s: no buffer", what)
	case prec >= 0 && m.Prec != gemm.Precision(prec):
		return fmt.Errorf("%s is %v, want %v", what, m.Prec, gemm.Precision(prec))
	case m.Prec != gemm.F32 && m.Prec != gemm.BF16:
		return fmt.Errorf("%s: precision %d", what, m.Prec)
	case m.Rows <= 0 || m.Cols <= 0 || m.Rows > maxIndex || m.Cols > maxIndex:
		return fmt.Errorf("%s is %d×%d: want 1 … %d rows and columns", what, m.Rows, m.Cols, maxIndex)
	case m.Ld < m.Cols || m.Ld > maxIndex:
		return fmt.Errorf("%s: leading dimension %d for %d columns", what, m.Ld, m.Cols)
	case m.Off < 0:
		return fmt.Errorf("%s: offset %d", what, m.Off)
	}
	_, end := m.span()
	if end > maxIndex || (end*elemBytes(m.Prec)+3)&^3 > m.Buf.Size() {
		return fmt.Errorf("%s (%d×%d, leading dimension %d, offset %d, %v) ends at element %d, beyond its buffer of %d bytes", what, m.Rows, m.Cols, m.Ld, m.Off, m.Prec, end, m.Buf.Size())
	}
	return nil
}

// maxIndex bounds element indices: the shaders index 32-bit words with
// 32-bit unsigned integers.
const maxIndex = 1<<31 - 1

// words downloads the 32-bit words holding the matrix's elements and
// returns them with the word index of the first.
func (m Matrix) words(dev *vulkan.Device) ([]uint32, int64, error) {
	if err := m.check("matrix", -1); err != nil {
		return nil, 0, fmt.Errorf("gpu: download: %w", err)
	}
	first, end := m.span()
	if m.Prec == gemm.BF16 {
		first, end = first/2, (end+1)/2
	}
	w := make([]uint32, end-first)
	if err := dev.DownloadUint32s(m.Buf, 4*first, w); err != nil {
		return nil, 0, fmt.Errorf("gpu: download %d×%d %v: %w", m.Rows, m.Cols, m.Prec, err)
	}
	return w, first, nil
}

// DownloadF32 returns a float32 matrix's elements, row-major and dense.
func (m Matrix) DownloadF32(dev *vulkan.Device) ([]float32, error) {
	if m.Prec != gemm.F32 {
		return nil, fmt.Errorf("gpu: DownloadF32 of a %v matrix", m.Prec)
	}
	w, first, err := m.words(dev)
	if err != nil {
		return nil, err
	}
	v := make([]float32, 0, m.Rows*m.Cols)
	for i := 0; i < m.Rows; i++ {
		row := int64(m.Off+i*m.Ld) - first
		for _, x := range w[row : row+int64(m.Cols)] {
			v = append(v, math.Float32frombits(x))
		}
	}
	return v, nil
}

// DownloadBF16 returns a bfloat16 matrix's elements (bits), row-major and
// dense.
func (m Matrix) DownloadBF16(dev *vulkan.Device) ([]uint16, error) {
	if m.Prec != gemm.BF16 {
		return nil, fmt.Errorf("gpu: DownloadBF16 of a %v matrix", m.Prec)
	}
	w, first, err := m.words(dev)
	if err != nil {
		return nil, err
	}
	v := make([]uint16, 0, m.Rows*m.Cols)
	for i := 0; i < m.Rows; i++ {
		for j := 0; j < m.Cols; j++ {
			e := int64(m.Off+i*m.Ld+j) - 2*first
			v = append(v, uint16(w[e/2]>>(16*(e%2))))
		}
	}
	return v, nil
}
