package compute

import (
	"fmt"
	"sync"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/rope"
)

// CPU is the host backend: tensors are []float32 and each operation is
// package nn's function or the definition below, so a model on it
// computes the bits it computes without this package (NewCPU). Calls
// that fail nothing write nothing in it, so goroutines may share one
// (a model's EmbedText while its Forward runs) on their own tensors.
type CPU struct {
	err   error
	rotMu sync.Mutex
	rots  map[ropeGrid]*rope.Rotator // Rope's rotators, by table and grid
}

// ropeGrid is a rope.Table on a height×width grid.
type ropeGrid struct {
	r             *rope.Table
	height, width int
}

// NewCPU returns the CPU backend.
func NewCPU() *CPU { return &CPU{} }

var (
	_ Backend    = (*CPU)(nil)
	_ HostMemory = (*CPU)(nil)
)

// host is a CPU tensor: its values.
type host struct{ v []float32 }

func (h *host) Len() int { return len(h.v) }

// cpuLinear is a CPU Linear: the nn.Linear itself, packed.
type cpuLinear struct{ l *nn.Linear[float32] }

func (w cpuLinear) In() int  { return w.l.In }
func (w cpuLinear) Out() int { return w.l.Out }

func (c *CPU) String() string { return "cpu" }

// fail keeps err when it is the first.
func (c *CPU) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// ok checks the operands of op; false (the error kept) skips it.
func (c *CPU) ok(op string, needs ...Need) bool {
	if c.err != nil {
		return false
	}
	for _, n := range needs {
		if _, isHost := n.T.(*host); n.T != nil && !isHost {
			c.fail(fmt.Errorf("compute: cpu: %s: %s is a tensor of another backend (%T)", op, n.Name, n.T))
			return false
		}
	}
	if err := Check(op, needs...); err != nil {
		c.fail(fmt.Errorf("compute: cpu: %w", err))
		return false
	}
	return true
}

// v returns a host tensor's values (nil for nil).
func vals(t Tensor) []float32 {
	if t == nil {
		return nil
	}
	return t.(*host).v
}

// vec returns group g's [d] vector of x.
func vec(x Vec, g, d int) []float32 {
	o := x.Off + g*x.Stride
	return vals(x.T)[o : o+d]
}

// Host returns t's values themselves.
func (c *CPU) Host(t Tensor) []float32 {
	if h, ok := t.(*host); ok {
		return h.v
	}
	panic(fmt.Sprintf("compute: cpu: Host of a %T", t))
}

// Wrap returns a tensor whose values are v itself.
func (c *CPU) Wrap(v []float32) Tensor { return &host{v: v} }

func (c *CPU) New(n int) Tensor {
	if n < 0 {
		c.fail(fmt.Errorf("compute: cpu: New: %d values", n))
		n = 0
	}
	return &host{v: make([]float32, n)}
}

func (c *CPU) View(t Tensor, off, n int) Tensor {
	if off < 0 || !c.ok("View", Need{"tensor", t, off + n}) {
		c.fail(fmt.Errorf("compute: cpu: View of %d values at %d", n, off))
		return &host{}
	}
	return &host{v: vals(t)[off : off+n : off+n]}
}

func (c *CPU) Param(v []float32) Tensor { return &host{v: v} }

func (c *CPU) Free(Tensor) {}

func (c *CPU) Upload(dst Tensor, src []float32) {
	if c.ok("Upload", Need{"destination", dst, len(src)}) {
		if dst.Len() != len(src) {
			c.fail(fmt.Errorf("compute: cpu: Upload: %d values into a tensor of %d", len(src), dst.Len()))
			return
		}
		copy(vals(dst), src)
	}
}

// Download copies src into dst and returns the first error since the
// last Flush or Download (and forgets it).
func (c *CPU) Download(dst []float32, src Tensor) error {
	if c.ok("Download", Need{"source", src, len(dst)}) {
		if src.Len() != len(dst) {
			c.fail(fmt.Errorf("compute: cpu: Download: a tensor of %d values into %d", src.Len(), len(dst)))
		} else {
			copy(dst, vals(src))
		}
	}
	return c.Flush()
}

// Flush returns the first error since the last Flush or Download (and
// forgets it).
func (c *CPU) Flush() error {
	if c.err == nil { // no write: calls that fail nothing may share a CPU
		return nil
	}
	err := c.err
	c.err = nil
	return err
}

