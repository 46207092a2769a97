package gemm

// The AMX kernels of kernels_amd64.s, run by the interpreter of package
// amxsim on every machine and build (AMX or not), as the test-only kernels
// sim-amx and sim-amx-i: the kernel tests that loop over every kernel
// (TestKernelsExact, TestAPIPathsExact, thread counts, TestAMXChunkResultsUnchanged)
// run their code, with every memory access bounds-checked against the
// operands' slices and the hardware's tile faults, and
// TestAMXSimMutationsDetected requires every AMX mutation of the generator
// to fail there.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/densitykv/densitykv/gemm/internal/amxsim"
	"github.com/densitykv/densitykv/gemm/internal/asmgen"
)

// simAMXKernels are the interpreted AMX kernels: emulations, never selected
// automatically.
var simAMXKernels = []struct{ name, fn string }{
	{"sim-amx", "bf16AMX"},
	{"sim-amx-i", "bf16AMXI"},
}

func init() {
	for _, s := range simAMXKernels {
		goKernels = append(goKernels, &kernel{name: s.name, prec: BF16, lay: layoutAMX, amx: simAMXFile(s.fn), emu: true})
	}
}

// amxFrame is the ABI0 argument frame of an amxFunc kernel:
//
//	func(a *uint32, lda, ng int, b *uint32, bStride, nb, kb int, c *float32, ldc int, acc bool)
var amxFrame = amxsim.Frame{Offsets: map[string]int{"a": 0, "lda": 8, "ng": 16, "b": 24, "bStride": 32, "nb": 40, "kb": 48, "c": 56, "ldc": 64, "acc": 72}, Size: 73}

// simSource is the checked-in assembly file, read once.
var simSource = sync.OnceValues(func() ([]byte, error) { return os.ReadFile("kernels_amd64.s") })

// simAMXFile returns an amxFunc that interprets function fn of the
// checked-in kernels_amd64.s; a file that does not parse makes every call
// panic with the reason (so every test that uses the kernel fails).
func simAMXFile(fn string) amxFunc {
	prog := sync.OnceValues(func() (*amxsim.Program, error) {
		src, err := simSource()
		if err != nil {
			return nil, err
		}
		return amxsim.Parse(src, fn, amxFrame)
	})
	return func(a []uint32, lda, ng int, b []uint32, bStride, nb, kb int, c []float32, ldc int, acc bool) {
		p, err := prog()
		if err != nil {
			panic(err)
		}
		if err := simRun(p, a, lda, ng, b, bStride, nb, kb, c, ldc, acc); err != nil {
			panic(err)
		}
	}
}

// simRun runs an interpreted AMX kernel as an amxFunc call, after the same
// extent checks as the assembly's wrapper. Its segments are the slices'
// own memory, so that it writes only what the kernel stores (calls on
// other goroutines write other parts of the same C).
func simRun(p *amxsim.Program, a []uint32, lda, ng int, b []uint32, bStride, nb, kb int, c []float32, ldc int, acc bool) error {
	amxCheck(a, lda, ng, b, bStride, nb, kb, c, ldc)
	if !littleEndian {
		return fmt.Errorf("the AMX interpreter reads the slices' memory as little-endian, as on amd64; this host is not")
	}
	segs := []amxsim.Segment{
		{Name: "A", Bytes: unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), 4*len(a)), ReadOnly: true},
		{Name: "B", Bytes: unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), 4*len(b)), ReadOnly: true},
		{Name: "C", Bytes: unsafe.Slice((*byte)(unsafe.Pointer(&c[0])), 4*len(c))},
	}
	args := []amxsim.Arg{{Name: "a", Seg: 0}, {Name: "lda", Seg: -1, Value: uint64(lda)}, {Name: "ng", Seg: -1, Value: uint64(ng)},
		{Name: "b", Seg: 1}, {Name: "bStride", Seg: -1, Value: uint64(bStride)}, {Name: "nb", Seg: -1, Value: uint64(nb)},
		{Name: "kb", Seg: -1, Value: uint64(kb)}, {Name: "c", Seg: 2}, {Name: "ldc", Seg: -1, Value: uint64(ldc)},
		{Name: "acc", Seg: -1, Value: uint64(b2i(acc))}}
	return p.Run(segs, args, amxDot, 64+64*ng*nb*(kb+8))
}

// simKernelOf returns an emulated kernel that interprets function fn of src.
func simKernelOf(t testing.TB, src []byte, fn string) *kernel {
	t.Helper()
	p, err := amxsim.Parse(src, fn, amxFrame)
	if err != nil {
		t.Fatal(err)
	}
	return &kernel{name: "sim:" + fn, prec: BF16, lay: layoutAMX, emu: true,
		amx: func(a []uint32, lda, ng int, b []uint32, bStride, nb, kb int, c []float32, ldc int, acc bool) {
			if err := simRun(p, a, lda, ng, b, bStride, nb, kb, c, ldc, acc); err != nil {
				panic(err)
			}
		}}
}

