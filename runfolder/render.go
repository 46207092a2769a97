package runfolder

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot/vg"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/plots"
	"github.com/densitykv/densitykv/record"
)

// Render draws every figure a run folder supports into <dir>/plots (from
// config.resolved.yaml, memory_log.jsonl, admissions.json, storage.json and
// attention_trace.json) and returns the PNG paths (SVG beside each).
func Render(dir string) ([]string, error) {
	if err := CheckRecorded(dir); err != nil {
		return nil, fmt.Errorf("trace: %w; no figure was drawn", err)
	}
	var cfg config.Config
	if err := LoadConfig(dir, &cfg); err != nil {
		return nil, err
	}
	lines, err := ReadLog(filepath.Join(dir, FileLog))
	if err != nil && !errors.Is(err, ErrTornLine) {
		return nil, fmt.Errorf("trace: %w", err)
	}
	// A torn last line (a run that failed or was killed while logging):
	// the figures show the complete lines; Inspect tells the caller the
	// run is not complete.
	if len(lines) == 0 {
		return nil, fmt.Errorf("trace: %s is empty: the run completed no block", filepath.Join(dir, FileLog))
	}
	out := filepath.Join(dir, DirPlots)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var figs []*plots.Figure
	add := func(f *plots.Figure, err error) error {
		if err != nil {
			return err
		}
		figs = append(figs, f)
		return nil
	}
	byPolicy := map[string][]LogLine{}
	for _, ln := range lines {
		byPolicy[ln.Policy] = append(byPolicy[ln.Policy], ln)
	}
	for _, name := range cfg.Policies {
		if len(byPolicy[name]) == 0 {
			continue
		}
		if name == memory.NameDensityKV || len(cfg.Policies) == 1 {
			if err := add(occupancyFigure(cfg, name, byPolicy[name])); err != nil {
				return nil, err
			}
		}
	}
	if err := add(policiesFigure(cfg, byPolicy)); err != nil {
		return nil, err
	}
	var adm Admissions
	if err := ReadJSON(filepath.Join(dir, FileAdmissions), &adm); err == nil {
		if slices.Contains(cfg.Policies, memory.NameDensityKV) {
			if err := add(montageFigure(cfg, &adm)); err != nil {
				return nil, err
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var sr StorageRun
	if err := ReadJSON(filepath.Join(dir, FileStorage), &sr); err == nil {
		if err := add(storageRunFigure(cfg, sr)); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var tf record.TraceFile
	if err := ReadJSON(filepath.Join(dir, FileTrace), &tf); err == nil {
		if err := add(record.TraceFigure(tf)); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if f, err := traceLayersFigure(dir); err != nil {
		return nil, err
	} else if f != nil {
		figs = append(figs, f)
	}
	lfs, err := lineageFigures(dir, cfg.Frames(), cfg.Stream.FPS)
	if err != nil {
		return nil, err
	}
	figs = append(figs, lfs...)
	if f, err := driftFigure(dir); err != nil {
		return nil, err
	} else if f != nil {
		figs = append(figs, f)
	}
	var pngs []string
	for _, f := range figs {
		paths, err := f.Save(filepath.Join(out, f.Name))
		if err != nil {
			return nil, err
		}
		pngs = append(pngs, paths[0])
	}
	return pngs, nil
}

// pickLayers returns up to n layer indices spread over [0, L).
func pickLayers(L, n int) []int {
	if L <= n {
		out := make([]int, L)
		for i := range out {
			out[i] = i
		}
		return out
	}
	var out []int
	for i := 0; i < n; i++ {
		l := int(math.Round(float64(i) * float64(L-1) / float64(n-1)))
		if len(out) == 0 || out[len(out)-1] != l {
			out = append(out, l)
		}
	}
	return out
}

// occupancyFigure: occupancy and admissions over blocks, per layer, with
// the min–max band over heads.
func occupancyFigure(cfg config.Config, policy string, lines []LogLine) (*plots.Figure, error) {
	L := cfg.Memory.Layout.Layers
	layers := pickLayers(L, 6)
	type agg struct{ x, occ, lo, hi, adm, alo, ahi, mand, capv []float64 }
	per := make([]agg, L)
	for _, ln := range lines {
		li := ln.Layer - cfg.Stream.FirstLayer
		if li < 0 || li >= L {
			continue
		}
		a := &per[li]
		mean := 0.0
		for _, o := range ln.Occupancy {
			mean += float64(o)
		}
		if len(ln.Occupancy) > 0 {
			mean /= float64(len(ln.Occupancy))
		}
		a.x = append(a.x, float64(ln.Block))
		a.occ = append(a.occ, mean)
		a.lo = append(a.lo, float64(ln.OccMin))
		a.hi = append(a.hi, float64(ln.OccMax))
		am, alo, ahi := float64(ln.Admitted), float64(ln.Admitted), float64(ln.Admitted)
		if len(ln.AdmittedHeads) > 0 {
			s := 0
			for _, v := range ln.AdmittedHeads {
				s += v
			}
			am = float64(s) / float64(len(ln.AdmittedHeads))
			alo, ahi = float64(slices.Min(ln.AdmittedHeads)), float64(slices.Max(ln.AdmittedHeads))
		}
		a.adm = append(a.adm, am)
		a.alo = append(a.alo, alo)
		a.ahi = append(a.ahi, ahi)
		a.mand = append(a.mand, float64(ln.EvictedMandatory))
		a.capv = append(a.capv, float64(ln.EvictedCapacity))
	}
	var occ, adm, ev []plots.Series
	for i, l := range layers {
		a := per[l]
		name := fmt.Sprintf("layer %d", cfg.Stream.FirstLayer+l)
		// Layers often coincide: a dash pattern each, the first drawn widest.
		w := vg.Points(1.2 + 0.7*float64(len(layers)-1-i))
		occ = append(occ, plots.Series{Name: name, X: a.x, Y: a.occ, Lo: a.lo, Hi: a.hi, Dashes: plots.SeriesDashes(i), Width: w})
		adm = append(adm, plots.Series{Name: name, X: a.x, Y: a.adm, Lo: a.alo, Hi: a.ahi, Dashes: plots.SeriesDashes(i), Width: w})
	}
	// Evictions summed over the shown layers' heads, split by cause.
	if len(layers) > 0 {
		x := per[layers[0]].x
		mand := make([]float64, len(x))
		capv := make([]float64, len(x))
		for l := 0; l < L; l++ {
			for i := range x {
				if i < len(per[l].mand) {
					mand[i] += per[l].mand[i]
					capv[i] += per[l].capv[i]
				}
			}
		}
		ev = []plots.Series{{Name: "mandatory (growth bound τ)", X: x, Y: mand}, {Name: "capacity (bank full)", X: x, Y: capv}}
	}
	seriesMax := func(ss []plots.Series) float64 {
		m := 0.0
		for _, s := range ss {
			for i, v := range s.Y {
				m = math.Max(m, v)
				if s.Hi != nil {
					m = math.Max(m, s.Hi[i])
				}
			}
		}
		return m
	}
	headroom := func(ss []plots.Series) float64 {
		if m := seriesMax(ss); m > 0 {
			return 1.3 * m
		}
		return 0
	}
	title := fmt.Sprintf("%s: bank occupancy and admissions per update (M = %d per head, %d layers × %d heads)",
		policy, cfg.Memory.Capacity, L, cfg.Memory.Layout.Heads)
	return plots.Lines("occupancy_admissions_"+policy, title, 18*vg.Centimeter, 6.5*vg.Centimeter,
		plots.LinePanel{Title: "occupancy per head (line: mean over heads, band: min–max over heads)",
			XLabel: fmt.Sprintf("block (%d latent frames each)", cfg.Memory.Layout.FramesPerBlock), YLabel: "stored states", Series: occ, YFromZero: true, YMax: 1.06 * seriesMax(occ), Legend: "right"},
		plots.LinePanel{Title: "admitted per head in each update (band: min–max over heads)",
			XLabel: "block", YLabel: "admitted states", Series: adm, YFromZero: true, YMax: 1.06 * seriesMax(adm), Legend: "none"},
		plots.LinePanel{Title: fmt.Sprintf("evictions per update, summed over all %d layers and heads", L),
			XLabel: "block", YLabel: "evicted states", Series: ev, YFromZero: true, YMax: headroom(ev), Legend: "top-left"},
	)
}

// policiesFigure: every policy's memory occupancy and attention keys over
// time (policiesPanels).
func policiesFigure(cfg config.Config, byPolicy map[string][]LogLine) (*plots.Figure, error) {
	title, panels := policiesPanels(cfg, byPolicy)
	return plots.Lines("policies", title, 20*vg.Centimeter, 7*vg.Centimeter, panels...)
}

// policiesPanels returns the title and panels of policies.png. Policies
// often coincide (several fill the same budget, Native holds no memory),
// so each has its own dash pattern, the earlier ones drawn wider beneath
// the later ones, the y axis has a margin (a line at 0 is not the axis),
// and the legend sits right of the axes.
func policiesPanels(cfg config.Config, byPolicy map[string][]LogLine) (string, []plots.LinePanel) {
	var occ, att []plots.Series
	for _, name := range cfg.Policies {
		ls := byPolicy[name]
		if len(ls) == 0 {
			continue
		}
		type acc struct {
			sum, n, lo, hi float64
			tok            float64
			sec            float64
		}
		var blocks []int
		m := map[int]*acc{}
		for _, ln := range ls {
			a := m[ln.Block]
			if a == nil {
				a = &acc{lo: math.Inf(1), hi: math.Inf(-1), sec: ln.Second}
				m[ln.Block] = a
				blocks = append(blocks, ln.Block)
			}
			for _, o := range ln.Occupancy {
				a.sum += float64(o)
				a.n++
			}
			a.lo, a.hi = math.Min(a.lo, float64(ln.OccMin)), math.Max(a.hi, float64(ln.OccMax))
			if ln.Layer == cfg.Stream.FirstLayer {
				a.tok = float64(ln.Tokens.Sink + ln.Tokens.Memory + ln.Tokens.Local)
			}
		}
		s := plots.Series{Name: name}
		t := plots.Series{Name: name}
		for _, b := range blocks {
			a := m[b]
			mean := 0.0
			if a.n > 0 {
				mean = a.sum / a.n
			}
			s.X = append(s.X, a.sec)
			s.Y = append(s.Y, mean)
			s.Lo = append(s.Lo, a.lo)
			s.Hi = append(s.Hi, a.hi)
			t.X = append(t.X, a.sec)
			t.Y = append(t.Y, a.tok)
		}
		occ = append(occ, s)
		att = append(att, t)
	}
	for _, ss := range [][]plots.Series{occ, att} {
		n := len(ss)
		for i := range ss {
			ss[i].Color = plots.SeriesColor(i)
			ss[i].Dashes = plots.SeriesDashes(i)
			ss[i].Width = vg.Points(1.2 + 0.7*float64(n-1-i))
		}
	}
	title := "Memory policies side by side on the same stream"
	if len(occ) == 1 {
		title = "Memory policy " + occ[0].Name + " on the stream"
	}
	return title, []plots.LinePanel{
		{Title: "historical memory per head (line: mean over layers and heads, band: min–max)",
			XLabel: "video time (s)", YLabel: "memory tokens", Series: occ, YFromZero: true, XFromZero: true, YMargin: true, Legend: "right"},
		{Title: "attention keys per query (sink + memory + local window, layer 0)",
			XLabel: "video time (s)", YLabel: "keys", Series: att, YFromZero: true, XFromZero: true, YMargin: true, Legend: "right"},
	}
}

// montageFigure: the supplementary admission figure from admissions.json.
func montageFigure(cfg config.Config, a *Admissions) (*plots.Figure, error) {
	P := a.Height * a.Width
	if len(a.TokenBanks) != a.Frames*P || len(a.LayerFrame) != a.Layers*a.Frames {
		return nil, fmt.Errorf("trace: %s: sizes do not match %d frames × %d tokens, %d layers", FileAdmissions, a.Frames, P, a.Layers)
	}
	m := plots.Montage{
		Title:  fmt.Sprintf("DensityKV admissions (%d layers × %d heads, M = %d, %g latent frames/s)", a.Layers, a.Heads, cfg.Memory.Capacity, a.FPS),
		Height: a.Height, Width: a.Width, Layers: a.Layers, FirstLayer: a.FirstLayer, Frames: a.Frames, FPS: a.FPS, InitFrames: a.InitFrames, Banks: a.Layers * a.Heads,
		TokenBanks: make([]float64, len(a.TokenBanks)), LayerFrame: make([]float64, len(a.LayerFrame)),
		EntryFraction: make([]float64, a.Frames), PositionFraction: make([]float64, a.Frames),
	}
	for i, v := range a.TokenBanks {
		m.TokenBanks[i] = float64(v)
	}
	for i, v := range a.LayerFrame {
		m.LayerFrame[i] = float64(v)
	}
	for f := 0; f < a.Frames; f++ {
		var entries, uniq float64
		for p := 0; p < P; p++ {
			v := a.TokenBanks[f*P+p]
			entries += float64(v)
			if v > 0 {
				uniq++
			}
		}
		m.EntryFraction[f] = entries / float64(a.Layers*a.Heads*P)
		m.PositionFraction[f] = uniq / float64(P)
	}
	return plots.AdmissionMontage("admission_montage", m)
}

// storageRunFigure: the measured live persistent bytes of every policy
// against the generated length.
func storageRunFigure(cfg config.Config, sr StorageRun) (*plots.Figure, error) {
	var ss []plots.Series
	for _, name := range cfg.Policies {
		bs := sr.Policies[name]
		if len(bs) == 0 {
			continue
		}
		s := plots.Series{Name: name}
		for i, b := range bs {
			if i < len(sr.Seconds) {
				s.X = append(s.X, sr.Seconds[i])
				s.Y = append(s.Y, float64(b)/(1<<20))
			}
		}
		ss = append(ss, s)
	}
	for i := range ss {
		ss[i].Color, ss[i].Dashes = plots.SeriesColor(i), plots.SeriesDashes(i)
		ss[i].Width = vg.Points(1.2 + 0.7*float64(len(ss)-1-i))
	}
	l := cfg.Memory.Layout
	return plots.Lines("storage_vs_horizon", "Persistent temporal state measured in this run", 20*vg.Centimeter, 9*vg.Centimeter,
		plots.LinePanel{Title: fmt.Sprintf("live bytes after each block (%d×%d tokens/frame, %d layers × %d heads, d = %d)",
			l.Height, l.Width, l.Layers, l.Heads, l.HeadDim), XLabel: "generated video (s)", YLabel: "MiB",
			Series: ss, YFromZero: true, XFromZero: true, YMargin: true, Legend: "right"})
}
