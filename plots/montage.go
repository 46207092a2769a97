package plots

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Montage holds the data of the admission figure of the paper's
// supplementary material ("Token Admission Frequency and Layerwise
// Coverage").
type Montage struct {
	Title string
	// Height and Width are the latent token grid of one frame.
	Height, Width int
	// TokenBanks[(f·Height+h)·Width+w] is the number of layer–head banks
	// that admitted spatial token (h, w) of source frame f: panel (a), one
	// tile per source frame, coloured from 0 to Banks (linearly up to 64
	// banks, on a log scale beyond).
	TokenBanks []float64
	// Banks is the number of layer–head banks (layers × heads), the most a
	// token can be admitted by.
	Banks int
	// Layers is the number of layers; LayerFrame[l·Frames+f] counts the
	// admissions of layer l (summed over heads) of source frame f: panel (b).
	Layers, Frames int
	LayerFrame     []float64
	// FirstLayer labels row 0 of LayerFrame (a run over a layer range).
	FirstLayer int
	// EntryFraction[f] is the fraction of the Layers·Heads·Height·Width
	// possible layer–head entries of source frame f that were admitted;
	// PositionFraction[f] the fraction of its Height·Width spatial positions
	// admitted by at least one bank: panel (c).
	EntryFraction, PositionFraction []float64
	// FPS converts source frames to seconds (4 latent frames per second).
	FPS float64
	// InitFrames source frames were admitted by the initial bank
	// construction; they are shaded gray in (b) and (c).
	InitFrames int
}

func (m Montage) validate() error {
	if m.Banks <= 0 {
		return fmt.Errorf("montage of %d banks, want at least 1", m.Banks)
	}
	if m.Height <= 0 || m.Width <= 0 || m.Layers <= 0 || m.Frames <= 0 {
		return fmt.Errorf("sizes must be positive: height %d width %d layers %d frames %d", m.Height, m.Width, m.Layers, m.Frames)
	}
	if len(m.TokenBanks) != m.Frames*m.Height*m.Width {
		return fmt.Errorf("TokenBanks has %d values, want %d frames × %d × %d", len(m.TokenBanks), m.Frames, m.Height, m.Width)
	}
	if len(m.LayerFrame) != m.Layers*m.Frames {
		return fmt.Errorf("LayerFrame has %d values, want %d layers × %d frames", len(m.LayerFrame), m.Layers, m.Frames)
	}
	if len(m.EntryFraction) != m.Frames || len(m.PositionFraction) != m.Frames {
		return fmt.Errorf("fractions have %d and %d values, want %d frames", len(m.EntryFraction), len(m.PositionFraction), m.Frames)
	}
	if !(m.FPS > 0) {
		return fmt.Errorf("FPS is %v, want > 0", m.FPS)
	}
	return nil
}

// AdmissionMontage draws panels (a), (b) and (c) stacked in one figure.
func AdmissionMontage(name string, m Montage) (*Figure, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("plots: %s: %w", name, err)
	}
	dt := 1 / m.FPS
	var sh *Shade
	if m.InitFrames > 0 {
		sh = &Shade{From: -dt / 2, To: (float64(m.InitFrames) - 0.5) * dt, Label: "initial bank"}
	}
	a, b, c := m.panels(sh)
	tiles := a.Grid
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("plots: %s: %w", name, err)
	}
	if err := b.validate(); err != nil {
		return nil, fmt.Errorf("plots: %s: %w", name, err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("plots: %s: %w", name, err)
	}
	width := 18 * vg.Centimeter
	// Panel (a) keeps the token grid's aspect ratio.
	aH := vg.Length(float64(width-3*vg.Centimeter)*float64(tiles.Rows)/float64(tiles.Cols)) + 2.5*vg.Centimeter
	aH = max(min(aH, 12*vg.Centimeter), 6*vg.Centimeter)
	bH, cH := 8*vg.Centimeter, 7*vg.Centimeter
	titleH := vg.Length(0)
	if m.Title != "" {
		titleH = 1 * vg.Centimeter
	}
	f := &Figure{Name: name, Width: width, Height: titleH + aH + bH + cH}
	f.draw = func(dc draw.Canvas) {
		fillWhite(dc)
		if m.Title != "" {
			drawTitle(dc, m.Title, titleH)
		}
		pad := 2 * vg.Millimeter
		top := dc.Max.Y - titleH
		region := func(y1, h vg.Length, right vg.Length) draw.Canvas {
			r := dc
			r.Max.Y = y1 - pad
			r.Min.Y = y1 - h + pad
			r.Min.X += pad
			r.Max.X -= pad + right
			return r
		}
		drawHeat(region(top, aH, 0), a)
		drawHeat(region(top-aH, bH, 0), b)
		cp := linePlot(c)
		// Align (c)'s data area with (b)'s, which leaves room for a colour
		// bar: (c)'s legend goes there, right of its axes.
		l := cp.Legend
		cp.Legend = plot.NewLegend()
		rc := region(top-aH-bH, cH, 2.2*vg.Centimeter)
		cp.Draw(rc)
		data := cp.DataCanvas(rc)
		lc := data
		lc.Min.X = data.Max.X + legendGap
		lc.Max.X = dc.Max.X - pad
		l.Top, l.Left = true, true
		l.Draw(lc)
	}
	return f, nil
}

