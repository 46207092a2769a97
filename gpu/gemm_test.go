package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/vmath"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// guard is the word around and between the matrices' elements in the
// tests' buffers: a NaN no result has, so a read or write outside a matrix
// shows.
const guard = 0x7fa5a5a5

// testMat is a matrix of the tests: its values (float32 bits, or bfloat16
// bits in the low half) at element off + i·ld + j of a buffer of guards.
type testMat struct {
	prec                gemm.Precision
	rows, cols, ld, off int
	v                   []uint32 // rows×cols, dense
}

// words is the buffer's content: guards, and the elements in place.
func (m testMat) words() []uint32 {
	n := m.off + (m.rows-1)*m.ld + m.cols + 3
	if m.prec == gemm.BF16 {
		n = (n + 1) / 2
	}
	w := make([]uint32, n)
	for i := range w {
		w[i] = guard
	}
	for i := 0; i < m.rows; i++ {
		for j := 0; j < m.cols; j++ {
			e, x := m.off+i*m.ld+j, m.v[i*m.cols+j]
			if m.prec == gemm.BF16 {
				sh := 16 * (e % 2)
				w[e/2] = w[e/2]&^(0xffff<<sh) | x<<sh
			} else {
				w[e] = x
			}
		}
	}
	return w
}

// upload puts m in a buffer of its own.
func (m testMat) upload(t testing.TB, dev *vulkan.Device) Matrix {
	t.Helper()
	w := m.words()
	buf, err := dev.Alloc(int64(4 * len(w)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free)
	if err := dev.UploadUint32s(buf, 0, w); err != nil {
		t.Fatal(err)
	}
	return Matrix{Buf: buf, Prec: m.prec, Rows: m.rows, Cols: m.cols, Ld: m.ld, Off: m.off}
}

// f32 returns the values as float32 (bfloat16 widened).
func (m testMat) f32() []float32 {
	f := make([]float32, len(m.v))
	for i, x := range m.v {
		if m.prec == gemm.BF16 {
			x <<= 16
		}
		f[i] = math.Float32frombits(x)
	}
	return f
}

func (m testMat) u16() []uint16 {
	h := make([]uint16, len(m.v))
	for i, x := range m.v {
		h[i] = uint16(x)
	}
	return h
}

// values draws float32 bits: mostly normal values around 1, and with
// specials, denormals, zeros of both signs, tiny and huge values, ±Inf and
// NaN.
func values(r *rand.Rand, n int, specials bool) []uint32 {
	v := make([]uint32, n)
	for i := range v {
		sign := uint32(r.IntN(2)) << 31
		mant := r.Uint32() & 0x7fffff
		exp := uint32(127 - 4 + r.IntN(9))
		if specials {
			switch x := r.IntN(100); {
			case x < 8: // denormal
				exp = 0
			case x < 12: // zero
				exp, mant = 0, 0
			case x < 22: // tiny: products underflow
				exp = uint32(1 + r.IntN(40))
			case x < 30: // huge: products overflow
				exp = uint32(215 + r.IntN(39))
			case x < 31:
				exp, mant = 255, 0
			case x < 32:
				exp, mant = 255, mant|1
			}
		}
		v[i] = sign | exp<<23 | mant
	}
	return v
}

// newMat draws a rows×cols matrix with leading dimension ld = cols + pad
// and offset off.
func newMat(r *rand.Rand, prec gemm.Precision, rows, cols, pad, off int, specials bool) testMat {
	v := values(r, rows*cols, specials)
	if prec == gemm.BF16 {
		for i, x := range v {
			v[i] = uint32(gemm.RoundBF16(math.Float32frombits(x)))
		}
	}
	return testMat{prec: prec, rows: rows, cols: cols, ld: cols + pad, off: off, v: v}
}

// sameBits reports whether float32 bits x and y are equal, or both NaN
// (whose sign and payload the definitions leave open).
func sameBits(x, y uint32) bool { return x == y || (isNaN32(x) && isNaN32(y)) }

// refDot is gemm's definition of one element (a straight port of
// gemm/define.go's dotF32 and dotBF16 on vmath.Round32): a and b are
// operand values (bfloat16 ones with denormals read as zero).
func refDot(prec gemm.Precision, a, b []float32, c float32) float32 {
	k := len(a)
	if k == 0 {
		return c
	}
	if prec == gemm.F32 {
		for q := range k {
			c = vmath.FMA32(a[q], b[q], c)
		}
		return c
	}
	c = daz(c)
	for q0 := 0; q0 < k; q0 += gemm.BF16Block {
		var ch [2]float32
		for i := range gemm.BF16Block {
			var x, y float32
			if q := q0 + i; q < k {
				x, y = daz(a[q]), daz(b[q])
			}
			ch[i&1] = vmath.Round32(float64(x)*float64(y), float64(ch[i&1]), true)
		}
		c = vmath.Round32(float64(c), float64(vmath.Round32(float64(ch[0]), float64(ch[1]), true)), true)
	}
	return c
}

func daz(x float32) float32 {
	if b := math.Float32bits(x); b&0x7f800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return x
}

// productCase is one product of the tests.
type productCase struct {
	m, n, k  int
	nn, acc  bool
	prec     gemm.Precision
	tile     Tile
	pad, off int // every operand's leading-dimension padding and offset
	specials bool
	ints     bool // small integers: every product and sum exact, fused or not
}

func (pc productCase) String() string {
	op := "NT"
	if pc.nn {
		op = "NN"
	}
	return fmt.Sprintf("%v %s %d×%d×%d acc=%v tile=%v pad=%d off=%d specials=%v", pc.prec, op, pc.m, pc.n, pc.k, pc.acc, pc.tile, pc.pad, pc.off, pc.specials)
}

// runProduct computes pc on the device and compares every bit of C with
// the definition (refDot), with gemm's selected CPU kernel and with its
// pure-Go kernel, and the guards around C with their old values.
func runProduct(t *testing.T, dev *vulkan.Device, r *rand.Rand, pc productCase) {
	t.Helper()
	a := newMat(r, pc.prec, pc.m, pc.k, pc.pad, pc.off, pc.specials)
	b := newMat(r, pc.prec, pc.n, pc.k, pc.pad, pc.off, pc.specials)
	if pc.nn {
		b = newMat(r, pc.prec, pc.k, pc.n, pc.pad, pc.off, pc.specials)
	}
	c := newMat(r, gemm.F32, pc.m, pc.n, pc.pad, pc.off, pc.specials)
	if pc.ints {
		for _, m := range []*testMat{&a, &b, &c} {
			for i := range m.v {
				m.v[i] = math.Float32bits(float32(r.IntN(33) - 16))
			}
		}
	}
	cm := c.upload(t, dev)
	batch := dev.NewBatch()
	p := Product{C: cm, A: a.upload(t, dev), B: b.upload(t, dev), NN: pc.nn, Acc: pc.acc, Tile: pc.tile}
	if err := p.Record(dev, batch); err != nil {
		t.Fatalf("%v: %v", pc, err)
	}
	if err := batch.Run(); err != nil {
		t.Fatalf("%v: %v", pc, err)
	}
	got := make([]uint32, len(c.words()))
	if err := dev.DownloadUint32s(cm.Buf, 0, got); err != nil {
		t.Fatal(err)
	}

	want := refProducts(pc, a, b, c)
	cpu := map[string][]float32{"definition": want}
	for _, kernel := range []string{"", "go"} {
		cpu["gemm "+kernel] = cpuProduct(t, pc, a, b, c, kernel)
	}
	old := c.words()
	bad := 0
	for e := range got {
		i, j := (e-c.off)/c.ld, (e-c.off)%c.ld
		if e < c.off || i >= c.rows || j >= c.cols {
			if got[e] != old[e] {
				t.Errorf("%v: word %d outside C changed: %#08x, was %#08x", pc, e, got[e], old[e])
			}
			continue
		}
		for name, v := range cpu {
			if w := math.Float32bits(v[i*c.cols+j]); !sameBits(got[e], w) && bad < 8 {
				bad++
				t.Errorf("%v: C[%d][%d] = %#08x, %s %#08x (c was %#08x)", pc, i, j, got[e], name, w, old[e])
			}
		}
	}
}

// refProducts is C by refDot.
func refProducts(pc productCase, a, b, c testMat) []float32 {
	af, bf, cf := a.f32(), b.f32(), c.f32()
	out := make([]float32, pc.m*pc.n)
	for i := range pc.m {
		for j := range pc.n {
			bj := make([]float32, pc.k)
			for q := range pc.k {
				if pc.nn {
					bj[q] = bf[q*pc.n+j]
				} else {
					bj[q] = bf[j*pc.k+q]
				}
			}
			var x float32
			if pc.acc {
				x = cf[i*pc.n+j]
			}
			out[i*pc.n+j] = refDot(pc.prec, af[i*pc.k:(i+1)*pc.k], bj, x)
		}
	}
	return out
}

// cpuProduct is C by gemm's MulPacked under kernel ("" for the selected
// one).
func cpuProduct(t *testing.T, pc productCase, a, b, c testMat, kernel string) []float32 {
	t.Helper()
	if kernel != "" {
		restore, err := gemm.Force(kernel)
		if err != nil {
			t.Fatal(err)
		}
		defer restore()
	}
	var pa *gemm.PackedA
	var pb *gemm.PackedB
	if pc.prec == gemm.BF16 {
		pa = gemm.PackABF16(nil, gemm.BF16, pc.m, pc.k, a.u16(), pc.k)
		if pc.nn {
			pb = gemm.PackNNBF16(nil, gemm.BF16, pc.n, pc.k, b.u16(), pc.n)
		} else {
			pb = gemm.PackNTBF16(nil, gemm.BF16, pc.n, pc.k, b.u16(), pc.k)
		}
	} else {
		pa = gemm.PackAAs(nil, gemm.F32, pc.m, pc.k, a.f32(), pc.k)
		if pc.nn {
			pb = gemm.PackNNAs(nil, gemm.F32, pc.n, pc.k, b.f32(), pc.n)
		} else {
			pb = gemm.PackNTAs(nil, gemm.F32, pc.n, pc.k, b.f32(), pc.k)
		}
	}
	out := c.f32()
	gemm.MulPacked(pc.m, pc.n, pc.k, pa, 0, 0, pb, 0, 0, out, pc.n, pc.acc)
	return out
}

var smallTile = Tile{WX: 4, WY: 2, TM: 2, TN: 3} // 4×12 tiles: tails everywhere

// TestProducts compares the products with gemm on tiny and odd shapes,
// tile tails, both layouts, accumulation, and special values.
func TestProducts(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(1, 2))
	shapes := [][3]int{{1, 1, 1}, {1, 1, 33}, {3, 5, 31}, {4, 12, 32}, {5, 13, 64}, {9, 25, 65}, {17, 7, 100}}
	tiles := []Tile{smallTile, {WX: 8, WY: 8, TM: 1, TN: 1}, {}}
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		for si, s := range shapes {
			for _, nn := range []bool{false, true} {
				pc := productCase{m: s[0], n: s[1], k: s[2], nn: nn, acc: si%2 == 1, prec: prec,
					tile: tiles[si%len(tiles)], pad: si % 3, off: (si * 5) % 7, specials: si%3 != 2}
				runProduct(t, dev, r, pc)
			}
		}
	}
	// Above a default tile in both directions.
	runProduct(t, dev, r, productCase{m: 70, n: 66, k: 40, prec: gemm.BF16, acc: true, specials: true})
	runProduct(t, dev, r, productCase{m: 66, n: 70, k: 40, prec: gemm.F32, nn: true, specials: true})
}

