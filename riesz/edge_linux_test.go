//go:build linux

package riesz

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"
)

// edgeAlloc hands out slices that end exactly at an inaccessible page, so
// that an epilogue reading or writing one element past the end faults.
type edgeAlloc struct {
	t    *testing.T
	maps [][]byte
}

func (e *edgeAlloc) bytes(n int) unsafe.Pointer {
	page := syscall.Getpagesize()
	size := (n+page-1)/page*page + page
	m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		e.t.Fatalf("mmap: %v", err)
	}
	if err := syscall.Mprotect(m[size-page:], syscall.PROT_NONE); err != nil {
		e.t.Fatalf("mprotect: %v", err)
	}
	e.maps = append(e.maps, m)
	return unsafe.Pointer(&m[size-page-n])
}

func (e *edgeAlloc) f32(n int) []float32 {
	if n == 0 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(e.bytes(4*n)), n)
}

func (e *edgeAlloc) f64(n int) []float64 {
	if n == 0 {
		return []float64{}
	}
	return unsafe.Slice((*float64)(e.bytes(8*n)), n)
}

func (e *edgeAlloc) i32(n int) []int32 {
	if n == 0 {
		return []int32{}
	}
	return unsafe.Slice((*int32)(e.bytes(4*n)), n)
}

func (e *edgeAlloc) u16(n int) []uint16 {
	if n == 0 {
		return []uint16{}
	}
	return unsafe.Slice((*uint16)(e.bytes(2*n)), n)
}

func (e *edgeAlloc) free() {
	for _, m := range e.maps {
		syscall.Munmap(m)
	}
}

// TestEpiloguesStayInBounds runs every epilogue on operands that end at an
// inaccessible page: the masked tails must not touch memory past the end,
// not even for loads whose lanes are discarded. compress also gets bits set
// past the end of the row, which it must ignore.
func TestEpiloguesStayInBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	for _, n := range epiLengths {
		e := &edgeAlloc{t: t}
		fillE := func(v []float32) []float32 {
			for i := range v {
				v[i] = float32(rng.Float64())
			}
			return v
		}
		row, nb, inv := fillE(e.f32(n)), fillE(e.f32(n)), fillE(e.f32(n))
		na := fillE(e.f32(1))
		os, osn, om := e.f64(1), e.f64(1), e.f32(1)
		for _, pow := range []int{1, 2, 4} {
			epiTileStats(row, n, 1, n, na, nb, inv, 1, 0.5, pow, os, osn, om)
			epiTileStats(row, n, 1, n, na, nb, nil, 1, 0.5, pow, os, osn, om)
			epiTileFromDots(row, n, 1, n, na, nb, 1, 0.5, pow)
		}
		epiRowStats(row, inv)
		epiRowSumCols(row, nil)
		epiRowSumCols(row, e.f64(n))
		acc, rem, cross := e.f64(n), e.f64(n), e.i32(n)
		epiScanRow(row, acc, rem, cross, 1)
		epiScanRows4(row, nb, inv, fillE(e.f32(n)), acc, rem, cross, 1)
		bits := e.u16((n + 15) / 16)
		var cols []int32
		for j := 0; j < n; j += 2 {
			cols = append(cols, int32(j))
			bits[j>>4] |= 1 << (j & 15)
		}
		for i := range bits {
			bits[i] |= 0xaaaa // odd columns too, and columns past n
		}
		if n > 0 {
			epiCompress(row, bits, cols, e.f32(n+16))
		}
		e.free()
	}
}