func (c *CPU) LoadLinear(l *nn.Linear[float32], prec gemm.Precision) Linear {
	if l.W != nil {
		c.fail(fmt.Errorf("compute: cpu: LoadLinear: %d×%d weights not packed", l.Out, l.In))
	}
	return cpuLinear{l}
}

func (c *CPU) FreeLinear(Linear) {}

func (c *CPU) Linear(y Tensor, w Linear, x Tensor, rows int) {
	if s, ok := w.(cpuStream); ok {
		c.stream(y, s, x, rows)
		return
	}
	l, ok := w.(cpuLinear)
	if !ok {
		c.fail(fmt.Errorf("compute: cpu: Linear: weights of another backend (%T)", w))
		return
	}
	if c.ok("Linear", Need{"y", y, rows * l.l.Out}, Need{"x", x, rows * l.l.In}) {
		l.l.Apply(vals(y), vals(x), rows)
	}
}

func (c *CPU) LayerNorm(y, x Tensor, rows, d int, eps float64, w, b Tensor) {
	needs := []Need{{"y", y, rows * d}, {"x", x, rows * d}}
	if w != nil || b != nil {
		needs = append(needs, Need{"w", w, d}, Need{"b", b, d})
	}
	if c.ok("LayerNorm", needs...) {
		nn.LayerNorm(vals(y), vals(x), rows, d, eps, vals(w), vals(b))
	}
}

func (c *CPU) RMSNorm(y, x Tensor, rows, d int, eps float64, w Tensor) {
	if c.ok("RMSNorm", Need{"y", y, rows * d}, Need{"x", x, rows * d}, Need{"w", w, d}) {
		nn.RMSNorm(vals(y), vals(x), rows, d, eps, vals(w))
	}
}

func (c *CPU) GELUTanh(x Tensor) {
	if c.ok("GELUTanh", Need{"x", x, 0}) {
		nn.GELUTanh(vals(x))
	}
}

func (c *CPU) SiLU(y, x Tensor) {
	if c.ok("SiLU", Need{"y", y, 0}, Need{"x", x, 0}) {
		if y.Len() != x.Len() {
			c.fail(fmt.Errorf("compute: cpu: SiLU: y has %d values, x %d", y.Len(), x.Len()))
			return
		}
		nn.SiLU(vals(y), vals(x))
	}
}

func (c *CPU) Attention(prec gemm.Precision, out, q, k, v Tensor, T, S, H, D int, scale float32) {
	if T > 0 && H > 0 && D > 0 && S < 1 {
		c.fail(fmt.Errorf("compute: cpu: Attention: %d queries and %d keys", T, S))
		return
	}
	if c.ok("Attention", Need{"out", out, T * H * D}, Need{"q", q, T * H * D}, Need{"k", k, S * H * D}, Need{"v", v, S * H * D}) {
		nn.Attention(prec, vals(out), vals(q), vals(k), vals(v), T, S, H, D, scale)
	}
}

func (c *CPU) Modulate(y Tensor, rows, d, groupRows int, shift, scale Vec) {
	g, err := Groups("compute: cpu: Modulate", rows, groupRows)
	if err != nil {
		c.fail(err)
		return
	}
	if c.ok("Modulate", Need{"y", y, rows * d}, shift.Need("shift", g, d), scale.Need("scale", g, d)) {
		Modulate(vals(y), rows, d, groupRows,
			func(f int) []float32 { return vec(shift, f, d) },
			func(f int) []float32 { return vec(scale, f, d) })
	}
}

func (c *CPU) GatedAdd(x, o Tensor, rows, d, groupRows int, gate Vec) {
	g, err := Groups("compute: cpu: GatedAdd", rows, groupRows)
	if err != nil {
		c.fail(err)
		return
	}
	if c.ok("GatedAdd", Need{"x", x, rows * d}, Need{"o", o, rows * d}, gate.Need("gate", g, d)) {
		GatedAdd(vals(x), vals(o), rows, d, groupRows, func(f int) []float32 { return vec(gate, f, d) })
	}
}

func (c *CPU) Add(x, y Tensor) {
	if c.ok("Add", Need{"x", x, 0}, Need{"y", y, 0}) {
		if x.Len() != y.Len() {
			c.fail(fmt.Errorf("compute: cpu: Add: x has %d values, y %d", x.Len(), y.Len()))
			return
		}
		Add(vals(x), vals(y))
	}
}