// edgeCase is one element of a bfloat16 product built to hit a corner of
// the definition: a and b are rows of bfloat16 values (given as float32),
// c is C's bits before (read with acc).
type edgeCase struct {
	name string
	a, b []float32
	c    uint32
	acc  bool
}

// p2 is 2^e as a float32.
func p2(e int) float32 { return float32(math.Ldexp(1, e)) }

var bf16Edges = []edgeCase{
	{"window: 2^-126 − 1.5·2^-151 flushes", []float32{p2(-63), 0, -1.5 * p2(-76)}, []float32{p2(-63), 0, p2(-75)}, 0, false},
	{"window, negative", []float32{-p2(-63), 0, 1.5 * p2(-76)}, []float32{p2(-63), 0, p2(-75)}, 0, false},
	{"window: 2^-126 − 2^-151 ties up to 2^-126", []float32{p2(-63), 0, -p2(-76)}, []float32{p2(-63), 0, p2(-75)}, 0, false},
	{"window: 2^-126 − 2^-150 flushes", []float32{p2(-63), 0, -p2(-75)}, []float32{p2(-63), 0, p2(-75)}, 0, false},
	{"product underflows alone", []float32{p2(-65)}, []float32{p2(-65)}, 0, false},
	{"product underflows alone, negative", []float32{-p2(-65)}, []float32{p2(-65)}, 0, false},
	{"cancellation to 2^-127 in a chain", []float32{p2(-60), 0, -0.9921875 * p2(-60)}, []float32{p2(-60), 0, p2(-60)}, 0, false},
	{"cancellation to −2^-127 in a chain", []float32{-p2(-60), 0, 0.9921875 * p2(-60)}, []float32{p2(-60), 0, p2(-60)}, 0, false},
	{"a tiny chain value is flushed before the next step", []float32{p2(-60), 0, -0.9921875 * p2(-60), 0, p2(-63)}, []float32{p2(-60), 0, p2(-60), 0, p2(-63)}, 0, false},
	{"−0 from a tiny chain sum survives (a full block)", block32(map[int]float32{28: -p2(-60), 30: 0.9921875 * p2(-60), 31: -p2(-65)}), block32(map[int]float32{28: p2(-60), 30: p2(-60), 31: p2(-65)}), math.Float32bits(float32(math.Copysign(0, -1))), true},
	{"even + odd tiny", []float32{p2(-60), -0.9921875 * p2(-60)}, []float32{p2(-60), p2(-60)}, 0, false},
	{"even + odd tiny, negative", []float32{-p2(-60), 0.9921875 * p2(-60)}, []float32{p2(-60), p2(-60)}, 0, false},
	{"c + block tiny", []float32{-p2(-60)}, []float32{p2(-60)}, math.Float32bits(p2(-120) + p2(-127)), true},
	{"product beyond float32, sum back in range", []float32{-1.9921875 * p2(63), 0, p2(64)}, []float32{p2(64), 0, p2(64)}, 0, false},
	{"product beyond float32 overflows", []float32{1, 0, p2(64)}, []float32{1, 0, p2(64)}, 0, false},
	{"product beyond float32, negative", []float32{1, 0, -p2(100)}, []float32{1, 0, p2(100)}, 0, false},
	{"underflowing product below half an ulp", []float32{1, 0, p2(-70)}, []float32{1, 0, p2(-70)}, 0, false},
	{"underflowing product rounds the sum up", []float32{p2(-60), 0, 1.5 * p2(-72)}, []float32{p2(-60), 0, p2(-72)}, 0, false},
	{"underflowing product ties to even", []float32{p2(-60), 0, p2(-72)}, []float32{p2(-60), 0, p2(-72)}, 0, false},
	{"underflowing product below 2^-100", []float32{p2(-52), 0, -1.5 * p2(-72)}, []float32{p2(-52), 0, p2(-72)}, 0, false},
	{"denormal C reads as zero", []float32{1}, []float32{1}, math.Float32bits(p2(-130)), true},
	{"denormal −C reads as −0", []float32{0}, []float32{0}, math.Float32bits(-p2(-130)), true},
	{"denormal operand reads as zero", []float32{math.Float32frombits(0x00400000)}, []float32{p2(100)}, 0, false},
	{"−0 products", []float32{-1, -1}, []float32{0, 0}, math.Float32bits(float32(math.Copysign(0, -1))), true},
	{"Inf − Inf", []float32{float32(math.Inf(1)), float32(math.Inf(1))}, []float32{1, -1}, 0, false},
	{"33 depths: a padded block", append(make([]float32, 32), 3), append(make([]float32, 32), 5), math.Float32bits(1), true},
}

