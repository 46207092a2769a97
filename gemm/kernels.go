package gemm

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// kernel is one implementation of the float32 or the bfloat16 product.
// Exactly one of f32, u32, amx is set, matching lay.
type kernel struct {
	name string
	prec Precision
	lay  layout
	f32  stripF32Func
	u32  stripU32Func
	amx  amxFunc
	kc   int // depth chunk in depths (bfloat16 panels; float32 uses KC)

	// emu marks a Go emulation of an assembly kernel's layout: never
	// selected automatically, used by tests and by Force.
	emu bool
	// hw marks a kernel that uses bfloat16 instructions (BF16Calls).
	hw bool
	// unavailable says why the kernel cannot run here ("" if it can).
	unavailable string

	// The bit-exactness self-test, run once on first need (see check).
	testOnce sync.Once
	selfTest string // "" if it passed, else what failed

	gflops float64 // timing probe at selection (0 if not probed)
}

// goKernels are the pure-Go kernels, available everywhere.
var goKernels = []*kernel{
	{name: "go", prec: F32, lay: layoutF32, f32: goF32Strip},
	{name: "go", prec: BF16, lay: layoutF32, f32: goBF16Strip, kc: 128},
	{name: "emu-avx512bf16", prec: BF16, lay: layoutQuad, u32: emuVDPStrip, kc: 128, emu: true},
	{name: "emu-amx", prec: BF16, lay: layoutAMX, amx: emuAMX, emu: true},
}

var (
	registry   []*kernel                 // every kernel of this build, assembly first
	selected   [2]atomic.Pointer[kernel] // per Precision
	auto       [2]*kernel                // what selection chose
	reasons    [2]string                 // why
	selectOnce sync.Once
	forceMu    sync.Mutex
)

// selectedKernel returns the kernel that products of precision p run on,
// selecting kernels on first use.
func selectedKernel(p Precision) *kernel {
	if k := selected[p].Load(); k != nil {
		return k
	}
	selectKernels()
	return selected[p].Load()
}

// selectKernels chooses, once, the kernel of each precision: among the
// assembly kernels the CPU and OS support, those that pass the
// bit-exactness self-test against the definition; where several pass, the
// fastest in a short timing probe; the pure-Go kernel if none does.
func selectKernels() {
	selectOnce.Do(func() {
		registry = append(archKernels(), goKernels...)
		for _, p := range []Precision{F32, BF16} {
			var cand []*kernel
			var notes []string
			for _, k := range registry {
				if k.prec != p || k.emu || k.name == "go" {
					continue
				}
				if k.unavailable != "" {
					notes = append(notes, k.name+": "+k.unavailable)
					continue
				}
				if k.check() != "" {
					notes = append(notes, k.name+": self-test failed: "+k.selfTest)
					continue
				}
				cand = append(cand, k)
			}
			var best *kernel
			switch len(cand) {
			case 0:
				best = findKernel(p, "go")
				notes = append(notes, "no assembly kernel: pure Go")
			case 1:
				best = cand[0]
				notes = append(notes, best.name+": the only exact assembly kernel here")
			default:
				var ps []string
				for _, k := range cand {
					k.gflops = probe(k)
					if best == nil || k.gflops > best.gflops {
						best = k
					}
					ps = append(ps, fmt.Sprintf("%s %.0f", k.name, k.gflops))
				}
				notes = append(notes, "timing probe GFLOP/s: "+strings.Join(ps, ", "))
			}
			auto[p] = best
			reasons[p] = strings.Join(notes, "; ")
			selected[p].Store(best)
		}
	})
}

func findKernel(p Precision, name string) *kernel {
	for _, k := range registry {
		if k.prec == p && k.name == name {
			return k
		}
	}
	return nil
}

// selfTestProblem is the fixed problem of the self-test: values whose
// products and sums depend on the order and rounding of every step, the
// edges of the exponent range (products that underflow, overflow or cancel
// beyond float32's range), results that are tiny before or after rounding,
// denormal operands and accumulators, signed zeros, ±Inf and NaN, on a
// shape with partial micro-tiles, two whole AMX row groups in one kernel
// call and a partial one, two depth chunks and a partial block.
type selfTestProblem struct {
	m, n, k int
	a, b, c []float32
}