func (c *CPU) AddBias(x Tensor, rows, d int, b Tensor) {
	if c.ok("AddBias", Need{"x", x, rows * d}, Need{"b", b, d}) {
		AddBias(vals(x), rows, d, vals(b))
	}
}

func (c *CPU) Rope(x Tensor, tok0, heads int, r *rope.Table, height, width, t0, frames int) {
	if r == nil || tok0 < 0 || heads <= 0 || height <= 0 || width <= 0 || t0 < 0 || frames < 0 {
		c.fail(fmt.Errorf("compute: cpu: Rope: table %v, token %d, %d heads, %d×%d grid, frames %d from %d", r != nil, tok0, heads, height, width, frames, t0))
		return
	}
	n := height * width * heads * r.HeadDim() // a frame's values
	if !c.ok("Rope", Need{"x", x, (tok0*heads*r.HeadDim() + frames*n)}) {
		return
	}
	g := ropeGrid{r, height, width}
	c.rotMu.Lock()
	rot := c.rots[g]
	if rot == nil {
		if c.rots == nil {
			c.rots = map[ropeGrid]*rope.Rotator{}
		}
		rot = r.NewRotator(height, width)
		c.rots[g] = rot
	}
	if frames > 0 {
		rot.Prepare(t0 + frames - 1) // rotating below it is safe from several goroutines
	}
	c.rotMu.Unlock()
	v := vals(x)[tok0*heads*r.HeadDim():]
	for f := range frames {
		rot.Frame(v[f*n:(f+1)*n], heads, t0+f)
	}
}

func (c *CPU) Copy(dst Tensor, dstOff int, src Tensor, srcOff, n int) {
	if dstOff < 0 || srcOff < 0 {
		c.fail(fmt.Errorf("compute: cpu: Copy: offsets %d and %d", dstOff, srcOff))
		return
	}
	if c.ok("Copy", Need{"destination", dst, dstOff + n}, Need{"source", src, srcOff + n}) {
		copy(vals(dst)[dstOff:dstOff+n], vals(src)[srcOff:srcOff+n])
	}
}

// The element-wise definitions below write every product that meets an
// addition through an explicit float32 conversion, which Go's
// specification forbids fusing into a multiply-add: the results are the
// same bits whatever GOAMD64 level the binary is built for. They are the
// DiT's (package wan) modulation steps, moved here unchanged.

// Modulate sets y = y·(1+scale) + shift in place for each row of y
// [rows][d]; shift and scale are [d] vectors per group of rowsPerGroup
// rows:
//
//	y[r][j] = float32(y[r][j]·(1+scale(g)[j])) + shift(g)[j],  g = r / rowsPerGroup
func Modulate(y []float32, rows, d, rowsPerGroup int, shift, scale func(g int) []float32) {
	for r := 0; r < rows; r++ {
		f := r / rowsPerGroup
		sh, sc := shift(f), scale(f)
		yr := y[r*d : (r+1)*d]
		for j := range yr {
			yr[j] = float32(yr[j]*(1+sc[j])) + sh[j]
		}
	}
}

// GatedAdd sets x += o·g row by row, g = gate(group of the row) [d]:
//
//	x[r][j] += float32(o[r][j]·gate(r / rowsPerGroup)[j])
func GatedAdd(x, o []float32, rows, d, rowsPerGroup int, gate func(g int) []float32) {
	for r := 0; r < rows; r++ {
		g := gate(r / rowsPerGroup)
		xr, or := x[r*d:(r+1)*d], o[r*d:(r+1)*d]
		for j := range xr {
			xr[j] += float32(or[j] * g[j])
		}
	}
}

// Add sets x += y (x[i] = x[i] + y[i], len(y) ≥ len(x)).
func Add(x, y []float32) {
	for i, v := range y[:len(x)] {
		x[i] += v
	}
}

// AddBias sets x[r][j] += b[j] for x [rows][d] and b [d].
func AddBias(x []float32, rows, d int, b []float32) {
	for r := 0; r < rows; r++ {
		xr := x[r*d : (r+1)*d]
		for j, bj := range b[:d] {
			xr[j] += bj
		}
	}
}