// TestBF16Edges runs each edge case as a 1×1 product (and, NN, as its
// transpose), against the definition and gemm.
func TestBF16Edges(t *testing.T) {
	dev := vulkantest.Open(t)
	for _, ec := range bf16Edges {
		k := len(ec.a)
		a := testMat{prec: gemm.BF16, rows: 1, cols: k, ld: k}
		b := testMat{prec: gemm.BF16, rows: 1, cols: k, ld: k}
		for q := range k {
			for _, x := range []struct {
				m *testMat
				v float32
			}{{&a, ec.a[q]}, {&b, ec.b[q]}} {
				h := uint32(math.Float32bits(x.v) >> 16)
				if math.Float32frombits(h<<16) != x.v && x.v == x.v {
					t.Fatalf("%s: %g is not a bfloat16", ec.name, x.v)
				}
				x.m.v = append(x.m.v, h)
			}
		}
		c := testMat{prec: gemm.F32, rows: 1, cols: 1, ld: 1, v: []uint32{ec.c}}
		want := refDot(gemm.BF16, a.f32(), b.f32(), map[bool]float32{true: math.Float32frombits(ec.c)}[ec.acc])
		for _, nn := range []bool{false, true} {
			bm := b
			if nn {
				bm.rows, bm.cols, bm.ld = k, 1, 1
			}
			pc := productCase{m: 1, n: 1, k: k, nn: nn, acc: ec.acc, prec: gemm.BF16}
			cm := c.upload(t, dev)
			batch := dev.NewBatch()
			if err := (Product{C: cm, A: a.upload(t, dev), B: bm.upload(t, dev), NN: nn, Acc: ec.acc}).Record(dev, batch); err != nil {
				t.Fatal(err)
			}
			if err := batch.Run(); err != nil {
				t.Fatal(err)
			}
			got, err := cm.DownloadF32(dev)
			if err != nil {
				t.Fatal(err)
			}
			g, w := math.Float32bits(got[0]), math.Float32bits(want)
			cpu := math.Float32bits(cpuProduct(t, pc, a, bm, c, "")[0])
			if !sameBits(g, w) || !sameBits(cpu, w) {
				t.Errorf("%s (NN %v): GPU %#08x (%g), definition %#08x (%g), gemm %#08x", ec.name, nn, g, got[0], w, want, cpu)
			}
		}
	}
}

