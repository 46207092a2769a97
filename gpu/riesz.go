package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/densitykv/densitykv/riesz"
	"github.com/densitykv/densitykv/vulkan"
)

// RieszMaxD is the largest vector dimension of the Soft-Riesz passes.
const RieszMaxD = 256

// rieszRows returns the rows of a per workgroup of the Soft-Riesz pass for
// dimension d: the most (16, 8, …, 1) whose shared memory (the rows, a
// tile of interactions, the lanes) the device has.
func rieszRows(dev *vulkan.Device, d int) int {
	if testRows > 0 {
		return testRows
	}
	rows := 16
	for rows > 1 && int64(rows)*int64(4*d+4*riesz.TileCols+16*(8+8+4)) > int64(dev.Info().MaxSharedMemory) {
		rows /= 2
	}
	return rows
}

// RieszSet is a riesz.Set in device memory: X holds N vectors of dimension
// D as float32 values ([N][D], row-major), Norms their N squared norms
// (float32, as riesz.Norms computes them). BF16 marks a set of bfloat16
// values (a bank's BF16 keys): the kernels round X to bfloat16 operands,
// so X may hold the bfloat16 values widened to float32. Two BF16 sets take
// gemm's bfloat16 product, two float32 sets its float32 product.
type RieszSet struct {
	X, Norms *vulkan.Buffer
	N, D     int
	BF16     bool
}

// RieszRowStats records into batch the exact-mode equivalent of
//
//	k.RowStats(a, b, inv, sum, mean, max, ws)
//
// for exponents p = 1, 2, 4: for every row x of a, sum[x] += Σ_i W[x][i],
// mean[x] = (1/|b|) Σ_i W[x][i]·inv[i], max[x] = max_i W[x][i]·inv[i]
// (W[x][i] = w(a_x, b_i)), with the CPU's bits: the same products, the
// epilogue's interaction, its lane sums per 512-column tile and the tiles
// in order. inv is float32 [b.N]; sum, mean and max are float64 [a.N]
// (sum read and added to). The device needs shaderFloat64. Like Attention, it
// runs the exactness probe and uses fma() only where the probe found it
// exact.
func RieszRowStats(dev *vulkan.Device, batch *vulkan.Batch, k riesz.Kernel, a, b RieszSet, inv, sum, mean, max *vulkan.Buffer) error {
	module, err := exactModule(dev, "riesz_rowstats")
	if err != nil {
		return err
	}
	return rieszPass(dev, batch, module, k, a, b, inv, sum, mean, max)
}

// RieszRowSums records into batch the exact-mode equivalent of
//
//	k.Sums(a, b, rows, nil, ws)
//
// for p = 1, 2, 4: rows[x] += Σ_i w(a_x, b_i) (float64 [a.N]), with the
// CPU's bits (see RieszRowStats).
func RieszRowSums(dev *vulkan.Device, batch *vulkan.Batch, k riesz.Kernel, a, b RieszSet, rows *vulkan.Buffer) error {
	module, err := exactModule(dev, "riesz_rowstats")
	if err != nil {
		return err
	}
	return rieszPass(dev, batch, module, k, a, b, nil, rows, nil, nil)
}

// rieszPass records module (riesz_rowstats or riesz_rowstats_softfma):
// with inv, RowStats; without, row sums.
func rieszPass(dev *vulkan.Device, batch *vulkan.Batch, module string, k riesz.Kernel, a, b RieszSet, inv, sum, mean, max *vulkan.Buffer) error {
	return rieszPassCached(dev, batch, module, k, a, b, inv, sum, mean, max, nil)
}

