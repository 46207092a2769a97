package eval

import (
	"fmt"
	"math"
	"path/filepath"

	"gonum.org/v1/plot/vg"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/plots"
)

// Figure sizes: 18 cm wide (the legend sits right of the axes), 7 cm per
// panel.
const (
	figWidth   = 18 * vg.Centimeter
	panelH     = 7 * vg.Centimeter
	sweepPanel = 5.5 * vg.Centimeter
)

// lineStyle is a curve's colour index (plots.SeriesColor), dash pattern
// index (plots.SeriesDashes) and width.
type lineStyle struct {
	color, dashes int
	width         vg.Length
}

// baselineStyles fixes each baseline's curve in every figure. Native,
// Infinity-RoPE and FIFO keep the same tokens, so their curves often lie on
// top of each other: they get different colours and dash patterns.
// DensityKV (and the default row of every DensityKV table) is a thick black
// solid line.
var baselineStyles = map[string]lineStyle{
	"Native":         {0, 0, 0},
	"Infinity-RoPE":  {1, 1, 0},
	"Deep Forcing":   {2, 3, 0},
	"LongLive-RAG":   {3, 4, 0},
	"FIFO":           {4, 2, 0},
	"Uniform stride": {5, 5, 0},
	"DensityKV":      densityStyle,
}

var densityStyle = lineStyle{6, 0, vg.Points(2.2)}

// styleOf returns the curve style of variant v: the baselines' fixed styles,
// the DensityKV style for the suite's default DensityKV configuration in any
// table (Variant.Default), and otherwise the row's rank among the group's
// other rows.
func (r *Result) styleOf(v int) lineStyle {
	vr := r.Variants[v]
	if vr.Group == GroupBaselines {
		if s, ok := baselineStyles[vr.Label]; ok {
			return s
		}
	}
	if vr.Default {
		return densityStyle
	}
	k := 0
	for u := 0; u < v; u++ {
		if r.Variants[u].Group == vr.Group && !r.Variants[u].Default {
			k++
		}
	}
	return lineStyle{k % 6, (k + 1) % 7, 0} // (colour, dashes) pairs no baseline uses
}

func (st lineStyle) apply(s plots.Series) plots.Series {
	s.Color = plots.SeriesColor(st.color)
	s.Dashes = plots.SeriesDashes(st.dashes)
	s.Width = st.width
	return s
}

// finiteSeries builds a series from the finite points of f(0…n−1).
func finiteSeries(name string, n int, f func(i int) (x, y float64)) plots.Series {
	s := plots.Series{Name: name}
	for i := 0; i < n; i++ {
		x, y := f(i)
		if math.IsNaN(y) || math.IsInf(y, 0) {
			continue
		}
		s.X = append(s.X, x)
		s.Y = append(s.Y, y)
	}
	return s
}

// groupSeries returns one styled series per variant of group with at least
// one finite point.
func (r *Result) groupSeries(group string, points bool, xy func(v int) plots.Series) []plots.Series {
	var out []plots.Series
	for v, vr := range r.Variants {
		if vr.Group != group {
			continue
		}
		s := xy(v)
		if len(s.X) == 0 {
			continue
		}
		s.Name = vr.Label
		s.Points = points
		out = append(out, r.styleOf(v).apply(s))
	}
	return out
}

// figure is one standard figure: a name (file base), a figure title and its
// panels. Panels without series are dropped; a figure without panels is
// not written.
type figure struct {
	name, title string
	height      vg.Length
	panels      []plots.LinePanel
}

// panelTitle is the font size of panel titles (they say what is averaged).
const panelTitle = 10

// layersHeads describes what the metrics are averaged over.
func (r *Result) layersHeads() string {
	ls := "layers"
	if len(r.Layers) == 1 {
		ls = "layer"
	}
	return fmt.Sprintf("%d %s × %d heads", len(r.Layers), ls, r.Layout.Heads)
}

