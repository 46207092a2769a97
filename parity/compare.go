package parity

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot/vg"

	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/plots"
)

// Options of a comparison.
type Options struct {
	// FramesPerBlock groups frames into blocks; 0 takes a run folder's
	// (A's, else B's), and 3 when neither side is a run folder.
	FramesPerBlock int
}

// Report is a comparison of side A with side B (the reference of the
// relative errors), block by block and over all blocks.
type Report struct {
	A              SideInfo `json:"a"`
	B              SideInfo `json:"b"`
	FramesPerBlock int      `json:"frames_per_block"`
	Blocks         []Block  `json:"blocks"`
	// Latents, Bank, FinalBank and Trace are over every block compared
	// (absent when a side lacks the part).
	Latents   *LatentError   `json:"latents,omitempty"`
	Bank      *Overlap       `json:"bank,omitempty"`
	FinalBank *Overlap       `json:"final_bank,omitempty"`
	Trace     *TraceDistance `json:"trace,omitempty"`
	// Notes say what was not compared and why.
	Notes []string `json:"notes,omitempty"`
}

// SideInfo describes a side: its folder, kind and the files read.
type SideInfo struct {
	Dir   string            `json:"dir"`
	Kind  string            `json:"kind"`
	Files map[string]string `json:"files"`
}

// Block is one block's comparison (frames [Frames[0], Frames[1])).
type Block struct {
	Block   int            `json:"block"`
	Frames  [2]int         `json:"frames"`
	Latents *LatentError   `json:"latents,omitempty"`
	Bank    *Overlap       `json:"bank,omitempty"`
	Trace   *TraceDistance `json:"trace,omitempty"`
}

// LatentError compares latents a with the reference b over Frames frames:
// the largest and mean |a − b|, the relative L2 error ‖a − b‖ / ‖b‖ and
// the largest error relative to the largest |b|.
type LatentError struct {
	Frames  int     `json:"frames"`
	MaxAbs  float64 `json:"max_abs"`
	MeanAbs float64 `json:"mean_abs"`
	RelL2   float64 `json:"rel_l2"`
	MaxRel  float64 `json:"max_rel"`

	n                       int64
	sumAbs, sumD2, sumB2, m float64
}

func (e *LatentError) add(a, b []float32, frames int) {
	e.Frames += frames
	for i, x := range a {
		y := float64(b[i])
		d := math.Abs(float64(x) - y)
		e.MaxAbs = max(e.MaxAbs, d)
		e.sumAbs += d
		e.sumD2 += d * d
		e.sumB2 += y * y
		e.m = max(e.m, math.Abs(y))
	}
	e.n += int64(len(a))
	e.MeanAbs = e.sumAbs / float64(e.n)
	e.RelL2 = ratio(math.Sqrt(e.sumD2), math.Sqrt(e.sumB2))
	e.MaxRel = ratio(e.MaxAbs, e.m)
}

// ratio is x/y, 0 for 0/0 and x/tiny for x/0.
func ratio(x, y float64) float64 {
	if x == 0 {
		return 0
	}
	return x / max(y, math.SmallestNonzeroFloat64)
}

// Overlap is the Jaccard index |A ∩ B| / |A ∪ B| of the source ids two
// banks admitted (Bank: per update of a traced layer and head; FinalBank:
// the banks' final contents), 1 when both are empty: the mean and least
// over Pairs, and how many were identical.
type Overlap struct {
	Pairs     int     `json:"pairs"`
	Mean      float64 `json:"mean"`
	Min       float64 `json:"min"`
	Identical int     `json:"identical"`
	sum       float64
}

func (o *Overlap) add(j float64) {
	if o.Pairs == 0 || j < o.Min {
		o.Min = j
	}
	o.Pairs++
	o.sum += j
	o.Mean = o.sum / float64(o.Pairs)
	if j == 1 {
		o.Identical++
	}
}