// rieszPassCached is rieszPass that also writes W into cache (not nil).
func rieszPassCached(dev *vulkan.Device, batch *vulkan.Batch, module string, k riesz.Kernel, a, b RieszSet, inv, sum, mean, max, cache *vulkan.Buffer) error {
	op := "RieszRowSums"
	switch {
	case cache != nil:
		op = "RieszRowStatsCached"
	case inv != nil:
		op = "RieszRowStats"
	}
	pw, err := checkRiesz(dev, k, a, b, inv, sum, mean, max)
	if err != nil {
		return fmt.Errorf("gpu: %s: %w", op, err)
	}
	if cache != nil && a.N > 0 {
		if err := checkElems("cache", cache, int64(a.N)*int64(b.N), 4, "float32"); err != nil {
			return fmt.Errorf("gpu: %s: %w", op, err)
		}
		for _, in := range []*vulkan.Buffer{a.X, a.Norms, b.X, b.Norms, inv, sum, mean, max} {
			if cache == in {
				return fmt.Errorf("gpu: %s: cache shares a buffer with another operand", op)
			}
		}
	}
	if a.N == 0 {
		return nil
	}
	if b.N == 0 {
		// No interactions: sum unchanged, mean and max 0 (as the CPU).
		if inv != nil {
			batch.Fill(mean, 0, 8*int64(a.N), 0)
			batch.Fill(max, 0, 8*int64(a.N), 0)
		}
		return nil
	}
	rows := rieszRows(dev, a.D)
	kern, err := newKernel(dev, module, vulkan.KernelSpec{Name: module, Bindings: 9, PushSize: 40, Spec: []uint32{uint32(rows), uint32(a.D)}})
	if err != nil {
		return fmt.Errorf("gpu: %s: %w", op, err)
	}
	bf16, hasInv := uint32(0), uint32(1)
	if a.BF16 {
		bf16 = 1
	}
	if inv == nil {
		// Unused bindings of the row-sum pass: any buffers.
		inv, mean, max, hasInv = a.Norms, sum, sum, 0
	}
	invS2 := float32(1 / (k.Sigma() * k.Sigma())) // riesz.New's
	hasCache := uint32(0)
	if cache != nil {
		hasCache = 1
	} else {
		cache = sum // unused binding
	}
	push := words(uint32(a.N), uint32(b.N), uint32(pw), bf16, hasInv,
		math.Float32bits(float32(k.Eps())), math.Float32bits(invS2), hasCache, 0, 0)
	binary.LittleEndian.PutUint64(push[32:], math.Float64bits(1/float64(b.N)))
	groups := [3]uint32{uint32((a.N + rows - 1) / rows), 1, 1}
	batch.Dispatch(kern, groups, push, a.X, a.Norms, b.X, b.Norms, inv, sum, mean, max, cache)
	return nil
}