// figures returns the standard figures of r.
func (r *Result) figures() []figure {
	F := float64(r.Layout.FramesPerBlock)
	last := len(r.Horizons) - 1
	lastFrame := r.Horizons[last]*r.Layout.FramesPerBlock - 1
	lh := r.layersHeads()
	perQuery := fmt.Sprintf("per block; mean over %s × %d sampled queries", lh, r.Queries)
	perBlock := func(group string, f func(s BlockStat) float64) []plots.Series {
		return r.groupSeries(group, false, func(v int) plots.Series {
			return finiteSeries("", len(r.PerBlock[v]), func(b int) (float64, float64) { return F*float64(b+1) - 1, f(r.PerBlock[v][b]) })
		})
	}
	frameCov := func(group string) []plots.Series {
		return r.groupSeries(group, false, func(v int) plots.Series {
			fc := r.FrameCoverage[v][last]
			return finiteSeries("", len(fc), func(f int) (float64, float64) { return float64(f), fc[f] })
		})
	}
	perHorizon := func(group string, f func(Metrics) float64) []plots.Series {
		return r.groupSeries(group, true, func(v int) plots.Series {
			return finiteSeries("", len(r.Horizons), func(z int) (float64, float64) {
				return F * float64(r.Horizons[z]), r.Mean(v, z, f) / math.Sqrt(float64(r.Layout.HeadDim))
			})
		})
	}
	xBlock := "latent frame (last frame of the block)"
	panel := func(title, ylabel string, series []plots.Series) []plots.LinePanel {
		return []plots.LinePanel{{Title: title, TitleSize: panelTitle, XLabel: xBlock, YLabel: ylabel, YFromZero: true, Series: series}}
	}
	frameCoverage := func(name, group, what string) figure {
		return figure{name: name, title: fmt.Sprintf("%sfraction of each history frame still attended at frame %d", what, lastFrame),
			panels: []plots.LinePanel{{Title: "mean over " + lh + "; the sink and the local window are not history",
				TitleSize: panelTitle, XLabel: "source latent frame", YLabel: "fraction of the frame's tokens",
				YFromZero: true, YMax: 1.05, Series: frameCov(group)}}}
	}
	coverPanel := func(which string, f func(Metrics) float64) plots.LinePanel {
		return plots.LinePanel{Title: which + " over every history key of a head; mean over " + lh, TitleSize: panelTitle,
			XLabel: "horizon (latent frames)", YLabel: "cover " + which + " / √d_k", YFromZero: true,
			Series: perHorizon(GroupBaselines, f)}
	}
	figs := []figure{
		{name: "fidelity", title: "Attention output error against FullHistory, ‖O − O_full‖ / ‖O_full‖",
			panels: panel(perQuery, "relative L2 error (%)", perBlock(GroupBaselines, func(s BlockStat) float64 { return 100 * s.RelErr }))},
		{name: "dropped_mass", title: "FullHistory's attention mass on history the policy dropped",
			panels: panel(perQuery, "dropped mass (%)", perBlock(GroupBaselines, func(s BlockStat) float64 { return 100 * s.Dropped }))},
		{name: "recall", title: fmt.Sprintf("Top-%d recall of FullHistory's most-attended history tokens", r.TopK),
			panels: panel(perQuery, "recall (%)", perBlock(GroupBaselines, func(s BlockStat) float64 { return 100 * s.Recall }))},
		{name: "state_bytes", title: "Persistent temporal state (Policy.Bytes, the paper's accounting)",
			panels: panel("after each block; sum over all layers and heads", "MiB", perBlock(GroupBaselines, func(s BlockStat) float64 { return float64(s.Bytes) / (1 << 20) }))},
		frameCoverage("frame_coverage", GroupBaselines, "Retention: "),
		{name: "coverage_radius", title: "Coverage radius ÷ √d_k of the history by the retained keys (↓)", height: 2 * sweepPanel,
			panels: []plots.LinePanel{
				coverPanel("max", func(m Metrics) float64 { return m.CoverMax }),
				coverPanel("mean", func(m Metrics) float64 { return m.CoverMean }),
			}},
		{name: "ablation_fidelity", title: "DensityKV policy ablations: attention output error against FullHistory",
			panels: panel(perQuery, "relative L2 error (%)", perBlock(GroupPolicy, func(s BlockStat) float64 { return 100 * s.RelErr }))},
		frameCoverage("ablation_frame_coverage", GroupPolicy, "Ablations: "),
	}
	figs = append(figs, r.sweepFigures()...)
	for _, f := range figs {
		for i := range f.panels {
			f.panels[i].Legend = "right" // never over the data
		}
	}
	return figs
}

// sweeps are the parameter groups plotted as metric against value.
var sweeps = []struct {
	group, symbol, param string
	value                func(c memory.Config) float64
}{
	{GroupTau, "τ", "density-growth threshold τ", func(c memory.Config) float64 { return c.Bank.Tau }},
	{GroupCapacity, "M", "capacity M (tokens per head)", func(c memory.Config) float64 { return float64(c.Capacity) }},
	{GroupSigma, "σ", "Soft-Riesz length scale σ", func(c memory.Config) float64 { return c.Bank.Sigma }},
	{GroupP, "p", "Soft-Riesz exponent p", func(c memory.Config) float64 { return c.Bank.P }},
}