var stProblem = sync.OnceValue(func() *selfTestProblem {
	const m, n, k = 69, 40, 300
	rng := rand.New(rand.NewPCG(0x5eed, 13))
	p := &selfTestProblem{m: m, n: n, k: k}
	p.a = specialValues(rng, m*k)
	p.b = specialValues(rng, n*k)
	p.c = specialValues(rng, m*n)
	// Rows and columns of targeted cases: the tininess window just
	// below 2^-126, cancellation of a product beyond float32's range.
	for q := 0; q < k; q++ {
		for r := 0; r < 3; r++ {
			p.a[r*k+q], p.b[r*k+q] = 0, 0
		}
	}
	p.a[0*k+0], p.b[0*k+0] = 0x1p-63, 0x1p-63    // 2^-126 …
	p.a[0*k+2], p.b[0*k+2] = -0x1.8p-76, 0x1p-75 // … minus 1.5·2^-151: tiny after rounding
	p.a[0*k+1], p.b[0*k+1] = 0x1p-63, 0x1p-63
	p.a[0*k+3], p.b[0*k+3] = -0x1p-76, 0x1p-76 // … minus 2^-152: 2^-126 after rounding
	p.a[1*k+0], p.b[1*k+0] = 0x1.8p64, 0x1p64  // 1.5·2^128: beyond float32 …
	p.a[1*k+2], p.b[1*k+2] = -0x1p64, 0x1p63   // … −2^127 brings it back
	p.a[1*k+1], p.b[1*k+1] = 0x1p-70, 0x1p-70  // an underflowing product
	p.a[1*k+3], p.b[1*k+3] = 0x1p-120, 0x1p-3  // added to a small normal value
	p.a[2*k], p.b[2*k] = 0x1p-63, 0x1p-63      // 2^-126 + C, C denormal (read as zero)
	p.c[2*n+2] = 0x1p-127
	return p
})

// specialValues returns n values, most of them bfloat16-exact with
// exponents in a narrow range (so every rounding matters), some float32
// values, and a sprinkling of tiny values (denormal operands, underflowing
// products), large ones, zeros, and rarely values beyond float32's square
// root, ±Inf and NaN (rare enough that most dot products stay finite).
func specialValues(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		sign := float64(1 - 2*rng.IntN(2))
		switch x := rng.IntN(3000); {
		case x < 2100:
			s[i] = float32(sign * math.Ldexp(float64(128+rng.IntN(128))/128, rng.IntN(17)-8))
		case x < 2700:
			s[i] = float32(sign * math.Ldexp(1+rng.Float64(), rng.IntN(17)-8))
		case x < 2820:
			s[i] = float32(math.Copysign(0, sign))
		case x < 2910:
			s[i] = float32(sign * math.Ldexp(1+rng.Float64(), -140+rng.IntN(40)))
		case x < 2994:
			s[i] = float32(sign * math.Ldexp(1+rng.Float64(), 20+rng.IntN(40)))
		case x < 2997:
			s[i] = float32(sign * math.Ldexp(1+rng.Float64(), 100+rng.IntN(27)))
		case x < 2998:
			s[i] = float32(math.Inf(int(sign)))
		default:
			s[i] = float32(math.NaN())
		}
	}
	return s
}

// stCases are the self-test's products: the whole problem, and a
// sub-range with row, column and depth offsets whose depth ends inside a
// block of an operand that goes on; accumulating and not.
var stCases = [...]struct {
	i0, j0, k0, k int
	acc           bool
}{{0, 0, 0, 300, false}, {0, 0, 0, 300, true}, {4, 32, 32, 77, false}, {4, 32, 32, 77, true}}

// stWant holds the definition's results for stCases, per precision,
// computed once.
var stWant = [2]func() [][]float32{
	sync.OnceValue(func() [][]float32 { return stReference(F32) }),
	sync.OnceValue(func() [][]float32 { return stReference(BF16) }),
}

func stReference(prec Precision) [][]float32 {
	p := stProblem()
	a, b := make([]float32, len(p.a)), make([]float32, len(p.b))
	for i, v := range p.a {
		a[i] = roundOperand(prec, v)
	}
	for i, v := range p.b {
		b[i] = roundOperand(prec, v)
	}
	var want [][]float32
	for _, r := range stCases {
		rows, cols := p.m-r.i0, p.n-r.j0
		am, bm := make([]float32, rows*r.k), make([]float32, cols*r.k)
		for i := range rows {
			copy(am[i*r.k:(i+1)*r.k], a[(r.i0+i)*p.k+r.k0:])
		}
		for j := range cols {
			copy(bm[j*r.k:(j+1)*r.k], b[(r.j0+j)*p.k+r.k0:])
		}
		w := slices.Clone(p.c[:rows*cols])
		refMat(prec, rows, cols, r.k, am, bm, w, cols, r.acc)
		want = append(want, w)
	}
	return want
}