// checkRiesz validates a pass and returns the exponent as an integer.
func checkRiesz(dev *vulkan.Device, k riesz.Kernel, a, b RieszSet, inv, sum, mean, max *vulkan.Buffer) (int, error) {
	pw := 0
	switch k.P() {
	case 1, 2, 4:
		pw = int(k.P())
	default:
		return 0, fmt.Errorf("exponent p = %v: exact mode has p = 1, 2 and 4 (the CPU computes other exponents with float64 math.Pow)", k.P())
	}
	if k.Sigma() == 0 {
		return 0, fmt.Errorf("a zero riesz.Kernel: construct it with riesz.New")
	}
	for _, s := range []struct {
		name string
		set  RieszSet
	}{{"a", a}, {"b", b}} {
		if s.set.N < 0 || s.set.D <= 0 || s.set.D > RieszMaxD {
			return 0, fmt.Errorf("set %s has N=%d D=%d: want N ≥ 0 and 1 ≤ D ≤ %d", s.name, s.set.N, s.set.D, RieszMaxD)
		}
		if s.set.N == 0 {
			continue
		}
		if err := checkElems(s.name+".X", s.set.X, int64(s.set.N)*int64(s.set.D), 4, "float32"); err != nil {
			return 0, err
		}
		if err := checkElems(s.name+".Norms", s.set.Norms, int64(s.set.N), 4, "float32"); err != nil {
			return 0, err
		}
	}
	if a.D != b.D {
		return 0, fmt.Errorf("dimensions %d and %d differ", a.D, b.D)
	}
	if a.BF16 != b.BF16 {
		return 0, fmt.Errorf("a pass over a set with BF16=%v and one with BF16=%v", a.BF16, b.BF16)
	}
	if a.N == 0 {
		return pw, nil
	}
	names, outs := []string{"sum"}, []*vulkan.Buffer{sum}
	if inv != nil {
		if err := checkElems("inv", inv, int64(b.N), 4, "float32"); err != nil {
			return 0, err
		}
		names, outs = append(names, "mean", "max"), append(outs, mean, max)
	}
	for i, o := range outs {
		if err := checkElems(names[i], o, int64(a.N), 8, "float64"); err != nil {
			return 0, err
		}
		if o == a.X || o == a.Norms || o == b.X || o == b.Norms || o == inv {
			return 0, fmt.Errorf("output %s shares a buffer with an input", names[i])
		}
	}
	if inv != nil && (sum == mean || sum == max || mean == max) {
		return 0, fmt.Errorf("sum, mean and max must be three buffers")
	}
	if b.N > 0 && !dev.Info().Float64 {
		return 0, fmt.Errorf("device %v lacks shaderFloat64 (the row sums are float64, as the CPU's)", dev)
	}
	if g := (a.N + rieszRows(dev, a.D) - 1) / rieszRows(dev, a.D); uint64(g) > uint64(dev.Info().MaxWorkgroupCount[0]) && dev.Info().MaxWorkgroupCount[0] > 0 {
		return 0, fmt.Errorf("%d rows need %d workgroups, beyond the device's %d", a.N, g, dev.Info().MaxWorkgroupCount[0])
	}
	return pw, nil
}

// RieszNorms records into batch the exact-mode equivalent of
//
//	riesz.Norms(dst, x, n, d)
//
// dst[i] = |x_i|² (float32 [n]) for the n rows of x (float32 [n][d]), with
// the CPU's bits: per row the float32 sum in order of the rounded squares.
func RieszNorms(dev *vulkan.Device, batch *vulkan.Batch, dst, x *vulkan.Buffer, n, d int) error {
	switch {
	case n < 0 || d < 0:
		return fmt.Errorf("gpu: RieszNorms: negative size n=%d d=%d", n, d)
	case n == 0:
		return nil
	case dst == x:
		return fmt.Errorf("gpu: RieszNorms: dst shares a buffer with x")
	}
	if err := checkElems("x", x, int64(n)*int64(d), 4, "float32"); err != nil {
		return fmt.Errorf("gpu: RieszNorms: %w", err)
	}
	if err := checkElems("dst", dst, int64(n), 4, "float32"); err != nil {
		return fmt.Errorf("gpu: RieszNorms: %w", err)
	}
	if _, err := CheckExact(dev); err != nil {
		return err
	}
	kern, err := newKernel(dev, "riesz_norms", vulkan.KernelSpec{Name: "riesz_norms", Bindings: 2, PushSize: 8})
	if err != nil {
		return fmt.Errorf("gpu: RieszNorms: %w", err)
	}
	groups := uint32((n + 63) / 64)
	batch.Dispatch(kern, [3]uint32{min(groups, 1024), (groups + 1023) / 1024, 1}, words(uint32(n), uint32(d)), dst, x)
	return nil
}

// RieszRowStatsCached is RieszRowStats that also writes the interaction
// matrix W[x][i] = w(a_x, b_i) into cache (float32 [a.N][b.N], row stride
// b.N), as k.RowStatsCached: for a later RieszScanRows.
func RieszRowStatsCached(dev *vulkan.Device, batch *vulkan.Batch, k riesz.Kernel, a, b RieszSet, inv, sum, mean, max, cache *vulkan.Buffer) error {
	if cache == nil {
		return fmt.Errorf("gpu: RieszRowStatsCached: cache is nil")
	}
	module, err := exactModule(dev, "riesz_rowstats")
	if err != nil {
		return err
	}
	return rieszPassCached(dev, batch, module, k, a, b, inv, sum, mean, max, cache)
}

