package plots

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// BarSeries is one series of a grouped bar chart: one bar per group.
type BarSeries struct {
	Name   string
	Values []float64
}

// BarPanel is a grouped bar chart: Groups along x (e.g. horizons), one
// bar per series in each group, each bar labelled with its value when
// Labels is set.
type BarPanel struct {
	Title, YLabel string
	Groups        []string
	Series        []BarSeries
	Labels        bool
	// YMax fixes the top of the y axis (0: the largest value plus room).
	YMax float64
}

func (bp BarPanel) validate() error {
	if len(bp.Groups) == 0 || len(bp.Series) == 0 {
		return fmt.Errorf("panel %q: no groups or no series", bp.Title)
	}
	for _, s := range bp.Series {
		if len(s.Values) != len(bp.Groups) {
			return fmt.Errorf("panel %q: series %q has %d values for %d groups", bp.Title, s.Name, len(s.Values), len(bp.Groups))
		}
		for i, v := range s.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("panel %q: series %q: value %d is %v, want a finite non-negative number", bp.Title, s.Name, i, v)
			}
		}
	}
	if bp.YMax < 0 || math.IsNaN(bp.YMax) || math.IsInf(bp.YMax, 0) {
		return fmt.Errorf("panel %q: y maximum %v", bp.Title, bp.YMax)
	}
	return nil
}

// Bars draws a grouped bar chart (width × height; zero sizes pick
// 16 cm × 9 cm, taller for a legend of more than 12 series), series coloured by SeriesColor and named in a legend
// right of the axes.
func Bars(name string, width, height vg.Length, bp BarPanel) (*Figure, error) {
	if err := bp.validate(); err != nil {
		return nil, fmt.Errorf("plots: %s: %w", name, err)
	}
	if width == 0 {
		width = 16 * vg.Centimeter
	}
	if height == 0 {
		// Room for the legend's lines.
		height = max(9*vg.Centimeter, vg.Length(len(bp.Series)+3)*0.6*vg.Centimeter)
	}
	f := &Figure{Name: name, Width: width, Height: height}
	f.draw = func(dc draw.Canvas) {
		fillWhite(dc)
		p := plot.New()
		p.Title.Text = bp.Title
		p.Y.Label.Text = bp.YLabel
		grid := plotter.NewGrid()
		grid.Vertical.Color = nil
		p.Add(grid)
		n := len(bp.Series)
		bw := vg.Points(float64(min(18, 220/(n*len(bp.Groups)+1))))
		top := 0.0
		for i, s := range bp.Series {
			vals := plotter.Values(s.Values)
			bc, err := plotter.NewBarChart(vals, bw)
			if err != nil {
				panic(err)
			}
			bc.Color = SeriesColor(i)
			bc.LineStyle.Width = 0
			bc.Offset = vg.Length(float64(i)-float64(n-1)/2) * bw
			p.Add(bc)
			p.Legend.Add(s.Name, bc)
			for g, v := range s.Values {
				top = max(top, v)
				if bp.Labels {
					lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: float64(g), Y: v}}, Labels: []string{strconv.FormatFloat(v, 'g', -1, 64)}})
					if err != nil {
						panic(err)
					}
					lb.Offset = vg.Point{X: bc.Offset - bw/4, Y: vg.Points(2)}
					lb.TextStyle[0].Font.Size = vg.Points(8)
					p.Add(lb)
				}
			}
		}
		p.NominalX(bp.Groups...)
		p.X.Min, p.X.Max = -0.5, float64(len(bp.Groups))-0.5
		p.Y.Min = 0
		p.Y.Max = bp.YMax
		if bp.YMax == 0 {
			p.Y.Max = math.Max(1, top*1.15)
		}
		// The legend right of the axes, top-aligned, so that it never
		// covers a bar however many series there are.
		l := p.Legend
		p.Legend = plot.NewLegend()
		r := l.Rectangle(dc)
		legW := r.Max.X - r.Min.X + legendGap
		body := draw.Crop(dc, 2*vg.Millimeter, -4*vg.Millimeter-legW, 2*vg.Millimeter, -2*vg.Millimeter)
		p.Draw(body)
		lc := p.DataCanvas(body)
		lc.Min.X = lc.Max.X + legendGap
		lc.Max.X = dc.Max.X - 2*vg.Millimeter
		l.Top, l.Left = true, true
		l.Draw(lc)
	}
	return f, nil
}