// block32 is a block of 32 depths: zeros but at the given depths. (Only a
// full block keeps a −0 chain: a padding step adds +0·+0.)
func block32(v map[int]float32) []float32 {
	b := make([]float32, 32)
	for q, x := range v {
		b[q] = x
	}
	return b
}

// TestProductsRandom compares random products (shapes, tiles, layouts,
// precisions, offsets) with gemm. On a device whose fma is fused, half
// the float32 products use the integer fma32 path instead.
func TestProductsRandom(t *testing.T) {
	dev := vulkantest.Open(t)
	props, err := CheckExact(dev)
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(5)
	r := rand.New(rand.NewPCG(seed, 6))
	tiles := []Tile{{}, smallTile, {WX: 8, WY: 4, TM: 3, TN: 2}, {WX: 16, WY: 1, TM: 1, TN: 8}, {WX: 1, WY: 1, TM: 1, TN: 1}}
	for i := range 30 {
		pc := productCase{
			m: 1 + r.IntN(70), n: 1 + r.IntN(70), k: 1 + r.IntN(100),
			nn: r.IntN(2) == 0, acc: r.IntN(2) == 0, prec: gemm.Precision(r.IntN(2)),
			tile: tiles[r.IntN(len(tiles))], pad: r.IntN(3), off: r.IntN(5), specials: r.IntN(3) > 0,
		}
		if props.FMA && i%2 == 1 {
			fmaPath = "soft"
		}
		runProduct(t, dev, r, pc)
		fmaPath = ""
		if t.Failed() {
			t.Fatalf("seed %d, case %d: %v", seed, i, pc)
		}
	}
}

