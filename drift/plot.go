package drift

import (
	"errors"

	"github.com/densitykv/densitykv/plots"
	"gonum.org/v1/plot/vg"
)

// Figure draws a run's records: the pixel statistics (with frames) and the
// latent RMS ratio, one panel each, against the block.
func Figure(title string, recs []Record) (*plots.Figure, error) {
	if len(recs) == 0 {
		return nil, errors.New("drift: no records to plot")
	}
	series := func(names ...string) []plots.Series {
		var out []plots.Series
		for i, name := range names {
			s := plots.Series{Name: name, Points: len(recs) < 40, Color: plots.SeriesColor(i), Dashes: plots.SeriesDashes(i)}
			for _, r := range recs {
				if v, ok := r.Stat(name); ok {
					s.X = append(s.X, float64(r.Block))
					s.Y = append(s.Y, v)
				}
			}
			if len(s.X) > 0 {
				out = append(out, s)
			}
		}
		return out
	}
	var panels []plots.LinePanel
	add := func(title, ylabel string, names ...string) {
		if s := series(names...); len(s) > 0 {
			panels = append(panels, plots.LinePanel{Title: title, XLabel: "block", YLabel: ylabel, Series: s, YFromZero: true, YMargin: true, Legend: "right"})
		}
	}
	add("Mean frame against the first block's", "mean |Δ| (levels)", "first_diff")
	add("Colour-histogram distance from the first block", "total variation", "hist_dist")
	add("Change inside blocks and across seams", "mean |Δ| (levels)", "intra_change", "seam_change")
	add("Seam flicker (seam change / in-block change)", "ratio", "seam_flicker")
	add("Latent RMS over the first block's", "ratio", "latent_rms_ratio")
	if len(panels) == 0 {
		return nil, errors.New("drift: the records have no statistic to plot")
	}
	return plots.Lines("drift", title, 20*vg.Centimeter, 6*vg.Centimeter, panels...)
}
