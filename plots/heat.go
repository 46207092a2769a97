package plots

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Grid is a row-major matrix of cell values Z[r·Cols+c]; cell (c, r) is
// centred at x = X0 + c·DX, y = Y0 + r·DY (DX and DY default to 1). NaN
// marks a cell without data (drawn light gray); infinities are errors.
type Grid struct {
	Cols, Rows int
	Z          []float64
	X0, DX     float64
	Y0, DY     float64
}

func (g Grid) validate() error {
	if g.Cols <= 0 || g.Rows <= 0 {
		return fmt.Errorf("grid is %d×%d, want at least 1×1", g.Rows, g.Cols)
	}
	if len(g.Z) != g.Rows*g.Cols {
		return fmt.Errorf("grid has %d values, want %d rows × %d cols = %d", len(g.Z), g.Rows, g.Cols, g.Rows*g.Cols)
	}
	for i, v := range g.Z {
		if math.IsInf(v, 0) {
			return fmt.Errorf("grid value at row %d col %d is %v", i/g.Cols, i%g.Cols, v)
		}
	}
	return nil
}

func (g Grid) dx() float64 {
	if g.DX == 0 {
		return 1
	}
	return g.DX
}

func (g Grid) dy() float64 {
	if g.DY == 0 {
		return 1
	}
	return g.DY
}

// HeatPanel is one heat map with a colour bar.
type HeatPanel struct {
	Title, XLabel, YLabel string
	// ZLabel names the colour scale (shown on the colour bar).
	ZLabel string
	Grid   Grid
	// Log colours by log10 of the value; cells ≤ 0 are drawn white and the
	// colour bar is labelled in the original units.
	Log bool
	// ZMax, when > 0, is the top of the colour scale in the values' units
	// (e.g. the number of banks a count cannot exceed); otherwise the
	// largest value.
	ZMax float64
	// Palette names one of Palettes ("oranges" when empty).
	Palette string
	// ImageY puts row 0 at the top, as in an image of the frame.
	ImageY bool
	Shade  *Shade

	yTicks []plot.Tick // fixed y ticks (tile montage)
	noX    bool        // no x tick labels (tile montage)
}

func (hp HeatPanel) validate() error {
	if err := hp.Grid.validate(); err != nil {
		return fmt.Errorf("panel %q: %w", hp.Title, err)
	}
	if _, err := newRamp(hp.Palette, 0, 1); err != nil {
		return fmt.Errorf("panel %q: %w", hp.Title, err)
	}
	return nil
}

// Heat draws one heat map with its colour bar; zero sizes pick 16 × 10 cm.
func Heat(name string, width, height vg.Length, hp HeatPanel) (*Figure, error) {
	if err := hp.validate(); err != nil {
		return nil, fmt.Errorf("plots: %s: %w", name, err)
	}
	if width == 0 {
		width = 16 * vg.Centimeter
	}
	if height == 0 {
		height = 10 * vg.Centimeter
	}
	f := &Figure{Name: name, Width: width, Height: height}
	f.draw = func(dc draw.Canvas) {
		fillWhite(dc)
		drawHeat(draw.Crop(dc, 2*vg.Millimeter, -2*vg.Millimeter, 2*vg.Millimeter, -2*vg.Millimeter), hp)
	}
	return f, nil
}