// panels returns the montage's three panels: (a) the token tiles coloured
// 0…Banks (linear up to 64 banks, log beyond), (b) admissions by layer on
// a log scale spanning the data, (c) fractions on a 0–1 axis.
func (m Montage) panels(sh *Shade) (a, b HeatPanel, c LinePanel) {
	dt := 1 / m.FPS
	tiles, tileCols, tileRows := m.tiles()
	zl := fmt.Sprintf("banks admitting the token (of %d)", m.Banks)
	logA := m.Banks > 64
	if logA {
		zl = fmt.Sprintf("banks admitting the token (log, of %d)", m.Banks)
	}
	a = HeatPanel{
		Title:  fmt.Sprintf("(a) layer–head banks admitting each token (one tile per source frame, %d per row)", tileCols),
		XLabel: "each tile is one source frame (token rows × columns), time runs left to right, then down", YLabel: "source time of the row's first tile (s)", ZLabel: zl,
		Grid: tiles, Log: logA, ZMax: float64(m.Banks), Palette: "oranges", ImageY: true,
		yTicks: m.tileRowTicks(tileRows, tileCols), noX: true,
	}
	b = HeatPanel{
		Title:  "(b) admissions by layer and source time (summed over heads and tokens)",
		XLabel: "source time (s)", YLabel: "layer", ZLabel: "admissions (log)",
		Grid: Grid{Cols: m.Frames, Rows: m.Layers, Z: m.LayerFrame, DX: dt, Y0: float64(m.FirstLayer)},
		Log:  true, Palette: "oranges", Shade: sh,
	}
	xs := make([]float64, m.Frames)
	for f := range xs {
		xs[f] = float64(f) * dt
	}
	c = LinePanel{
		Title:  "(c) fraction admitted per source frame: of its layer–head entries, of its spatial positions",
		XLabel: "source time (s)", YLabel: "fraction",
		Series: []Series{
			{Name: "entries", X: xs, Y: m.EntryFraction, Points: m.Frames <= 40, Width: vg.Points(3)},
			{Name: "positions", X: xs, Y: m.PositionFraction, Points: m.Frames <= 40, Dashes: SeriesDashes(1)},
		},
		YFromZero: true, YMax: 1, YMargin: true, Shade: sh, Legend: "right",
	}
	return a, b, c
}

// tiles lays the per-frame token maps out as a grid of tiles (row-major in
// time) separated by one NaN cell (drawn light gray), about twice as wide as
// tall.
func (m Montage) tiles() (g Grid, cols, rows int) {
	cols = int(math.Ceil(math.Sqrt(float64(m.Frames) * 2 * float64(m.Height) / float64(m.Width))))
	cols = max(1, min(cols, m.Frames))
	rows = (m.Frames + cols - 1) / cols
	g = Grid{Cols: cols*(m.Width+1) - 1, Rows: rows*(m.Height+1) - 1}
	g.Z = make([]float64, g.Cols*g.Rows)
	for i := range g.Z {
		g.Z[i] = math.NaN()
	}
	P := m.Height * m.Width
	for f := 0; f < m.Frames; f++ {
		r0, c0 := (f/cols)*(m.Height+1), (f%cols)*(m.Width+1)
		for h := 0; h < m.Height; h++ {
			for w := 0; w < m.Width; w++ {
				g.Z[(r0+h)*g.Cols+c0+w] = m.TokenBanks[f*P+h*m.Width+w]
			}
		}
	}
	return g, cols, rows
}

// tileRowTicks labels each tile row with the time of its first frame.
func (m Montage) tileRowTicks(rows, cols int) []plot.Tick {
	var ts []plot.Tick
	step := max(1, rows/12)
	for r := 0; r < rows; r += step {
		t := float64(r*cols) / m.FPS
		ts = append(ts, plot.Tick{Value: float64(r*(m.Height+1)) + float64(m.Height-1)/2, Label: strconv.FormatFloat(t, 'g', 4, 64)})
	}
	return ts
}
