// Package rope implements Wan2.1's 3D rotary position embedding (RoPE) for
// per-head query and key vectors, and the position geometry DensityKV relies
// on (paper, "Post-RoPE Attention Geometry").
//
// A head of dimension d has c = d/2 complex pairs. They are split over
// (time, height, width) as [c − 2⌊c/3⌋, ⌊c/3⌋, ⌊c/3⌋] (22/21/21 for d = 128,
// 6/5/5 for d = 32). Pairs are interleaved: pair j is (x[2j], x[2j+1]). Pair j
// of a part with n pairs rotates by pos·θ^(−j/n) (θ = 10000), i.e.
// pos·10000^(−2j/(2n)). Angles are computed in float64, as the reference
// implementation does, and the rotated values are rounded to float32.
//
// Memory keys (the DensityKV bank, the sink and retrieved frames) are rotated
// with temporal position 0 and their native spatial (h, w).
package rope

import (
	"fmt"
	"math"
)

// DefaultTheta is Wan2.1's RoPE base.
const DefaultTheta = 10000.0

// Pos is the (time, height, width) position of one token.
type Pos struct {
	T, H, W int
}

// Table holds the inverse frequencies of one head dimension.
// It is immutable after New and safe for concurrent use.
type Table struct {
	headDim int
	parts   [3]int       // pairs per axis: time, height, width
	inv     [3][]float64 // inverse frequency per pair of each axis
}

// New returns the RoPE table for heads of dimension headDim (even, ≥ 6).
func New(headDim int, theta float64) (*Table, error) {
	if headDim < 6 || headDim%2 != 0 {
		return nil, fmt.Errorf("rope: head dim %d must be even and at least 6", headDim)
	}
	if !(theta > 1) || math.IsInf(theta, 0) {
		return nil, fmt.Errorf("rope: theta %v must be finite and > 1", theta)
	}
	c := headDim / 2
	s := c / 3
	t := &Table{headDim: headDim, parts: [3]int{c - 2*s, s, s}}
	for a, n := range t.parts {
		t.inv[a] = make([]float64, n)
		for j := 0; j < n; j++ {
			t.inv[a][j] = math.Pow(theta, -2*float64(j)/float64(2*n))
		}
	}
	return t, nil
}

// MustNew is New for constant arguments; it panics on error.
func MustNew(headDim int) *Table {
	t, err := New(headDim, DefaultTheta)
	if err != nil {
		panic(err)
	}
	return t
}

// HeadDim returns the head dimension of the table.
func (t *Table) HeadDim() int { return t.headDim }

// Split returns the number of complex pairs used for time, height and width.
func (t *Table) Split() (time, height, width int) { return t.parts[0], t.parts[1], t.parts[2] }

// Angles writes the headDim/2 rotation angles of position p into dst
// (len ≥ headDim/2) and returns dst[:headDim/2].
func (t *Table) Angles(dst []float64, p Pos) []float64 {
	dst = dst[:t.headDim/2]
	pos := [3]float64{float64(p.T), float64(p.H), float64(p.W)}
	k := 0
	for a := 0; a < 3; a++ {
		for _, f := range t.inv[a] {
			dst[k] = pos[a] * f
			k++
		}
	}
	return dst
}

// RotateHead rotates one head vector x (len headDim) in place at position p.
// scratch of length ≥ headDim is used for the angles' cosines and sines
// (shorter, it is allocated).
func (t *Table) RotateHead(x []float32, p Pos, scratch []float64) {
	if len(x) != t.headDim {
		panic(fmt.Sprintf("rope: vector length %d, want head dim %d", len(x), t.headDim))
	}
	half := t.headDim / 2
	if len(scratch) < 2*half {
		scratch = make([]float64, 2*half)
	}
	c, s := scratch[:half], scratch[half:2*half]
	sincos(c, s, t.Angles(c, p)) // each angle is read before its cosine replaces it
	rotate(x, c, s)
}

// Apply rotates x in place. x holds len(pos) tokens laid out [token][head][headDim];
// every head of token i is rotated at pos[i].
func (t *Table) Apply(x []float32, heads int, pos []Pos) error {
	if heads <= 0 {
		return fmt.Errorf("rope: heads %d must be positive", heads)
	}
	if len(x) != len(pos)*heads*t.headDim {
		return fmt.Errorf("rope: x has %d values, want %d tokens × %d heads × %d", len(x), len(pos), heads, t.headDim)
	}
	d := t.headDim
	half := d / 2
	ang := make([]float64, half)
	c, s := make([]float64, half), make([]float64, half)
	for i, p := range pos {
		sincos(c, s, t.Angles(ang, p))
		row := x[i*heads*d : (i+1)*heads*d]
		for h := 0; h < heads; h++ {
			rotate(row[h*d:(h+1)*d], c, s)
		}
	}
	return nil
}

