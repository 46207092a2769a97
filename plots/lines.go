package plots

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one line of a LinePanel. X and Y have equal lengths; Lo and Hi,
// when given (both, with the length of X), are drawn as a translucent band
// behind the line (e.g. the min and max over heads around their mean).
type Series struct {
	Name   string
	X, Y   []float64
	Lo, Hi []float64
	// Dashed draws the line dashed (e.g. a formula next to measurements).
	Dashed bool
	// Points marks every point with a glyph (useful for few points).
	Points bool
	// Color overrides the series colour (nil: SeriesColor of the series'
	// index in its panel); Dashes overrides the dash pattern (nil: solid,
	// or the Dashed pattern; see SeriesDashes); Width the line width
	// (0: 1.5 pt). Give a curve the same Color and Dashes in every figure
	// so that readers can follow it across figures.
	Color  color.Color
	Dashes []vg.Length
	Width  vg.Length
}

// dashPatterns are distinguishable dash patterns (on, off, ...), solid
// first, for series that share or overlap a colour.
var dashPatterns = [][]vg.Length{
	nil,
	{vg.Points(6), vg.Points(3)},
	{vg.Points(1.5), vg.Points(2)},
	{vg.Points(7), vg.Points(2.5), vg.Points(1.5), vg.Points(2.5)},
	{vg.Points(11), vg.Points(4)},
	{vg.Points(3), vg.Points(3)},
	{vg.Points(7), vg.Points(2.5), vg.Points(1.5), vg.Points(2.5), vg.Points(1.5), vg.Points(2.5)},
}

// SeriesDashes returns the i-th of a fixed list of dash patterns (nil, solid,
// for i = 0), cycling after the list; together with SeriesColor(i) it gives
// each series a distinct colour and line pattern, so that curves that lie
// on top of each other stay distinguishable.
func SeriesDashes(i int) []vg.Length {
	n := len(dashPatterns)
	return dashPatterns[((i%n)+n)%n]
}

// Shade marks the x-range [From, To] with a gray background and a label,
// e.g. the initial bank construction in the admission figures.
type Shade struct {
	From, To float64
	Label    string
}

// LinePanel is one set of axes with line series.
type LinePanel struct {
	Title, XLabel, YLabel string
	// TitleSize is the panel title's font size (0: 12 pt).
	TitleSize vg.Length
	Series    []Series
	// LogY uses a logarithmic y axis (values must be > 0).
	LogY bool
	// YFromZero starts the y axis at 0 (ignored with LogY); XFromZero
	// starts the x axis at 0.
	YFromZero, XFromZero bool
	// YMax, when > 0, fixes the top of the y axis (e.g. room for a legend).
	YMax float64
	// YMargin widens the y axis by 3% of its range at both ends, so that
	// lines at the extremes (a policy at 0, fractions at 1) do not lie on
	// the axes' frame.
	YMargin bool
	Shade   *Shade
	// Legend places the legend: "" or "top-left", "top-right",
	// "bottom-right", "bottom-left" (inside the axes), "right" (outside
	// the axes, to their right, so it never hides data), or "none".
	Legend string
}

// legendOutside reports whether the panel's legend goes right of the axes.
func (lp LinePanel) legendOutside() bool { return lp.Legend == "right" }

func (s Series) validate(logY bool) error {
	if len(s.X) != len(s.Y) {
		return fmt.Errorf("series %q: %d x values but %d y values", s.Name, len(s.X), len(s.Y))
	}
	if (s.Lo == nil) != (s.Hi == nil) {
		return fmt.Errorf("series %q: band needs both Lo and Hi", s.Name)
	}
	if s.Lo != nil && (len(s.Lo) != len(s.X) || len(s.Hi) != len(s.X)) {
		return fmt.Errorf("series %q: band has %d/%d values for %d points", s.Name, len(s.Lo), len(s.Hi), len(s.X))
	}
	for _, vs := range [][]float64{s.X, s.Y, s.Lo, s.Hi} {
		for i, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("series %q: value %d is %v", s.Name, i, v)
			}
			if logY && v <= 0 && !sameSlice(vs, s.X) {
				return fmt.Errorf("series %q: value %d is %v, not positive on a log axis", s.Name, i, v)
			}
		}
	}
	return nil
}

func sameSlice(a, b []float64) bool {
	return len(a) > 0 && len(b) > 0 && &a[0] == &b[0]
}