// selfTest runs kernel k through the product driver on the self-test
// problem (stCases) and compares every element with the definition. It
// returns "" or a description of the first mismatch.
func selfTest(k *kernel) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint("panic: ", r)
		}
	}()
	p := stProblem()
	ws := new(workspace)
	var pa, pb packedOp
	pa.pack(true, k.prec, k.lay, p.m, p.k, source{f: p.a, ld: p.k})
	pb.pack(false, k.prec, k.lay, p.n, p.k, source{f: p.b, ld: p.k})
	want := stWant[k.prec]()
	for ci, r := range stCases {
		rows, cols := p.m-r.i0, p.n-r.j0
		got := slices.Clone(p.c[:rows*cols])
		macro(k, &pa, r.i0, r.k0, rows, &pb, r.j0, r.k0, cols, r.k, got, cols, r.acc, ws)
		for i := range got {
			if w := want[ci][i]; !sameBits(got[i], w) {
				return fmt.Sprintf("%v at C[%d][%d] (sub-range %+v): %v (%#08x), want %v (%#08x)",
					k.prec, i/cols, i%cols, r, got[i], math.Float32bits(got[i]), w, math.Float32bits(w))
			}
		}
	}
	return ""
}

// sameBits reports whether x and y have the same bits, any two NaNs being
// equal.
func sameBits(x, y float32) bool {
	return math.Float32bits(x) == math.Float32bits(y) || (x != x && y != y)
}

// probe times kernel k on an L2-resident product and returns GFLOP/s (the
// best of a few runs, about a millisecond each).
func probe(k *kernel) float64 {
	const m, n, d = 128, 256, 256
	rng := rand.New(rand.NewPCG(1, 1))
	a, b := make([]float32, m*d), make([]float32, n*d)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	for i := range b {
		b[i] = float32(rng.NormFloat64())
	}
	var pa, pb packedOp
	pa.pack(true, k.prec, k.lay, m, d, source{f: a, ld: d})
	pb.pack(false, k.prec, k.lay, n, d, source{f: b, ld: d})
	c := make([]float32, m*n)
	ws := new(workspace)
	best := time.Duration(math.MaxInt64)
	for range 5 {
		t0 := time.Now()
		macro(k, &pa, 0, 0, m, &pb, 0, 0, n, d, c, n, false, ws)
		best = min(best, time.Since(t0))
	}
	return 2 * m * n * d / best.Seconds() / 1e9
}

// PeakGFLOPS measures the kernel that products of precision p run on now
// (after any Force): GFLOP/s on the calling goroutine for an L2-resident
// product of 128×256×256 packed operands, the best of 20 runs (a few
// milliseconds in all for the assembly kernels). It is the ceiling of
// that kernel on one core here, for reporting a product's rate as a
// fraction of it.
func PeakGFLOPS(p Precision) float64 {
	checkPrec("PeakGFLOPS", p)
	k := selectedKernel(p)
	best := 0.0
	for range 4 {
		best = max(best, probe(k))
	}
	return best
}

// KernelStatus describes one kernel of this build on this machine.
type KernelStatus struct {
	Precision Precision
	Name      string
	Selected  bool   // products of this precision run on it now
	Auto      bool   // start-up selection chose it
	Emulation bool   // a Go emulation of an assembly kernel's layout (tests, Force)
	Available string // "" when the CPU and OS can run it, else why not
	SelfTest  string // "passed", "not run", or what failed
	GFLOPS    float64
}

// KernelInfo reports every kernel of this build, which one runs for each
// precision and why (selecting kernels if that has not happened yet).
func KernelInfo() (kernels []KernelStatus, why map[Precision]string) {
	selectKernels()
	why = map[Precision]string{F32: reasons[F32], BF16: reasons[BF16]}
	for _, k := range registry {
		kernels = append(kernels, KernelStatus{Precision: k.prec, Name: k.name, Selected: selectedKernel(k.prec) == k,
			Auto: auto[k.prec] == k, Emulation: k.emu, Available: k.unavailable, SelfTest: k.testResult(), GFLOPS: k.gflops})
	}
	return kernels, why
}

// KernelName returns the name of the kernel that products of precision p
// run on.
func KernelName(p Precision) string { return selectedKernel(p).name }

// KernelSummary returns one line per precision: the kernel that runs and
// why, for logs and `densitykv bench`.
func KernelSummary() string {
	_, why := KernelInfo()
	var b strings.Builder
	for _, p := range []Precision{F32, BF16} {
		k := selectedKernel(p)
		forced := ""
		if k != auto[p] {
			forced = " (forced)"
		}
		fmt.Fprintf(&b, "%v: %s%s [%s]\n", p, k.name, forced, why[p])
	}
	return b.String()
}

// ErrKernel is returned by Force for a kernel this build or CPU cannot run.
var ErrKernel = errors.New("gemm: unknown or unavailable kernel")