// sweepFigures draws, for every parameter sweep present, the metrics at the
// last horizon against the parameter value: one line per metric.
func (r *Result) sweepFigures() []figure {
	last := len(r.Horizons) - 1
	hz := r.Horizons[last] * r.Layout.FramesPerBlock
	inv := 1 / math.Sqrt(float64(r.Layout.HeadDim))
	lh := r.layersHeads()
	var out []figure
	for _, sw := range sweeps {
		var vs []int
		var xs []float64
		def := ""
		for v, vr := range r.Variants {
			if vr.Group != sw.group {
				continue
			}
			rc, err := vr.Config.Resolve()
			if err != nil {
				continue
			}
			vs = append(vs, v)
			xs = append(xs, sw.value(rc))
			if vr.Default {
				def = fmt.Sprintf(", default %s = %.3g", sw.symbol, sw.value(rc))
			}
		}
		if len(vs) == 0 {
			continue
		}
		line := func(name string, style int, f func(v int) float64) plots.Series {
			s := finiteSeries(name, len(vs), func(i int) (float64, float64) { return xs[i], f(vs[i]) })
			s.Points = true
			return lineStyle{style, style, 0}.apply(s)
		}
		mean := func(f func(Metrics) float64, scale float64) func(v int) float64 {
			return func(v int) float64 { return scale * r.Mean(v, last, f) }
		}
		pan := func(title, ylabel string, ss ...plots.Series) plots.LinePanel {
			return plots.LinePanel{Title: title, TitleSize: panelTitle, XLabel: sw.param, YLabel: ylabel, YFromZero: true, Series: ss}
		}
		out = append(out, figure{name: "sweep_" + sw.group, height: 3 * sweepPanel,
			title: fmt.Sprintf("DensityKV: sweep of %s at %d frames (others at their defaults%s)", sw.symbol, hz, def),
			panels: []plots.LinePanel{
				pan(fmt.Sprintf("attention fidelity: blocks 1–%d, mean over %s × %d sampled queries", r.Horizons[last], lh, r.Queries), "%",
					line("rel. L2 error ↓", 0, mean(func(m Metrics) float64 { return m.RelErr }, 100)),
					line("dropped mass ↓", 1, mean(func(m Metrics) float64 { return m.Dropped }, 100)),
					line(fmt.Sprintf("top-%d recall ↑", r.TopK), 2, mean(func(m Metrics) float64 { return m.Recall }, 100))),
				pan("coverage radius ÷ √d_k over every history key of a head; mean over "+lh, "radius / √d_k",
					line("cover max ↓", 0, mean(func(m Metrics) float64 { return m.CoverMax }, inv)),
					line("cover mean ↓", 1, mean(func(m Metrics) float64 { return m.CoverMean }, inv))),
				pan("mean age of the attended history; mean over "+lh, "latent frames",
					line("mean age", 3, mean(func(m Metrics) float64 { return m.RetainedAge }, 1))),
			}})
	}
	return out
}

// WritePlots writes the standard figures (PNG and SVG) into dir: per-block
// fidelity, dropped mass, recall and state of the baselines, their
// retention profile and coverage radius per horizon, the policy ablations'
// fidelity and retention profile, and one figure per parameter sweep. Every
// legend sits outside the axes and every curve keeps its colour and dash
// pattern across figures. It returns the paths written.
func (r *Result) WritePlots(dir string) ([]string, error) {
	var files []string
	for _, f := range r.figures() {
		var panels []plots.LinePanel
		for _, p := range f.panels {
			n := 0
			for _, s := range p.Series {
				n += len(s.X)
			}
			if n == 0 {
				continue
			}
			panels = append(panels, p)
		}
		if len(panels) == 0 {
			continue
		}
		h := f.height / vg.Length(len(f.panels))
		if h == 0 {
			h = panelH
		}
		fig, err := plots.Lines(f.name, f.title, figWidth, h, panels...)
		if err != nil {
			return files, fmt.Errorf("eval: %w", err)
		}
		paths, err := fig.Save(filepath.Join(dir, f.name))
		if err != nil {
			return files, fmt.Errorf("eval: %w", err)
		}
		files = append(files, paths...)
	}
	return files, nil
}