// RieszScanRows records into batch the exact-mode equivalent of
//
//	riesz.ScanRows(w, m, rows, rem, cross, every, ckpt, ws)
//
// (equal to k.PrefixScan over the candidates rows[0], rows[1], … in that
// order): w is a cached interaction matrix (float32, wrows rows of m), rows
// int32 [n], rem float64 [m] (the headrooms), cross int32 [m] (written),
// ckpt float64 [(n/every)·m], with one more slot of m for the final sums
// when n is not a multiple of every and the buffer holds it (as the CPU's
// len(ckpt)). every is 0 or a multiple of riesz.TileRows. The row indices
// are on the device and not checked here: one outside [0, wrows) makes
// the kernel set every cross[j] to −1 (the CPU panics).
func RieszScanRows(dev *vulkan.Device, batch *vulkan.Batch, w *vulkan.Buffer, wrows, m int, rows *vulkan.Buffer, n int, rem, cross *vulkan.Buffer, every int, ckpt *vulkan.Buffer) error {
	final, err := checkScan(w, wrows, m, rows, n, rem, cross, every, ckpt)
	if err != nil {
		return fmt.Errorf("gpu: RieszScanRows: %w", err)
	}
	if m == 0 {
		return nil
	}
	if _, err := CheckExact(dev); err != nil {
		return err
	}
	if !dev.Info().Float64 {
		return fmt.Errorf("gpu: RieszScanRows: device %v lacks shaderFloat64 (the sums are float64, as the CPU's)", dev)
	}
	kern, err := newKernel(dev, "riesz_scan", vulkan.KernelSpec{Name: "riesz_scan", Bindings: 5, PushSize: 20})
	if err != nil {
		return fmt.Errorf("gpu: RieszScanRows: %w", err)
	}
	fin := uint32(0)
	if final {
		fin = 1
	}
	if ckpt == nil {
		ckpt = cross // unused binding
	}
	if rows == nil {
		rows = cross // n = 0: unused binding
	}
	groups := uint32((m + 63) / 64)
	push := words(uint32(n), uint32(m), uint32(wrows), uint32(every), fin)
	batch.Dispatch(kern, [3]uint32{min(groups, 1024), (groups + 1023) / 1024, 1}, push, w, rows, rem, cross, ckpt)
	return nil
}

// checkScan validates RieszScanRows and returns whether the final sums
// have a checkpoint slot.
func checkScan(w *vulkan.Buffer, wrows, m int, rows *vulkan.Buffer, n int, rem, cross *vulkan.Buffer, every int, ckpt *vulkan.Buffer) (final bool, err error) {
	switch {
	case wrows < 0 || m < 0 || n < 0:
		return false, fmt.Errorf("negative size: %d×%d matrix, %d rows", wrows, m, n)
	case every < 0 || every%riesz.TileRows != 0:
		return false, fmt.Errorf("checkpoint interval %d is not a multiple of %d", every, riesz.TileRows)
	case m == 0:
		return false, nil
	}
	if err := checkElems("w", w, int64(wrows)*int64(m), 4, "float32"); err != nil {
		return false, err
	}
	if n > 0 {
		if err := checkElems("rows", rows, int64(n), 4, "int32"); err != nil {
			return false, err
		}
	}
	if err := checkElems("rem", rem, int64(m), 8, "float64"); err != nil {
		return false, err
	}
	if err := checkElems("cross", cross, int64(m), 4, "int32"); err != nil {
		return false, err
	}
	if cross == w || cross == rows || cross == rem || (ckpt != nil && (ckpt == w || ckpt == rows || ckpt == rem || ckpt == cross)) {
		return false, fmt.Errorf("an output shares a buffer with another operand")
	}
	if every == 0 {
		return false, nil
	}
	slots := int64(n / every)
	if err := checkElems("ckpt", ckpt, slots*int64(m), 8, "float64"); err != nil {
		return false, err
	}
	return n%every != 0 && ckpt.Size() >= 8*(slots+1)*int64(m), nil
}