// Force makes products run on the kernel called name, for every precision
// that has one ("go", "avx2", "avx512", "avx512bf16", "amx", "amx-i", and the Go
// emulations "emu-avx512bf16", "emu-amx"), or on one precision only with
// "fp32:NAME" or "bf16:NAME"; "auto" restores the start-up selection. A
// kernel is forced only if it is available and passes its self-test; the
// error otherwise lists the names of this build or says why the kernel
// cannot run. restore undoes the change. Results do not depend on the
// kernel; bfloat16 operands packed before the change must be re-packed
// (their layout may differ: Repack). Force must not be called while
// products are running.
func Force(name string) (restore func(), err error) {
	selectKernels()
	forceMu.Lock()
	defer forceMu.Unlock()
	precs := []Precision{F32, BF16}
	if p, n, ok := strings.Cut(name, ":"); ok {
		var prec Precision
		if prec.UnmarshalText([]byte(p)) != nil {
			return nil, fmt.Errorf("%w: %q (the precision before the colon must be %s)", ErrKernel, name, strings.Join(prec.Names(), " or "))
		}
		precs = []Precision{prec}
		name = n
	}
	var next [2]*kernel
	var why []string
	found := false
	for _, p := range precs {
		if name == "auto" {
			next[p], found = auto[p], true
			continue
		}
		k := findKernel(p, name)
		if k == nil {
			continue
		}
		if k.unavailable != "" {
			why = append(why, fmt.Sprintf("%v %s: %s", p, name, k.unavailable))
			continue
		}
		if msg := k.check(); msg != "" {
			why = append(why, fmt.Sprintf("%v %s: self-test failed: %s", p, name, msg))
			continue
		}
		next[p], found = k, true
	}
	if !found {
		var names []string
		for _, k := range registry {
			if !slices.Contains(names, k.name) {
				names = append(names, k.name)
			}
		}
		if len(why) > 0 {
			return nil, fmt.Errorf("%w: %q: %s", ErrKernel, name, strings.Join(why, "; "))
		}
		return nil, fmt.Errorf("%w: %q (this build has %s)", ErrKernel, name, strings.Join(names, ", "))
	}
	prev := [2]*kernel{selected[F32].Load(), selected[BF16].Load()}
	for p, k := range next {
		if k != nil {
			selected[p].Store(k)
		}
	}
	return func() {
		selected[F32].Store(prev[F32])
		selected[BF16].Store(prev[BF16])
	}, nil
}

// check runs the kernel's bit-exactness self-test once and returns its result:
// "" if it passed, else what failed.
func (k *kernel) check() string {
	k.testOnce.Do(func() { k.selfTest = selfTest(k) })
	return k.selfTest
}

// The bfloat16 switch of earlier versions, kept for the bank's bench and
// tests: "the bfloat16 kernel" is a kernel using bfloat16 instructions
// (AVX512_BF16 or AMX), "off" the best kernel of the float32 family that
// computes the same bfloat16 product with float32 fused multiply-adds.

var bf16Calls atomic.Int64

// BF16Calls returns the number of products (MulPacked calls, NT, NN and
// tile-function calls) that ran on a kernel with bfloat16 instructions
// since the program started.
func BF16Calls() int64 { return bf16Calls.Load() }

// HardwareBF16 reports whether bfloat16 products run on a kernel with
// bfloat16 instructions (AVX512_BF16 or AMX).
func HardwareBF16() bool { return selectedKernel(BF16).hw }

// SetBF16 selects for bfloat16 products the automatic choice (on) or the
// fastest float32-instruction kernel (off: AVX-512 or AVX2 fused
// multiply-adds, or pure Go) and returns the previous setting. Results are
// identical either way; only the speed changes. It must not be called while
// products are running.
func SetBF16(on bool) (prev bool) {
	prev = HardwareBF16()
	selectKernels()
	if on {
		selected[BF16].Store(auto[BF16])
		return prev
	}
	if !auto[BF16].hw {
		selected[BF16].Store(auto[BF16])
		return prev
	}
	for _, name := range []string{"avx512", "avx2", "go"} {
		if k := findKernel(BF16, name); k != nil && k.unavailable == "" {
			if k.check() != "" {
				continue
			}
			selected[BF16].Store(k)
			return prev
		}
	}
	return prev
}

// testResult is the self-test result for KernelInfo ("not run" for a kernel
// this machine cannot run).
func (k *kernel) testResult() string {
	if k.unavailable != "" {
		return "not run"
	}
	if msg := k.check(); msg != "" {
		return "failed: " + msg
	}
	return "passed"
}