// TestAMXSimKernels runs the AMX kernels of kernels_amd64.s in the
// interpreter: the start-up self-test, and direct calls on random extents
// (padded strides, guards around every tile of C in a slice that ends at
// the last element the call may write) against emu-amx, bit for bit.
func TestAMXSimKernels(t *testing.T) {
	src, err := simSource()
	if err != nil {
		t.Fatalf("the assembly file: %v", err)
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for _, s := range simAMXKernels {
		k := simKernelOf(t, src, s.fn)
		if msg := selfTest(k); msg != "" {
			t.Fatalf("%s: self-test: %s", s.fn, msg)
		}
		for trial := 0; trial < 12; trial++ {
			ng, nb, kb := 1+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(5)
			call := amxCall{ng, nb, kb, kb*BF16Block/2 + rng.IntN(3)*7, kb*BF16Block/2*NR + rng.IntN(3)*5, nb*NR + rng.IntN(3)*3, trial%2 == 1}
			if msg := call.differs(k, rng); msg != "" {
				t.Fatalf("%s: %s", s.fn, msg)
			}
		}
	}
}

// amxCall is the shape of one amxFunc call.
type amxCall struct {
	ng, nb, kb, lda, bStride, ldc int
	acc                           bool
}

// operands returns A and B of random bfloat16 pairs and C of random values
// with guards between its rows, each slice ending at the last element the
// call may touch.
func (c amxCall) operands(rng *rand.Rand) (a, b []uint32, cm []float32) {
	a = make([]uint32, (c.ng*amxRows-1)*c.lda+c.kb*BF16Block/2)
	b = make([]uint32, (c.nb-1)*c.bStride+c.kb*BF16Block/2*NR)
	for i := range a {
		a[i] = bf16Pair(rng)
	}
	for i := range b {
		b[i] = bf16Pair(rng)
	}
	cm = make([]float32, (c.ng*amxRows-1)*c.ldc+c.nb*NR)
	for i := range cm {
		cm[i] = guard
		if i%c.ldc < c.nb*NR {
			cm[i] = float32(rng.NormFloat64())
		}
	}
	return a, b, cm
}

// differs runs the call on kernel k and on emu-amx and describes the first
// element of C that differs, or a panic ("" if none).
func (c amxCall) differs(k *kernel, rng *rand.Rand) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprintf("%+v: panic: %v", c, r)
		}
	}()
	a, b, cm := c.operands(rng)
	want, got := slices.Clone(cm), slices.Clone(cm)
	emuAMX(a, c.lda, c.ng, b, c.bStride, c.nb, c.kb, want, c.ldc, c.acc)
	k.amx(a, c.lda, c.ng, b, c.bStride, c.nb, c.kb, got, c.ldc, c.acc)
	for i := range want {
		if !sameBits(got[i], want[i]) {
			return fmt.Sprintf("%+v: C[%d][%d] = %v (%#08x), want %v (%#08x)", c, i/c.ldc, i%c.ldc,
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
	return ""
}

// bf16Pair returns two random bfloat16 values, now and then a special one.
func bf16Pair(rng *rand.Rand) uint32 {
	v := specialValues(rng, 2)
	return uint32(RoundBF16(v[1]))<<16 | uint32(RoundBF16(v[0]))
}

// TestAMXSimMutationsDetected: each asmgen mutation of the AMX kernels
// makes the interpreted kernel fail the self-test (on every machine; the
// other mutations are TestMutationsDetected's, on the CPUs that run them).
func TestAMXSimMutationsDetected(t *testing.T) {
	n := 0
	for name := range asmgen.Mutations {
		if !strings.Contains(name, "amx") {
			continue
		}
		src, err := asmgen.Generate(asmgen.Options{Mutate: name})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range simAMXKernels {
			n++
			k := simKernelOf(t, src, s.fn)
			msg := selfTest(k)
			if msg == "" { // three groups in one call, two panels, three blocks
				msg = amxCall{3, 2, 3, 3*BF16Block/2 + 1, 3*BF16Block/2*NR + 3, 2*NR + 2, true}.differs(k, rand.New(rand.NewPCG(33, 34)))
			}
			if msg == "" {
				t.Errorf("mutation %s (%s): %s still passes the self-test and a direct call", name, asmgen.Mutations[name], s.fn)
			} else {
				t.Logf("%s, %s: %s", name, s.fn, msg)
			}
		}
	}
	if n == 0 {
		t.Fatal("asmgen has no AMX mutation")
	}
}