func (lp LinePanel) validate() error {
	n := 0
	for _, s := range lp.Series {
		if err := s.validate(lp.LogY); err != nil {
			return fmt.Errorf("panel %q: %w", lp.Title, err)
		}
		n += len(s.X)
	}
	if n == 0 {
		return fmt.Errorf("panel %q: no data points", lp.Title)
	}
	switch lp.Legend {
	case "", "top-left", "top-right", "bottom-right", "bottom-left", "right", "none":
	default:
		return fmt.Errorf("panel %q: legend placement %q unknown (top-left, top-right, bottom-right, bottom-left, right, none)", lp.Title, lp.Legend)
	}
	return nil
}

// Lines draws the panels stacked vertically, sharing the figure title.
// Each panel is width × panelHeight; zero sizes pick 16 cm × 7 cm.
func Lines(name, title string, width, panelHeight vg.Length, panels ...LinePanel) (*Figure, error) {
	if len(panels) == 0 {
		return nil, fmt.Errorf("plots: %s: no panels", name)
	}
	for _, p := range panels {
		if err := p.validate(); err != nil {
			return nil, fmt.Errorf("plots: %s: %w", name, err)
		}
	}
	if width == 0 {
		width = 16 * vg.Centimeter
	}
	if panelHeight == 0 {
		panelHeight = 7 * vg.Centimeter
	}
	titleH := vg.Length(0)
	if title != "" {
		titleH = 1 * vg.Centimeter
	}
	f := &Figure{Name: name, Width: width, Height: panelHeight*vg.Length(len(panels)) + titleH}
	f.draw = func(dc draw.Canvas) {
		fillWhite(dc)
		if title != "" {
			drawTitle(dc, title, titleH)
		}
		body := draw.Crop(dc, 0, 0, 0, -titleH)
		ps := make([][]*plot.Plot, len(panels))
		legends := make([]*plot.Legend, len(panels))
		var legW vg.Length // width reserved right of the axes for outside legends
		for i, lp := range panels {
			p := linePlot(lp)
			ps[i] = []*plot.Plot{p}
			if lp.legendOutside() {
				l := p.Legend
				legends[i] = &l
				p.Legend = plot.NewLegend() // drawn outside, below
				r := l.Rectangle(body)
				legW = max(legW, r.Max.X-r.Min.X+legendGap)
			}
		}
		tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
			PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4*vg.Millimeter + legW}
		cs := plot.Align(ps, tiles, body)
		for i := range ps {
			ps[i][0].Draw(cs[i][0])
			if l := legends[i]; l != nil {
				data := ps[i][0].DataCanvas(cs[i][0])
				lc := data
				lc.Min.X = data.Max.X + legendGap
				lc.Max.X = body.Max.X - 2*vg.Millimeter
				l.Top, l.Left = true, true
				l.Draw(lc)
			}
		}
	}
	return f, nil
}

// legendGap separates an outside legend from the axes.
const legendGap = 4 * vg.Millimeter

func fillWhite(dc draw.Canvas) {
	dc.SetColor(color.White)
	var pa vg.Path
	pa.Move(dc.Min)
	pa.Line(vg.Point{X: dc.Max.X, Y: dc.Min.Y})
	pa.Line(dc.Max)
	pa.Line(vg.Point{X: dc.Min.X, Y: dc.Max.Y})
	pa.Close()
	dc.Fill(pa)
}

func drawTitle(dc draw.Canvas, title string, h vg.Length) {
	sty := plot.New().Title.TextStyle
	sty.Font.Size = vg.Points(13)
	sty.XAlign = draw.XCenter
	sty.YAlign = draw.YCenter
	dc.FillText(sty, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y - h/2}, title)
}

