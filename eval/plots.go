package eval

import (
	"fmt"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// seriesPlot draws one line per variant of group.
func (r *Result) seriesPlot(group, title, xlabel, ylabel string, xy func(v int) plotter.XYs) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	var args []any
	for v, vr := range r.Variants {
		if vr.Group != group {
			continue
		}
		pts := xy(v)
		if len(pts) == 0 {
			continue
		}
		args = append(args, vr.Label, pts)
	}
	if len(args) == 0 {
		return nil, nil
	}
	if err := plotutil.AddLines(p, args...); err != nil {
		return nil, fmt.Errorf("eval: plot %q: %w", title, err)
	}
	return p, nil
}

func finitePoints(n int, f func(i int) (x, y float64)) plotter.XYs {
	var pts plotter.XYs
	for i := 0; i < n; i++ {
		x, y := f(i)
		if math.IsNaN(y) || math.IsInf(y, 0) {
			continue
		}
		pts = append(pts, plotter.XY{X: x, Y: y})
	}
	return pts
}

// writePlots writes the standard figures (PNG and SVG) for the baselines
// group and the policy ablations.
func (r *Result) writePlots(dir string) ([]string, error) {
	var files []string
	F := float64(r.Layout.FramesPerBlock)
	last := len(r.Horizons) - 1
	type fig struct {
		name, group, title, ylabel, xlabel string
		xy                                 func(v int) plotter.XYs
	}
	perBlock := func(f func(s BlockStat) float64) func(v int) plotter.XYs {
		return func(v int) plotter.XYs {
			return finitePoints(len(r.PerBlock[v]), func(b int) (float64, float64) { return F * float64(b+1), f(r.PerBlock[v][b]) })
		}
	}
	frameCov := func(v int) plotter.XYs {
		fc := r.FrameCoverage[v][last]
		return finitePoints(len(fc), func(f int) (float64, float64) { return float64(f), fc[f] })
	}
	figs := []fig{
		{"fidelity", GroupBaselines, "Attention output error vs FullHistory", "relative L2 error", "latent frame",
			perBlock(func(s BlockStat) float64 { return s.RelErr })},
		{"dropped_mass", GroupBaselines, "FullHistory attention mass on dropped history", "mass", "latent frame",
			perBlock(func(s BlockStat) float64 { return s.Dropped })},
		{"recall", GroupBaselines, "Top-k recall of most-attended history", "recall", "latent frame",
			perBlock(func(s BlockStat) float64 { return s.Recall })},
		{"state_bytes", GroupBaselines, "Persistent temporal state", "MiB", "latent frame",
			perBlock(func(s BlockStat) float64 { return float64(s.Bytes) / (1 << 20) })},
		{"frame_coverage", GroupBaselines, "Fraction of each history frame still attended (end of stream)", "fraction", "source latent frame", frameCov},
		{"ablation_fidelity", GroupPolicy, "DensityKV ablations: attention output error", "relative L2 error", "latent frame",
			perBlock(func(s BlockStat) float64 { return s.RelErr })},
		{"ablation_frame_coverage", GroupPolicy, "DensityKV ablations: per-frame coverage (end of stream)", "fraction", "source latent frame", frameCov},
	}
	for _, f := range figs {
		p, err := r.seriesPlot(f.group, f.title, f.xlabel, f.ylabel, f.xy)
		if err != nil {
			return files, err
		}
		if p == nil {
			continue
		}
		for _, ext := range []string{"png", "svg"} {
			path := filepath.Join(dir, f.name+"."+ext)
			if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
				return files, fmt.Errorf("eval: plot %s: %w", path, err)
			}
			files = append(files, path)
		}
	}
	return files, nil
}