// jaccard is the Jaccard index of two sorted id sets.
func jaccard(a, b []int64) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	i, j, inter := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			inter++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// TraceDistance is the total variation ½·Σ_s |m_A(s) − m_B(s)| between
// the attention mass a query frame puts on the source frames s in the two
// traces, over Rows (layer, head, query frame) rows traced on both sides:
// its mean and largest.
type TraceDistance struct {
	Rows   int     `json:"rows"`
	MeanTV float64 `json:"mean_tv"`
	MaxTV  float64 `json:"max_tv"`
	sum    float64
}

func (t *TraceDistance) add(tv float64) {
	t.Rows++
	t.sum += tv
	t.MeanTV = t.sum / float64(t.Rows)
	t.MaxTV = max(t.MaxTV, tv)
}

func info(s *Side) SideInfo { return SideInfo{Dir: s.Dir, Kind: s.Kind, Files: s.Files} }

// Compare compares a with b block by block: the latents of the frames
// both hold, the bank updates both lineages trace, the query frames both
// traces hold. Latents of different frame shapes and lineages of
// different frame_seq_length are refused.
func Compare(a, b *Side, opt Options) (*Report, error) {
	F := opt.FramesPerBlock
	if F == 0 {
		F = max(a.FramesPerBlock, 0)
		if F == 0 {
			F = b.FramesPerBlock
		}
		if F == 0 {
			F = 3
		}
	}
	if F < 0 {
		return nil, fmt.Errorf("parity: %d frames per block", F)
	}
	r := &Report{A: info(a), B: info(b), FramesPerBlock: F}
	blocks := map[int]*Block{}
	block := func(bi int) *Block {
		if blocks[bi] == nil {
			blocks[bi] = &Block{Block: bi, Frames: [2]int{bi * F, (bi + 1) * F}}
		}
		return blocks[bi]
	}
	missing := func(part string, x, y bool) bool {
		switch {
		case x && y:
			return false
		case x:
			r.Notes = append(r.Notes, fmt.Sprintf("%s: only A (%s) has one; not compared", part, a.Dir))
		case y:
			r.Notes = append(r.Notes, fmt.Sprintf("%s: only B (%s) has one; not compared", part, b.Dir))
		default:
			r.Notes = append(r.Notes, fmt.Sprintf("%s: neither side has one", part))
		}
		return true
	}
	if !missing("latents", a.lat != nil, b.lat != nil) {
		if err := compareLatents(r, a.lat, b.lat, F, block); err != nil {
			return nil, err
		}
	}
	if !missing("lineage", a.lineage != nil, b.lineage != nil) {
		if err := compareLineages(r, a.lineage, b.lineage, F, block); err != nil {
			return nil, err
		}
	}
	if !missing("attention trace", a.trace != nil, b.trace != nil) {
		compareTraces(r, a.trace, b.trace, F, block)
	}
	keys := make([]int, 0, len(blocks))
	for k := range blocks {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		r.Blocks = append(r.Blocks, *blocks[k])
	}
	return r, nil
}

func compareLatents(r *Report, a, b latentSource, F int, block func(int) *Block) error {
	if a.shape() != b.shape() {
		return fmt.Errorf("parity: latent frames of A are [C, H, W] = %v, of B %v: runs of different sizes", a.shape(), b.shape())
	}
	n := min(a.frames(), b.frames())
	if a.frames() != b.frames() {
		r.Notes = append(r.Notes, fmt.Sprintf("latents: A holds %d frames, B %d; the first %d compared", a.frames(), b.frames(), n))
	}
	r.Latents = &LatentError{}
	for lo := 0; lo < n; lo += F {
		hi := min(n, lo+F)
		x, err := a.read(lo, hi)
		if err != nil {
			return fmt.Errorf("parity: A's latents: %w", err)
		}
		y, err := b.read(lo, hi)
		if err != nil {
			return fmt.Errorf("parity: B's latents: %w", err)
		}
		bl := block(lo / F)
		bl.Latents = &LatentError{}
		bl.Latents.add(x, y, hi-lo)
		r.Latents.add(x, y, hi-lo)
	}
	return nil
}