func linePlot(lp LinePanel) *plot.Plot {
	p := plot.New()
	p.Title.Text = lp.Title
	if lp.TitleSize > 0 {
		p.Title.TextStyle.Font.Size = lp.TitleSize
	}
	p.X.Label.Text = lp.XLabel
	p.Y.Label.Text = lp.YLabel
	p.Add(plotter.NewGrid())
	if lp.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if lp.Shade != nil {
		p.Add(&shade{Shade: *lp.Shade})
	}
	for i, s := range lp.Series {
		var c color.RGBA = SeriesColor(i)
		if s.Color != nil {
			r, g, b, a := s.Color.RGBA()
			c = color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
		}
		if s.Lo != nil && len(s.X) > 0 {
			poly := make(plotter.XYs, 0, 2*len(s.X))
			for j := range s.X {
				poly = append(poly, plotter.XY{X: s.X[j], Y: s.Hi[j]})
			}
			for j := len(s.X) - 1; j >= 0; j-- {
				poly = append(poly, plotter.XY{X: s.X[j], Y: s.Lo[j]})
			}
			if pg, err := plotter.NewPolygon(poly); err == nil {
				fc := c
				fc.A = 0x40
				pm := func(v uint8) uint8 { return uint8(int(v) * 0x40 / 0xff) }
				pg.Color = color.RGBA{pm(fc.R), pm(fc.G), pm(fc.B), 0x40}
				pg.LineStyle.Width = 0
				p.Add(pg)
			}
		}
		xy := make(plotter.XYs, len(s.X))
		for j := range s.X {
			xy[j] = plotter.XY{X: s.X[j], Y: s.Y[j]}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			continue // validated above; unreachable
		}
		l.Color = c
		l.Width = vg.Points(1.5)
		if s.Width > 0 {
			l.Width = s.Width
		}
		if s.Dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		if s.Dashes != nil {
			l.Dashes = s.Dashes
		}
		p.Add(l)
		if s.Points {
			sc, err := plotter.NewScatter(xy)
			if err == nil {
				sc.Color = c
				sc.GlyphStyle.Radius = vg.Points(2.5)
				sc.GlyphStyle.Shape = draw.CircleGlyph{}
				p.Add(sc)
				p.Legend.Add(s.Name, l, sc)
			}
		} else {
			p.Legend.Add(s.Name, l)
		}
	}
	if lp.YFromZero && !lp.LogY {
		p.Y.Min = 0
	}
	if lp.YMax > 0 && !lp.LogY {
		p.Y.Max = lp.YMax
	}
	if lp.XFromZero {
		p.X.Min = math.Min(0, p.X.Min)
	}
	if !lp.LogY && p.Y.Min == p.Y.Max {
		p.Y.Max = p.Y.Min + 1
	}
	if lp.YMargin && !lp.LogY {
		d := 0.03 * (p.Y.Max - p.Y.Min)
		p.Y.Min, p.Y.Max = p.Y.Min-d, p.Y.Max+d
	}
	if p.X.Min == p.X.Max {
		p.X.Max = p.X.Min + 1
	}
	switch lp.Legend {
	case "none":
		p.Legend = plot.NewLegend()
	case "right": // moved outside the axes by Lines
		p.Legend.ThumbnailWidth = vg.Points(26) // room for a dash pattern
		p.Legend.Padding = vg.Points(1.5)
	case "top-right", "":
		p.Legend.Top = true
	case "top-left":
		p.Legend.Top, p.Legend.Left = true, true
	case "bottom-left":
		p.Legend.Left = true
	}
	if p.Legend.Left { // clear of the y axis and its ticks
		p.Legend.XOffs = vg.Points(6)
	}
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.X.Tick.Marker = niceTicks{}
	if !lp.LogY {
		p.Y.Tick.Marker = niceTicks{}
	}
	return p
}

// shade draws a gray x-range spanning the whole y axis, with a label at
// its top.
type shade struct{ Shade }

func (s *shade) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x0, x1 := trX(s.From), trX(s.To)
	x0 = max(x0, c.Min.X)
	x1 = min(x1, c.Max.X)
	if x1 <= x0 {
		return
	}
	var pa vg.Path
	pa.Move(vg.Point{X: x0, Y: c.Min.Y})
	pa.Line(vg.Point{X: x1, Y: c.Min.Y})
	pa.Line(vg.Point{X: x1, Y: c.Max.Y})
	pa.Line(vg.Point{X: x0, Y: c.Max.Y})
	pa.Close()
	c.SetColor(color.RGBA{0xdd, 0xdd, 0xdd, 0xff})
	c.Fill(pa)
	if s.Label != "" {
		sty := p.Title.TextStyle
		sty.Font.Size = vg.Points(7)
		sty.Color = color.RGBA{0x55, 0x55, 0x55, 0xff}
		sty.XAlign = draw.XLeft
		sty.YAlign = draw.YTop
		c.FillText(sty, vg.Point{X: x0 + vg.Points(2), Y: c.Max.Y - vg.Points(2)}, s.Label)
	}
}

// DataRange makes the shaded range part of the x axis.
func (s *shade) DataRange() (xmin, xmax, ymin, ymax float64) {
	return s.From, s.To, math.Inf(1), math.Inf(-1)
}

// niceTicks places about six labelled ticks at multiples of 1, 2 or 5
// times a power of ten.
type niceTicks struct{}

func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ts []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 6, 64)})
		for k := 1; k < 5 && step/5 > 0; k++ { // minor ticks
			if m := v + float64(k)*step/5; m <= hi {
				ts = append(ts, plot.Tick{Value: m})
			}
		}
	}
	return ts
}