// heatRange returns the colour-scale range of the panel's values (log10
// units for Log): the data's own extent, up to ZMax when set, so that the
// colours span what the data holds. On a log scale the range reaches a
// little below the smallest positive value, which is then tinted, not
// white like the cells ≤ 0; a linear scale with non-negative values starts
// at 0.
func heatRange(hp HeatPanel) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range hp.Grid.Z {
		if math.IsNaN(v) {
			continue
		}
		if hp.Log {
			if v <= 0 {
				continue
			}
			v = math.Log10(v)
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	if hp.ZMax > 0 {
		top := hp.ZMax
		if hp.Log {
			top = math.Log10(top)
		}
		hi = max(hi, top)
		if lo > hi {
			lo = hi
		}
	}
	if lo > hi { // nothing to colour (all zero on a log scale)
		lo, hi = 0, 1
	}
	if hp.Log {
		// A tenth of the span (at least 0.1 decade) below the smallest value.
		lo -= max(0.1, (hi-lo)/10)
		if hi <= lo {
			hi = lo + 1
		}
	} else {
		if lo >= 0 {
			lo = 0
		}
		if hi == lo {
			hi = lo + 1
		}
	}
	return lo, hi
}

// drawHeat draws the heat map into dc with a vertical colour bar on the right.
func drawHeat(dc draw.Canvas, hp HeatPanel) {
	lo, hi := heatRange(hp)
	cm, _ := newRamp(hp.Palette, lo, hi)
	barW := 2.2 * vg.Centimeter
	main := draw.Crop(dc, 0, -barW, 0, 0)
	bar := draw.Crop(dc, dc.Max.X-dc.Min.X-barW+3*vg.Millimeter, 0, 0, 0)

	p := plot.New()
	p.Title.Text = hp.Title
	p.X.Label.Text = hp.XLabel
	p.Y.Label.Text = hp.YLabel
	p.X.Padding, p.Y.Padding = 0, 0
	if hp.Shade != nil {
		p.Add(&shade{Shade: *hp.Shade})
	}
	p.Add(&heatLayer{hp: hp, cm: cm})
	if hp.Grid.dx() == 1 && hp.Grid.X0 == math.Trunc(hp.Grid.X0) {
		p.X.Tick.Marker = intTicks{}
	} else {
		p.X.Tick.Marker = niceTicks{}
	}
	if hp.Grid.dy() == 1 && hp.Grid.Y0 == math.Trunc(hp.Grid.Y0) {
		p.Y.Tick.Marker = intTicks{}
	}
	if hp.noX {
		p.X.Tick.Marker = plot.ConstantTicks(nil)
	}
	if hp.yTicks != nil {
		p.Y.Tick.Marker = plot.ConstantTicks(hp.yTicks)
	}
	if hp.ImageY {
		p.Y.Scale = plot.InvertedScale{Normalizer: plot.LinearScale{}}
	}
	p.Draw(main)

	cb := plot.New()
	cb.HideX()
	cb.Y.Padding = 0
	cb.Y.Label.Text = hp.ZLabel
	cb.Add(&plotter.ColorBar{ColorMap: cm, Vertical: true})
	if hp.Log {
		cb.Y.Tick.Marker = pow10Ticks{}
	}
	// Keep the bar at the vertical extent of the heat map's data area.
	top := p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding
	if p.Title.Text == "" {
		top = 0
	}
	cb.Draw(draw.Crop(bar, 0, 0, 0, -top))
}

// heatLayer is a plot.Plotter drawing the cells of a Grid. Small grids are
// drawn as vector rectangles; large ones as one raster image (so SVG output
// stays small).
type heatLayer struct {
	hp HeatPanel
	cm *ramp
}

const rasterCells = 4096

func (h *heatLayer) color(v float64) color.Color {
	if math.IsNaN(v) {
		return color.RGBA{0xe8, 0xe8, 0xe8, 0xff}
	}
	if h.hp.Log {
		if v <= 0 {
			return color.White
		}
		v = math.Log10(v)
	}
	v = math.Max(h.cm.min, math.Min(h.cm.max, v))
	c, _ := h.cm.At(v)
	return c
}

func (h *heatLayer) Plot(c draw.Canvas, p *plot.Plot) {
	g := h.hp.Grid
	trX, trY := p.Transforms(&c)
	dx, dy := g.dx(), g.dy()
	if g.Rows*g.Cols > rasterCells {
		img := image.NewRGBA(image.Rect(0, 0, g.Cols, g.Rows))
		// Image row 0 is the top of the canvas: find which data row that is.
		topIsLast := trY(g.Y0+float64(g.Rows-1)*dy) > trY(g.Y0)
		for r := 0; r < g.Rows; r++ {
			ir := r
			if topIsLast {
				ir = g.Rows - 1 - r
			}
			for col := 0; col < g.Cols; col++ {
				img.Set(col, ir, h.color(g.Z[r*g.Cols+col]))
			}
		}
		x0, x1 := trX(g.X0-dx/2), trX(g.X0+(float64(g.Cols)-0.5)*dx)
		y0, y1 := trY(g.Y0-dy/2), trY(g.Y0+(float64(g.Rows)-0.5)*dy)
		rect := vg.Rectangle{Min: vg.Point{X: min(x0, x1), Y: min(y0, y1)}, Max: vg.Point{X: max(x0, x1), Y: max(y0, y1)}}
		c.DrawImage(rect, img)
		return
	}
	var pa vg.Path
	for r := 0; r < g.Rows; r++ {
		for col := 0; col < g.Cols; col++ {
			x := g.X0 + float64(col)*dx
			y := g.Y0 + float64(r)*dy
			x0, x1 := trX(x-dx/2), trX(x+dx/2)
			y0, y1 := trY(y-dy/2), trY(y+dy/2)
			pa = pa[:0]
			pa.Move(vg.Point{X: x0, Y: y0})
			pa.Line(vg.Point{X: x1, Y: y0})
			pa.Line(vg.Point{X: x1, Y: y1})
			pa.Line(vg.Point{X: x0, Y: y1})
			pa.Close()
			c.SetColor(h.color(g.Z[r*g.Cols+col]))
			c.Fill(pa)
		}
	}
}

func (h *heatLayer) DataRange() (xmin, xmax, ymin, ymax float64) {
	g := h.hp.Grid
	dx, dy := g.dx(), g.dy()
	xa, xb := g.X0-dx/2, g.X0+(float64(g.Cols)-0.5)*dx
	ya, yb := g.Y0-dy/2, g.Y0+(float64(g.Rows)-0.5)*dy
	return min(xa, xb), max(xa, xb), min(ya, yb), max(ya, yb)
}

// pow10Ticks labels a log10 colour bar in original units: 1, 10, 100, 1e3…,
// and 2 and 5 between them when the bar spans less than two decades.
type pow10Ticks struct{}

func (pow10Ticks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	mults := []float64{1}
	if hi-lo < 2 {
		mults = []float64{1, 2, 5}
	}
	for e := math.Floor(lo); e <= hi+1e-9; e++ {
		for _, m := range mults {
			v := e + math.Log10(m)
			if v < lo-1e-9 || v > hi+1e-9 {
				continue
			}
			label := pow10Label(int(e))
			if m != 1 {
				label = strconv.FormatFloat(m*math.Pow(10, e), 'g', 4, 64)
			}
			ts = append(ts, plot.Tick{Value: v, Label: label})
		}
	}
	return ts
}

// intTicks labels integer cell indices, at most about ten of them.
type intTicks struct{}

func (intTicks) Ticks(lo, hi float64) []plot.Tick {
	first, last := math.Ceil(lo), math.Floor(hi)
	step := 1.0
	for (last-first)/step > 10 {
		switch {
		case step == 1 || step == 10 || step == 100 || step == 1000:
			step *= 2
		case step == 2 || step == 20 || step == 200:
			step = step / 2 * 5
		default:
			step *= 2
		}
	}
	var out []plot.Tick
	for v := math.Ceil(first/step) * step; v <= last; v += step {
		out = append(out, plot.Tick{Value: v, Label: strconv.Itoa(int(v))})
	}
	return out
}

func pow10Label(e int) string {
	switch {
	case e >= 0 && e <= 4:
		return strconv.FormatFloat(math.Pow(10, float64(e)), 'f', 0, 64)
	case e < 0 && e >= -4:
		return strconv.FormatFloat(math.Pow(10, float64(e)), 'g', 1, 64) // 0.1 … 0.0001, as the 2s and 5s between
	}
	return "1e" + strconv.Itoa(e)
}

// HeatGrid draws heat panels in a grid of cols columns (row-major), under
// a shared title; each panel keeps its own colour bar. Zero sizes pick
// 9 × 7.5 cm a panel.
func HeatGrid(name, title string, cols int, panelW, panelH vg.Length, panels ...HeatPanel) (*Figure, error) {
	if len(panels) == 0 || cols <= 0 {
		return nil, fmt.Errorf("plots: %s: %d panels in %d columns", name, len(panels), cols)
	}
	for _, hp := range panels {
		if err := hp.validate(); err != nil {
			return nil, fmt.Errorf("plots: %s: %w", name, err)
		}
	}
	if panelW == 0 {
		panelW = 9 * vg.Centimeter
	}
	if panelH == 0 {
		panelH = 7.5 * vg.Centimeter
	}
	cols = min(cols, len(panels))
	rows := (len(panels) + cols - 1) / cols
	titleH := vg.Length(0)
	if title != "" {
		titleH = 1 * vg.Centimeter
	}
	f := &Figure{Name: name, Width: panelW * vg.Length(cols), Height: panelH*vg.Length(rows) + titleH}
	f.draw = func(dc draw.Canvas) {
		fillWhite(dc)
		if title != "" {
			drawTitle(dc, title, titleH)
		}
		top := dc.Max.Y - titleH
		pad := 2 * vg.Millimeter
		for i, hp := range panels {
			r, c := i/cols, i%cols
			sub := dc
			sub.Min.X = dc.Min.X + panelW*vg.Length(c) + pad
			sub.Max.X = dc.Min.X + panelW*vg.Length(c+1) - pad
			sub.Max.Y = top - panelH*vg.Length(r) - pad
			sub.Min.Y = top - panelH*vg.Length(r+1) + pad
			drawHeat(sub, hp)
		}
	}
	return f, nil
}