func compareLineages(r *Report, a, b *lineage, F int, block func(int) *Block) error {
	if a.tokensPerFrame != b.tokensPerFrame {
		return fmt.Errorf("parity: lineage %s has frame_seq_length %d, %s has %d: runs of different sizes (the authors' export writes 1560, their 480×832 size, whatever the size)",
			a.path, a.tokensPerFrame, b.path, b.tokensPerFrame)
	}
	var keys []lhKey
	onlyA, onlyB := 0, 0
	for k := range a.admitted {
		if _, ok := b.admitted[k]; ok {
			keys = append(keys, k)
		} else {
			onlyA++
		}
	}
	for k := range b.admitted {
		if _, ok := a.admitted[k]; !ok {
			onlyB++
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		x, y := keys[i], keys[j]
		if x.QueryFrame != y.QueryFrame {
			return x.QueryFrame < y.QueryFrame
		}
		if x.Layer != y.Layer {
			return x.Layer < y.Layer
		}
		return x.Head < y.Head
	})
	if onlyA+onlyB > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("lineage: %d bank updates (query frame, layer, head) only in A, %d only in B; not compared", onlyA, onlyB))
	}
	if len(keys) == 0 {
		r.Notes = append(r.Notes, "lineage: no bank update traced on both sides (other layers or heads?)")
	}
	r.Bank = &Overlap{}
	for _, k := range keys {
		j := jaccard(a.admitted[k], b.admitted[k])
		bl := block(k.QueryFrame / F)
		if bl.Bank == nil {
			bl.Bank = &Overlap{}
		}
		bl.Bank.add(j)
		r.Bank.add(j)
	}
	var finals [][2]int
	for k := range a.final {
		if _, ok := b.final[k]; ok {
			finals = append(finals, k)
		}
	}
	if len(finals) > 0 {
		r.FinalBank = &Overlap{}
		sort.Slice(finals, func(i, j int) bool {
			return finals[i][0] < finals[j][0] || finals[i][0] == finals[j][0] && finals[i][1] < finals[j][1]
		})
		for _, k := range finals {
			r.FinalBank.add(jaccard(a.final[k], b.final[k]))
		}
	}
	return nil
}

func compareTraces(r *Report, a, b *trace, F int, block func(int) *Block) {
	frames := min(a.frames, b.frames)
	if a.frames != b.frames {
		r.Notes = append(r.Notes, fmt.Sprintf("attention trace: A holds %d frames, B %d; the first %d compared", a.frames, b.frames, frames))
	}
	var layers []int
	for l := range a.layers {
		if _, ok := b.layers[l]; ok {
			layers = append(layers, l)
		}
	}
	sort.Ints(layers)
	if len(layers) == 0 {
		r.Notes = append(r.Notes, "attention trace: no layer traced on both sides")
	}
	r.Trace = &TraceDistance{}
	for _, l := range layers {
		x, y := a.layers[l], b.layers[l]
		inY := map[int]bool{}
		for _, h := range y.heads {
			inY[h] = true
		}
		for _, h := range x.heads {
			if !inY[h] {
				continue
			}
			for q := 0; q < frames; q++ {
				if x.counts[q] == 0 || y.counts[q] == 0 {
					continue
				}
				ra := x.mass[(h*a.frames+q)*a.frames:]
				rb := y.mass[(h*b.frames+q)*b.frames:]
				tv := 0.0
				for s := 0; s < frames; s++ {
					tv += math.Abs(ra[s] - rb[s])
				}
				tv /= 2
				bl := block(q / F)
				if bl.Trace == nil {
					bl.Trace = &TraceDistance{}
				}
				bl.Trace.add(tv)
				r.Trace.add(tv)
			}
		}
	}
}