// TestProductsHardwareFMAPath runs the float32 product's fma() kernel
// (shaders/gemm.comp) on every device, also where the probe found fma()
// unfused (lavapipe): on small integers, where every product and sum is
// exact, fused or not, so the test checks its tiling, indexing and
// accumulation, and the probe its rounding.
func TestProductsHardwareFMAPath(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(9, 10))
	fmaPath = "hardware"
	defer func() { fmaPath = "" }()
	for _, pc := range []productCase{
		{m: 1, n: 1, k: 1},
		{m: 5, n: 13, k: 33, acc: true, tile: smallTile, pad: 1, off: 3},
		{m: 70, n: 65, k: 70, nn: true},
		{m: 9, n: 30, k: 100, nn: true, acc: true, tile: Tile{WX: 8, WY: 4, TM: 3, TN: 2}},
	} {
		pc.prec, pc.ints = gemm.F32, true
		runProduct(t, dev, r, pc)
	}
}

// FuzzProducts compares products of fuzzed shapes, layout, precision,
// tile, offsets and values (from seed) with gemm: go test -tags vulkan
// -fuzz Products ./gpu (its seeds run in every test run).
func FuzzProducts(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint8(1), uint8(0), uint64(1))
	f.Add(uint8(33), uint8(7), uint8(65), uint8(0x3f), uint64(2))
	f.Add(uint8(64), uint8(65), uint8(31), uint8(0xa5), uint64(3))
	dev := vulkantest.Open(f)
	tiles := []Tile{{}, smallTile, {WX: 8, WY: 4, TM: 3, TN: 2}, {WX: 1, WY: 1, TM: 1, TN: 1}}
	f.Fuzz(func(t *testing.T, m, n, k, flags uint8, seed uint64) {
		if m == 0 || n == 0 || k == 0 || m > 96 || n > 96 {
			t.Skip("shapes 1…96 × 1…96 × 1…255")
		}
		pc := productCase{m: int(m), n: int(n), k: int(k),
			nn: flags&1 != 0, acc: flags&2 != 0, prec: gemm.Precision(flags >> 2 & 1), specials: flags&8 != 0,
			tile: tiles[flags>>4&3], pad: int(flags >> 6 & 1), off: int(flags >> 7)}
		runProduct(t, dev, rand.New(rand.NewPCG(seed, 11)), pc)
	})
}

