package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gpu/internal/spirv"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// halfValue is the value of float16 bits.
func halfValue(h uint16) float64 {
	e, m := int(h>>10)&0x1f, float64(h&0x3ff)
	var v float64
	switch e {
	case 0:
		v = math.Ldexp(m, -24)
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		v = math.Inf(1)
	default:
		v = math.Ldexp(1024+m, e-25)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// refHalf rounds v (finite, |v| < 2^15) to the nearest float16, ties to
// even, in float64 arithmetic: the definition fastHalf's integer steps
// must meet.
func refHalf(v float64) uint16 {
	sign := uint16(0)
	if math.Signbit(v) {
		sign, v = 0x8000, -v
	}
	if v == 0 {
		return sign
	}
	_, e := math.Frexp(v) // v = f·2^e, f in [0.5, 1)
	ulp := math.Ldexp(1, max(e-11, -24))
	q := math.RoundToEven(v / ulp)
	r := q * ulp
	if r == 0 {
		return sign
	}
	// Encode r: subnormal below 2^-14.
	if r < 0x1p-14 {
		return sign | uint16(r/0x1p-24)
	}
	_, e = math.Frexp(r)
	m := r/math.Ldexp(1, e-1) - 1 // in [0, 1)
	return sign | uint16(e-1+15)<<10 | uint16(math.Round(m*1024))
}

// TestFastHalf checks the host's conversion (fastHalf, which PrepFast's
// shader repeats) against float64 arithmetic for every bfloat16 value at
// every scale that keeps it below 2^15, and fastScale's choice: the row's
// largest value lands in [2^14, 2^15) and every value within 2^-31 of it
// converts exactly.
func TestFastHalf(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		op := uint16(h)
		if op&0x7f80 == 0 {
			op &= 0x8000
		}
		e := int(op>>7) & 0xff
		v := float64(gemm.BF16ToFloat32(op))
		for _, s := range []int{-113, -60, -1, 0, 1, 20, 60, 126} {
			got := fastHalf(op, s)
			switch {
			case e == 0xff && op&0x7f != 0:
				if got&0x7c00 != 0x7c00 || got&0x3ff == 0 || got&0x8000 != op&0x8000 {
					t.Fatalf("NaN %#04x at scale %d: %#04x", op, s, got)
				}
				continue
			case e == 0xff:
				if got != op&0x8000|0x7c00 {
					t.Fatalf("Inf %#04x: %#04x", op, got)
				}
				continue
			case e-127+s > 14:
				continue // above any row maximum fastScale allows
			}
			want := refHalf(math.Ldexp(v, s))
			if got != want {
				t.Fatalf("fastHalf(%#04x (%g), %d) = %#04x (%g), want %#04x (%g)", op, v, s, got, halfValue(got), want, halfValue(want))
			}
			if e != 0 && e-127+s >= -17 && halfValue(got) != math.Ldexp(v, s) {
				t.Fatalf("fastHalf(%#04x, %d) = %g, not exact (%g)", op, s, halfValue(got), math.Ldexp(v, s))
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		k := 1 + r.IntN(40)
		row := make([]uint16, k)
		for i := range row {
			row[i] = gemm.RoundBF16(float32(math.Ldexp(r.NormFloat64(), r.IntN(250)-125)))
		}
		s := fastScale(row)
		top := 0.0
		for _, h := range row {
			if e := int(h>>7) & 0xff; e != 0 && e != 0xff {
				top = math.Max(top, math.Abs(float64(gemm.BF16ToFloat32(h))))
			}
		}
		if top == 0 {
			continue
		}
		if sc := math.Ldexp(top, s); s < 126 && (sc < 0x1p14 || sc >= 0x1p15) {
			t.Fatalf("row max %g scaled by 2^%d = %g, want [2^14, 2^15)", top, s, sc)
		}
		for _, h := range row {
			v := math.Abs(float64(gemm.BF16ToFloat32(h)))
			if v >= top*0x1p-31 && v != 0 && h&0x7f80 != 0 && halfValue(fastHalf(h, s)) != math.Ldexp(float64(gemm.BF16ToFloat32(h)), s) {
				t.Fatalf("%g (row max %g) is not exact at scale %d", v, top, s)
			}
		}
	}
}

// fastRows draws a rows×k float32 matrix whose rows span wide and
// different magnitudes (row r around 2^sc, sc in −30 … 29: products stay
// within float32), with special values
// when specials is set.
func fastRows(r *rand.Rand, rows, k int, specials bool) []float32 {
	v := make([]float32, rows*k)
	for i := 0; i < rows; i++ {
		sc := r.IntN(60) - 30
		for q := 0; q < k; q++ {
			x := float32(math.Ldexp(r.NormFloat64(), sc+r.IntN(24)-12))
			if specials {
				switch r.IntN(40) {
				case 0:
					x = 0
				case 1:
					x = float32(math.Copysign(0, -1))
				case 2:
					x = float32(math.Ldexp(r.NormFloat64(), sc-40)) // below the exact window
				case 3:
					x = math.Float32frombits(0x00012345) // denormal
				}
			}
			v[i*k+q] = x
		}
	}
	return v
}

// TestFastPrep: PrepFast on the device writes the host's bits
// (fastWordsOf of gemm.BF16OperandBits) for rows of every kind: wide
// magnitudes, zeros, denormals, values below the exact window, Inf and
// NaN, rows all zero, depths not a multiple of 8, a source at an offset
// with a leading dimension.
func TestFastPrep(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ rows, k, ld, off int }{{1, 1, 1, 0}, {3, 7, 9, 5}, {5, 8, 8, 0}, {7, 33, 40, 3}, {70, 129, 129, 0}, {2, 300, 301, 1}} {
		t.Run(fmt.Sprintf("%dx%d", c.rows, c.k), func(t *testing.T) {
			v := fastRows(r, c.rows, c.k, true)
			if c.rows > 2 {
				for q := 0; q < c.k; q++ {
					v[q] = 0 // a zero row
				}
				v[c.k] = float32(math.Inf(-1))
				v[2*c.k] = float32(math.NaN())
			}
			src := make([]float32, c.off+c.rows*c.ld)
			for i := range src {
				src[i] = float32(math.NaN())
			}
			for i := 0; i < c.rows; i++ {
				copy(src[c.off+i*c.ld:], v[i*c.k:(i+1)*c.k])
			}
			sm, err := UploadF32(dev, 1, len(src), src)
			if err != nil {
				t.Fatal(err)
			}
			defer sm.Buf.Free()
			dst, err := NewFastOperand(dev, c.rows, c.k)
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Buf.Free()
			batch := dev.NewBatch()
			if err := PrepFast(dev, batch, dst, Matrix{Buf: sm.Buf, Prec: gemm.F32, Rows: c.rows, Cols: c.k, Ld: c.ld, Off: c.off}); err != nil {
				t.Fatal(err)
			}
			if err := batch.Run(); err != nil {
				t.Fatal(err)
			}
			got := make([]uint32, fastWords(c.rows, c.k))
			if err := dev.DownloadUint32s(dst.Buf, 0, got); err != nil {
				t.Fatal(err)
			}
			bits := make([]uint16, len(v))
			gemm.BF16OperandBits(bits, v)
			want := fastWordsOf(c.rows, c.k, bits)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("word %d of %d: %#08x on %v, %#08x on the host", i, len(want), got[i], dev, want[i])
				}
			}
		})
	}
}