// Text renders the report as a plain-text table.
func (r *Report) Text() string {
	var b strings.Builder
	side := func(name string, s SideInfo) {
		var parts []string
		for _, k := range []string{"latents", "lineage", "trace"} {
			if f, ok := s.Files[k]; ok {
				rel, err := filepath.Rel(s.Dir, f)
				if err != nil {
					rel = f
				}
				parts = append(parts, k+" "+rel)
			}
		}
		fmt.Fprintf(&b, "%s: %s (%s): %s\n", name, s.Dir, s.Kind, strings.Join(parts, ", "))
	}
	side("A", r.A)
	side("B", r.B)
	fmt.Fprintf(&b, "blocks of %d latent frames; relative errors against B\n\n", r.FramesPerBlock)
	fmt.Fprintf(&b, "%-6s %-9s %11s %11s %11s %11s   %8s %8s %6s   %9s %9s %6s\n",
		"block", "frames", "max |Δ|", "mean |Δ|", "rel L2", "max rel", "bank J", "J min", "pairs", "trace TV", "TV max", "rows")
	dash := func(n int) string { return fmt.Sprintf("%*s", n, "–") }
	for _, bl := range r.Blocks {
		fmt.Fprintf(&b, "%-6d %-9s ", bl.Block, fmt.Sprintf("%d–%d", bl.Frames[0], bl.Frames[1]))
		if e := bl.Latents; e != nil {
			fmt.Fprintf(&b, "%11.4g %11.4g %11.4g %11.4g   ", e.MaxAbs, e.MeanAbs, e.RelL2, e.MaxRel)
		} else {
			fmt.Fprintf(&b, "%s %s %s %s   ", dash(11), dash(11), dash(11), dash(11))
		}
		if o := bl.Bank; o != nil {
			fmt.Fprintf(&b, "%8.4f %8.4f %6d   ", o.Mean, o.Min, o.Pairs)
		} else {
			fmt.Fprintf(&b, "%s %s %s   ", dash(8), dash(8), dash(6))
		}
		if t := bl.Trace; t != nil {
			fmt.Fprintf(&b, "%9.4g %9.4g %6d\n", t.MeanTV, t.MaxTV, t.Rows)
		} else {
			fmt.Fprintf(&b, "%s %s %s\n", dash(9), dash(9), dash(6))
		}
	}
	b.WriteString("\n")
	if e := r.Latents; e != nil {
		fmt.Fprintf(&b, "latents (%d frames): max |Δ| %.4g, mean |Δ| %.4g, relative L2 %.4g, max relative %.4g\n", e.Frames, e.MaxAbs, e.MeanAbs, e.RelL2, e.MaxRel)
	}
	if o := r.Bank; o != nil {
		fmt.Fprintf(&b, "bank decisions (%d updates of the traced layers' and heads' banks): Jaccard of the admitted source ids mean %.4f, min %.4f, %d identical\n", o.Pairs, o.Mean, o.Min, o.Identical)
	}
	if o := r.FinalBank; o != nil {
		fmt.Fprintf(&b, "final banks (%d traced layer and head pairs): Jaccard mean %.4f, min %.4f, %d identical\n", o.Pairs, o.Mean, o.Min, o.Identical)
	}
	if t := r.Trace; t != nil {
		fmt.Fprintf(&b, "attention trace (%d layer, head and query-frame rows): total variation mean %.4g, max %.4g\n", t.Rows, t.MeanTV, t.MaxTV)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}

// Figure draws the per-block comparison: latent errors, bank overlap and
// trace distance, one panel each that the report has; nil when no block
// was compared.
func (r *Report) Figure() (*plots.Figure, error) {
	if len(r.Blocks) == 0 {
		return nil, nil
	}
	type pick func(Block) (float64, bool)
	series := func(name string, dashed bool, f pick) plots.Series {
		s := plots.Series{Name: name, Points: len(r.Blocks) <= 40, Dashed: dashed}
		for _, bl := range r.Blocks {
			if v, ok := f(bl); ok {
				s.X = append(s.X, float64(bl.Block))
				s.Y = append(s.Y, v)
			}
		}
		return s
	}
	var panels []plots.LinePanel
	if r.Latents != nil {
		panels = append(panels, plots.LinePanel{Title: "latent error (relative to B)", XLabel: "block", YLabel: "error", YFromZero: true, XFromZero: true, YMargin: true, Legend: "right",
			Series: []plots.Series{
				series("rel L2", false, func(b Block) (float64, bool) { return val(b.Latents != nil, func() float64 { return b.Latents.RelL2 }) }),
				series("max rel", true, func(b Block) (float64, bool) {
					return val(b.Latents != nil, func() float64 { return b.Latents.MaxRel })
				}),
			}})
	}
	if r.Bank != nil && r.Bank.Pairs > 0 {
		panels = append(panels, plots.LinePanel{Title: "bank decisions: Jaccard of the admitted source ids", XLabel: "block", YLabel: "Jaccard", YFromZero: true, XFromZero: true, YMargin: true, Legend: "right",
			Series: []plots.Series{
				series("mean", false, func(b Block) (float64, bool) { return val(b.Bank != nil, func() float64 { return b.Bank.Mean }) }),
				series("min", true, func(b Block) (float64, bool) { return val(b.Bank != nil, func() float64 { return b.Bank.Min }) }),
			}})
	}
	if r.Trace != nil && r.Trace.Rows > 0 {
		panels = append(panels, plots.LinePanel{Title: "attention trace: total variation per query frame", XLabel: "block", YLabel: "TV", YFromZero: true, XFromZero: true, YMargin: true, Legend: "right",
			Series: []plots.Series{
				series("mean", false, func(b Block) (float64, bool) { return val(b.Trace != nil, func() float64 { return b.Trace.MeanTV }) }),
				series("max", true, func(b Block) (float64, bool) { return val(b.Trace != nil, func() float64 { return b.Trace.MaxTV }) }),
			}})
	}
	if len(panels) == 0 {
		return nil, nil
	}
	return plots.Lines("compare", filepath.Base(r.A.Dir)+" vs "+filepath.Base(r.B.Dir), 16*vg.Centimeter, 6*vg.Centimeter, panels...)
}

func val(ok bool, f func() float64) (float64, bool) {
	if !ok {
		return 0, false
	}
	return f(), true
}

// Files of a report folder (Write).
const (
	FileJSON   = "compare.json"
	FileText   = "compare.txt"
	FileFigure = "compare" // .png and .svg
)

// Write writes the report into dir (made if missing): compare.json,
// compare.txt and the figure compare.png and compare.svg, each
// atomically; a report folder holding one of the files compared is
// refused before anything is written. It returns the paths written.
func (r *Report) Write(dir string) ([]string, error) {
	var ins []atomicfile.Input
	for _, s := range []SideInfo{r.A, r.B} {
		for k, f := range s.Files {
			ins = append(ins, atomicfile.Input{Role: "the " + k + " of " + s.Dir, Path: f})
		}
	}
	sort.Slice(ins, func(i, j int) bool { return ins[i].Path < ins[j].Path })
	var outs []atomicfile.Output
	for _, f := range []string{FileJSON, FileText, FileFigure + ".png", FileFigure + ".svg"} {
		outs = append(outs, atomicfile.Output{Role: "the report's", Path: filepath.Join(dir, f)})
	}
	if err := atomicfile.CheckOutputs(outs, ins); err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	fig, err := r.Figure()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	paths := []string{filepath.Join(dir, FileJSON), filepath.Join(dir, FileText)}
	if err := atomicfile.WriteBytes(paths[0], append(js, '\n')); err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	if err := atomicfile.WriteBytes(paths[1], []byte(r.Text())); err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	if fig != nil {
		ps, err := fig.Save(filepath.Join(dir, FileFigure))
		if err != nil {
			return nil, err
		}
		paths = append(paths, ps...)
	}
	return paths, nil
}