// TestChainedNTAs records, in one batch, the rounding of float32 operands
// to bfloat16 and their product, and compares with gemm.NTAs(gemm.BF16),
// which rounds and multiplies on the CPU.
func TestChainedNTAs(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(12, 13))
	m, n, k := 7, 19, 45
	a, b := newMat(r, gemm.F32, m, k, 0, 0, true), newMat(r, gemm.F32, n, k, 0, 0, true)
	batch := dev.NewBatch()
	var ops []Matrix
	for _, x := range []testMat{a, b} {
		h, err := NewMatrix(dev, gemm.BF16, x.rows, x.cols)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Buf.Free()
		if err := RoundBF16(dev, batch, h, x.upload(t, dev), false); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, h)
	}
	c, err := NewMatrix(dev, gemm.F32, m, n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Buf.Free()
	if err := NT(dev, batch, c, ops[0], ops[1], false); err != nil {
		t.Fatal(err)
	}
	if err := batch.Run(); err != nil {
		t.Fatal(err)
	}
	got, err := c.DownloadF32(dev)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, m*n)
	gemm.NTAs(gemm.BF16, m, n, k, a.f32(), k, b.f32(), k, want, n)
	for i := range want {
		if g, w := math.Float32bits(got[i]), math.Float32bits(want[i]); !sameBits(g, w) {
			t.Errorf("C[%d][%d] = %#08x, gemm.NTAs %#08x", i/n, i%n, g, w)
		}
	}
}