// fastTol is the fast product's tolerance for one element: float32
// accumulation of k exact products, |Δ| ≤ (k+2)·2^-23·Σ|a·b| (twice the
// sequential sum's bound, for accumulators that truncate rather than
// round: tensor cores), plus 2^-39 of the rows' largest values for each
// operand value below the exact window (none in these tests' exact
// cases).
func fastTol(k int, absSum float64) float64 { return float64(k+2) * 0x1p-23 * absSum }

// runFastProduct uploads A, B (float32, rounded to bfloat16 operands by
// UploadFast and PrepFast) and records C = A·Bᵀ into a C with guards
// around it, and compares every element with the float64 sum of the
// operands' products within fastTol; it returns the largest error in
// units of the bound.
func runFastProduct(t *testing.T, dev *vulkan.Device, r *rand.Rand, m, n, k int, emulate bool) float64 {
	t.Helper()
	av, bv := fastRows(r, m, k, false), fastRows(r, n, k, false)
	// Each row's values lie within 2^±12 of its scale (fastRows without
	// specials), inside the exact window: every operand converts exactly.
	ab, bb := make([]uint16, len(av)), make([]uint16, len(bv))
	gemm.BF16OperandBits(ab, av)
	gemm.BF16OperandBits(bb, bv)
	am, err := UploadF32(dev, m, k, av)
	if err != nil {
		t.Fatal(err)
	}
	defer am.Buf.Free()
	a, err := NewFastOperand(dev, m, k)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Buf.Free()
	b, err := UploadFast(dev, n, k, bb)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Buf.Free()
	ldc, offC := n+3, 5
	cw := make([]uint32, offC+m*ldc+7)
	for i := range cw {
		cw[i] = guard
	}
	cb, err := dev.Alloc(4 * int64(len(cw)))
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Free()
	if err := dev.UploadUint32s(cb, 0, cw); err != nil {
		t.Fatal(err)
	}
	batch := dev.NewBatch()
	if err := PrepFast(dev, batch, a, am); err != nil {
		t.Fatal(err)
	}
	c := Matrix{Buf: cb, Prec: gemm.F32, Rows: m, Cols: n, Ld: ldc, Off: offC}
	if err := (FastProduct{C: c, A: a, B: b, Emulate: emulate}).Record(dev, batch); err != nil {
		t.Fatal(err)
	}
	if err := batch.Run(); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, len(cw))
	if err := dev.DownloadUint32s(cb, 0, got); err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for e, w := range got {
		i, j := (e-offC)/ldc, (e-offC)%ldc
		if e < offC || i >= m || j >= n {
			if w != guard {
				t.Fatalf("word %d outside C (%d×%d, ld %d, offset %d) written: %#08x", e, m, n, ldc, offC, w)
			}
			continue
		}
		var ref, abs float64
		for q := 0; q < k; q++ {
			p := float64(gemm.BF16ToFloat32(ab[i*k+q])) * float64(gemm.BF16ToFloat32(bb[j*k+q]))
			ref += p
			abs += math.Abs(p)
		}
		x := float64(math.Float32frombits(w))
		d, tol := math.Abs(x-ref), fastTol(k, abs)
		if !(d <= tol) {
			t.Fatalf("C[%d][%d] = %g, the float64 sum %g: |Δ| %.3g > %.3g (k %d)", i, j, x, ref, d, tol, k)
		}
		if tol > 0 {
			worst = math.Max(worst, d/tol)
		}
	}
	return worst
}