// sincos sets c[j], s[j] to the cosine and sine of ang[j].
func sincos(c, s, ang []float64) {
	for j, a := range ang {
		s[j], c[j] = math.Sincos(a)
	}
}

// rotate turns each pair (v[2j], v[2j+1]) by the angle whose cosine and
// sine are c[j] and s[j], in float64, rounding the results to float32: the
// one rotation every method of the package applies. Each product is
// rounded before the sum (the explicit conversions): Go may otherwise fuse
// a·b − c·d into a multiply-add on some targets (arm64, GOAMD64=v3), and
// the rotation must give the same bits everywhere (and on the GPU).
func rotate(v []float32, c, s []float64) {
	for j := range c {
		x0, x1 := float64(v[2*j]), float64(v[2*j+1])
		v[2*j] = float32(float64(x0*c[j]) - float64(x1*s[j]))
		v[2*j+1] = float32(float64(x0*s[j]) + float64(x1*c[j]))
	}
}

// Rotator rotates the tokens of a height×width frame grid at any temporal
// position with per-axis cos/sin tables computed once (the temporal ones as
// positions are first used), bit-identically to Apply at the same
// positions. Rotating at temporal positions up to one passed to Prepare is
// safe from several goroutines; anything else grows the tables.
type Rotator struct {
	t          *Table
	nt, nh, nw int
	hgt, wid   int
	ch, sh     [][]float64 // [h][nh]
	cw, sw     [][]float64 // [w][nw]
	ct, st     [][]float64 // [t][nt], grown lazily
}

// NewRotator returns a Rotator for height×width frames.
func (t *Table) NewRotator(height, width int) *Rotator {
	r := &Rotator{t: t, hgt: height, wid: width}
	r.nt, r.nh, r.nw = t.Split()
	ang := make([]float64, t.headDim/2)
	axis := func(p Pos, from, to int) (c, s []float64) {
		a := t.Angles(ang, p)[from:to]
		c, s = make([]float64, len(a)), make([]float64, len(a))
		sincos(c, s, a)
		return c, s
	}
	r.ch, r.sh = make([][]float64, height), make([][]float64, height)
	for h := 0; h < height; h++ {
		r.ch[h], r.sh[h] = axis(Pos{H: h}, r.nt, r.nt+r.nh)
	}
	r.cw, r.sw = make([][]float64, width), make([][]float64, width)
	for w := 0; w < width; w++ {
		r.cw[w], r.sw[w] = axis(Pos{W: w}, r.nt+r.nh, t.headDim/2)
	}
	return r
}

// Prepare computes the temporal tables up to position t.
func (r *Rotator) Prepare(t int) {
	for len(r.ct) <= t {
		ang := make([]float64, r.t.headDim/2)
		a := r.t.Angles(ang, Pos{T: len(r.ct)})[:r.nt]
		c, s := make([]float64, len(a)), make([]float64, len(a))
		sincos(c, s, a)
		r.ct, r.st = append(r.ct, c), append(r.st, s)
	}
}

// Frame rotates one frame x [height·width][heads][headDim] at temporal
// position t and the grid's spatial positions (token order h, w).
func (r *Rotator) Frame(x []float32, heads, t int) {
	d := r.t.headDim
	for p := 0; p < r.hgt*r.wid; p++ {
		r.Token(x[p*heads*d:(p+1)*heads*d], heads, t, p/r.wid, p%r.wid)
	}
}

// Token rotates the heads of one token x [heads][headDim] at (t, h, w).
func (r *Rotator) Token(x []float32, heads, t, h, w int) {
	r.Prepare(t)
	d := r.t.headDim
	ct, st := r.ct[t], r.st[t]
	for hd := 0; hd < heads; hd++ {
		v := x[hd*d : (hd+1)*d]
		rotate(v[:2*r.nt], ct, st)
		rotate(v[2*r.nt:2*(r.nt+r.nh)], r.ch[h], r.sh[h])
		rotate(v[2*(r.nt+r.nh):], r.cw[w], r.sw[w])
	}
}

// Grid returns the positions of frames consecutive latent frames of a
// height×width token grid, token order (frame, h, w), with temporal positions
// t0, t0+1, …. Use t0 = 0 and frames = 1 repeatedly for memory keys, which all
// sit at temporal position 0.
func Grid(frames, height, width, t0 int) []Pos {
	out := make([]Pos, 0, frames*height*width)
	for f := 0; f < frames; f++ {
		for h := 0; h < height; h++ {
			for w := 0; w < width; w++ {
				out = append(out, Pos{T: t0 + f, H: h, W: w})
			}
		}
	}
	return out
}