// fastShapes cover one element, whole 16×16 and 64×64 tiles, tile edges
// in M and N, depth tails within the 32-deep stage and within a group of
// 8, and several workgroups in both dimensions.
var fastShapes = [][3]int{{1, 1, 1}, {16, 16, 16}, {64, 64, 32}, {65, 63, 33}, {130, 70, 200}, {37, 129, 8}, {200, 3, 100}, {5, 150, 300}, {17, 17, 7}}

// TestFastProductEmulated runs fast mode's product with the emulated
// multiply (gemm_emu_fast: the same tile loop, staging, edges and scaling
// as the tensor-core module) on this device, lavapipe in CI, against the
// float64 sums within fastTol.
func TestFastProductEmulated(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range fastShapes {
		t.Run(fmt.Sprintf("%dx%dx%d", s[0], s[1], s[2]), func(t *testing.T) {
			w := runFastProduct(t, dev, r, s[0], s[1], s[2], true)
			t.Logf("largest error %.3g of the bound", w)
		})
	}
}

// TestFastProductTensorCores runs the same cases on the tensor-core module
// where FastSupport accepts the device; elsewhere it requires the product
// to be refused, naming VK_NV_cooperative_matrix and the device (it never
// passes as if the tensor cores had run).
func TestFastProductTensorCores(t *testing.T) {
	dev := vulkantest.Open(t)
	if err := FastSupport(dev.Info()); err != nil {
		checkFastRefusal(t, dev, err)
		t.Logf("refused on %v, as it should be: %v", dev, err)
		return
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range fastShapes {
		t.Run(fmt.Sprintf("%dx%dx%d", s[0], s[1], s[2]), func(t *testing.T) {
			w := runFastProduct(t, dev, r, s[0], s[1], s[2], false)
			t.Logf("largest error %.3g of the bound", w)
		})
	}
}

// checkFastRefusal requires err (FastSupport's) to name the extension and
// the device, and NewFastBackend and a tensor-core FastProduct to refuse
// with it.
func checkFastRefusal(t *testing.T, dev *vulkan.Device, err error) {
	t.Helper()
	if !errors.Is(err, ErrNoFastMode) || !strings.Contains(err.Error(), "VK_NV_cooperative_matrix") || !strings.Contains(err.Error(), dev.Info().Name) {
		t.Fatalf("FastSupport's refusal does not name the extension and the device: %v", err)
	}
	if b, err2 := NewFastBackend(dev); err2 == nil || b != nil || err2.Error() != err.Error() {
		t.Fatalf("NewFastBackend on %v: %v, %v; want %v", dev, b, err2, err)
	}
	a, e := NewFastOperand(dev, 1, 1)
	if e != nil {
		t.Fatal(e)
	}
	defer a.Buf.Free()
	c, e := NewMatrix(dev, gemm.F32, 1, 1)
	if e != nil {
		t.Fatal(e)
	}
	defer c.Buf.Free()
	batch := dev.NewBatch()
	if e := (FastProduct{C: c, A: a, B: a}).Record(dev, batch); e == nil || e.Error() != err.Error() || batch.Len() != 0 {
		t.Fatalf("a tensor-core FastProduct on %v: %v (%d recorded); want %v", dev, e, batch.Len(), err)
	}
}

// TestFastSupport: FastSupport's decisions and messages on described
// devices (no device needed).
func TestFastSupport(t *testing.T) {
	good := vulkan.DeviceInfo{Index: 1, Name: "NVIDIA H200", DriverName: "NVIDIA", SubgroupSize: 32, Float16: true, MemoryModel: true,
		MaxWorkgroupInvocations: 1024, MaxSharedMemory: 49152,
		CooperativeMatrixNV: []vulkan.CoopMatrixShape{{M: 16, N: 8, K: 16, A: "float16", B: "float16", C: "float16", Result: "float16", Scope: "subgroup"}, FastShape}}
	if err := FastSupport(good); err != nil {
		t.Fatalf("an H200-like device: %v", err)
	}
	lavapipe := vulkan.DeviceInfo{Index: 0, Name: "llvmpipe (LLVM 15.0.6, 256 bits)", DriverName: "llvmpipe", SubgroupSize: 8, Float16: true, MemoryModel: true,
		MaxWorkgroupInvocations: 1024, MaxSharedMemory: 65536}
	khr := good
	khr.CooperativeMatrixNV, khr.CooperativeMatrix = nil, []vulkan.CoopMatrixShape{{M: 16, N: 16, K: 16, A: "float16", B: "float16", C: "float32", Result: "float32", Scope: "subgroup"}}
	other := good
	other.CooperativeMatrixNV = good.CooperativeMatrixNV[:1]
	noF16 := good
	noF16.Float16, noF16.MemoryModel = false, false
	for _, c := range []struct {
		name string
		d    vulkan.DeviceInfo
		want []string
	}{
		{"lavapipe", lavapipe, []string{"vulkan:0 llvmpipe (LLVM 15.0.6, 256 bits) (llvmpipe) lacks", "VK_NV_cooperative_matrix (it offers no cooperative-matrix extension, KHR or NV)", "32-wide subgroups (its subgroups are 8 wide)", "Exact mode (bf16 or fp32) runs there"}},
		{"KHR only", khr, []string{"vulkan:1 NVIDIA H200", "it offers VK_KHR_cooperative_matrix: 16x16x16 float16*float16+float32=float32 (subgroup), which fast mode's kernel does not use yet"}},
		{"other shapes", other, []string{"the 16x16x16 float16*float16+float32=float32 (subgroup) shape of VK_NV_cooperative_matrix (it offers 16x8x16 float16*float16+float16=float16 (subgroup))"}},
		{"no float16", noF16, []string{"shaderFloat16; the Vulkan memory model"}},
	} {
		err := FastSupport(c.d)
		if !errors.Is(err, ErrNoFastMode) {
			t.Errorf("%s: %v, want ErrNoFastMode", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
}

// TestFastModules: every *_fast module is listed in fastModules (and
// every listed one exists); only the tensor-core module declares
// CooperativeMatrixNV (with Float16 and the Vulkan memory model), the
// others run on any device; no exact module declares it; newKernel
// refuses a fast module.
func TestFastModules(t *testing.T) {
	const capFloat16, capVulkanMemoryModel, capCoopMatrixNV = 9, 5345, 5357
	caps := func(name string) map[uint32]bool {
		m, err := spirv.Parse(modules[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := map[uint32]bool{}
		for _, in := range m.Insts {
			if in.Op == spirv.OpCapability {
				c[in.Args[0]] = true
			}
		}
		return c
	}
	for name := range modules {
		_, listed := fastModules[name]
		if strings.HasSuffix(name, "_fast") != listed {
			t.Errorf("module %s: named fast %v, listed in fastModules %v", name, strings.HasSuffix(name, "_fast"), listed)
		}
		c := caps(name)
		if want := name == "gemm_coopmat_fast"; c[capCoopMatrixNV] != want {
			t.Errorf("module %s: CooperativeMatrixNV declared %v, want %v", name, c[capCoopMatrixNV], want)
		}
		if name == "gemm_coopmat_fast" && (!c[capFloat16] || !c[capVulkanMemoryModel]) {
			t.Errorf("gemm_coopmat_fast: Float16 %v, VulkanMemoryModel %v (FastSupport checks for both)", c[capFloat16], c[capVulkanMemoryModel])
		}
		if (name == "gemm_emu_fast" || name == "gemm_prep_fast") && (c[capFloat16] || c[capVulkanMemoryModel]) {
			t.Errorf("%s needs Float16 or the Vulkan memory model: it must run on any device", name)
		}
	}
	for name := range fastModules {
		if _, ok := modules[name]; !ok {
			t.Errorf("fastModules lists %s, which is no module", name)
		}
		if _, err := newKernel(nil, name, vulkan.KernelSpec{}); err == nil || !strings.Contains(err.Error(), "fast-mode module") {
			t.Errorf("newKernel(%s): %v, want a refusal", name, err)
		}
	}
	if _, err := newFastKernel(nil, "gemm", vulkan.KernelSpec{}); err == nil {
		t.Error("newFastKernel made an exact module's kernel")
	}
}

// TestFastBackendLinear: a Backend in fast mode with the emulated multiply
// (NewEmulatedFastBackend) computes nn.Linear's bf16 linears — packed
// float32 weights (LoadLinear) and streamed bfloat16 ones
// (LoadLinearBF16) — within fastTol of the float64 sums of the bfloat16
// operands, adds the bias, reports compute.Fast and counts its products;
// its fp32 linears and the exact Backend stay exact.
func TestFastBackendLinear(t *testing.T) {
	dev := vulkantest.Open(t)
	fb, err := NewEmulatedFastBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := NewBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	if fb.Mode() != compute.Fast || eb.Mode() != compute.Exact || compute.ModeOf(fb) != compute.Fast || compute.ModeOf(compute.NewCPU()) != compute.Exact {
		t.Fatalf("modes %v, %v", fb.Mode(), eb.Mode())
	}
	r := rand.New(rand.NewPCG(7, 8))
	const rows, in, out = 70, 129, 65
	x := fastRows(r, rows, in, false)
	w := make([]float32, out*in)
	wb := make([]uint16, out*in)
	for i := range w {
		wb[i] = gemm.RoundBF16(float32(r.NormFloat64() * 0.05))
		w[i] = gemm.BF16ToFloat32(wb[i])
	}
	bias := make([]float32, out)
	for i := range bias {
		bias[i] = float32(r.NormFloat64())
	}
	xb := make([]uint16, len(x))
	gemm.BF16OperandBits(xb, x)
	check := func(name string, got []float32) {
		t.Helper()
		for i := 0; i < rows; i++ {
			for j := 0; j < out; j++ {
				var ref, abs float64
				for q := 0; q < in; q++ {
					p := float64(gemm.BF16ToFloat32(xb[i*in+q])) * float64(w[j*in+q])
					ref += p
					abs += math.Abs(p)
				}
				ref += float64(bias[j])
				// the bias add rounds once more: 2^-24 of the result
				if d := math.Abs(float64(got[i*out+j]) - ref); !(d <= fastTol(in, abs)+0x1p-23*math.Abs(ref)) {
					t.Fatalf("%s: y[%d][%d] = %g, float64 %g (|Δ| %.3g)", name, i, j, got[i*out+j], ref, d)
				}
			}
		}
	}
	run := func(be *Backend, l compute.Linear) []float32 {
		xt := be.Param(x)
		yt := be.New(rows * out)
		be.Linear(yt, l, xt, rows)
		y := make([]float32, rows*out)
		if err := be.Download(y, yt); err != nil {
			t.Fatal(err)
		}
		be.Free(xt)
		be.Free(yt)
		be.FreeLinear(l)
		return y
	}
	lin := &nn.Linear[float32]{In: in, Out: out, W: w, B: bias}
	lin.Pack(gemm.BF16)
	before := fb.FastProducts()
	check("LoadLinear bf16", run(fb, fb.LoadLinear(lin, gemm.BF16)))
	check("LoadLinearBF16 bf16", run(fb, fb.LoadLinearBF16(&nn.Linear[uint16]{In: in, Out: out, W: wb, B: bias}, gemm.BF16)))
	if n := fb.FastProducts() - before; n != 2 {
		t.Errorf("%d fast products recorded, want 2", n)
	}
	// fp32 stays exact in a fast Backend: the exact Backend's bits.
	l32 := &nn.Linear[float32]{In: in, Out: out, W: w, B: bias}
	l32.Pack(gemm.F32)
	a, b := run(fb, fb.LoadLinear(l32, gemm.F32)), run(eb, eb.LoadLinear(l32, gemm.F32))
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("fp32 linear in a fast Backend differs from exact mode at %d: %g, %g", i, a[i], b[i])
		}
	}
	if fb.FastProducts()-before != 2 {
		t.Errorf("the fp32 linear counted as a fast product")
	}
}

// TestOpenForFast: OpenFor refuses bf16-fast on the CPU (--device cpu,
// and auto where it picks the CPU), and on the test device where
// FastSupport refuses it; where the device offers a usable cooperative
// matrix it opens a fast-mode backend. Exact precisions open as Open does.
func TestOpenForFast(t *testing.T) {
	if _, err := OpenFor(device.CPU, compute.BF16Fast); !errors.Is(err, compute.ErrFastOnCPU) || !strings.Contains(err.Error(), "--device cpu") {
		t.Errorf("bf16-fast on --device cpu: %v", err)
	}
	o, err := OpenFor(device.CPU, compute.BF16)
	if err != nil || o.Backend != nil || o.Mode() != compute.Exact {
		t.Fatalf("bf16 on the CPU: %v, %v", o, err)
	}
	dev := vulkantest.Open(t)
	index, _, _ := vulkantest.Wanted()
	spec := device.VulkanIndex(index)
	if c, err := device.Resolve(device.Auto); err == nil && !c.Vulkan {
		if _, err := OpenFor(device.Auto, compute.BF16Fast); !errors.Is(err, compute.ErrFastOnCPU) || !strings.Contains(err.Error(), "--device auto chose the CPU") {
			t.Errorf("bf16-fast on --device auto (the CPU here): %v", err)
		}
	}
	o, err = OpenFor(spec, compute.BF16Fast)
	if why := FastSupport(dev.Info()); why != nil {
		if !errors.Is(err, ErrNoFastMode) || !strings.Contains(err.Error(), "--device "+spec.String()) || !strings.Contains(err.Error(), dev.Info().Name) {
			t.Fatalf("bf16-fast on %v, which lacks a usable cooperative matrix: %v", dev, err)
		}
		t.Logf("refused, as it should be: %v", err)
	} else {
		if err != nil || o.Mode() != compute.Fast {
			t.Fatalf("bf16-fast on %v: %v", dev, err)
		}
		o.Close()
	}
	o, err = OpenFor(spec, compute.BF16)
	if err != nil || o.Mode() != compute.Exact {
		t.Fatalf("bf16 on %v: %v", dev, err)
	}
	o.Close()
}

// BenchmarkFastProducts times fast mode's product (operands prepared,
// then the product, device time per call) at the DiT's linear sizes, on
// the tensor cores where FastSupport accepts the test device; elsewhere
// only the small size with the emulated multiply (named so: it measures
// nothing about tensor cores). Compare with BenchmarkProducts' exact
// kernels.
func BenchmarkFastProducts(b *testing.B) {
	dev := vulkantest.Open(b)
	emulate := FastSupport(dev.Info()) != nil
	for _, s := range [][3]int{{512, 512, 512}, {4680, 1536, 1536}, {4680, 8960, 1536}} {
		if emulate && s[0] > 512 {
			continue
		}
		name := fmt.Sprintf("%d×%d×%d", s[0], s[1], s[2])
		if emulate {
			name += "/emulated"
		}
		b.Run(name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(7, 8))
			av := make([]float32, s[0]*s[2])
			for i := range av {
				av[i] = float32(r.NormFloat64())
			}
			wb := make([]uint16, s[1]*s[2])
			for i := range wb {
				wb[i] = gemm.RoundBF16(float32(r.NormFloat64() * 0.02))
			}
			am, err := UploadF32(dev, s[0], s[2], av)
			if err != nil {
				b.Fatal(err)
			}
			defer am.Buf.Free()
			a, err := NewFastOperand(dev, s[0], s[2])
			if err != nil {
				b.Fatal(err)
			}
			defer a.Buf.Free()
			w, err := UploadFast(dev, s[1], s[2], wb)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Buf.Free()
			c, err := NewMatrix(dev, gemm.F32, s[0], s[1])
			if err != nil {
				b.Fatal(err)
			}
			defer c.Buf.Free()
			benchTimed(b, dev, 2*float64(s[0])*float64(s[1])*float64(s[2]), func(batch *vulkan.Batch) error {
				if err := PrepFast(dev, batch, a, am); err != nil {
					return err
				}
				return FastProduct{C: c, A: a, B: w, Emulate: emulate}.Record(dev, batch)
			})
		})
	}
}
