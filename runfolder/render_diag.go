package runfolder

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot/vg"

	"github.com/densitykv/densitykv/plots"
)

// ReadLineage reads density_kv_lineage.jsonl: the header, the events in
// order and the final records.
func ReadLineage(path string) (LineageHeader, []LineageEvent, []LineageFinal, error) {
	var hdr LineageHeader
	var evs []LineageEvent
	var fin []LineageFinal
	rerr := readLines(path, func(n int, b []byte) error {
		var k struct{ Kind string }
		if err := json.Unmarshal(b, &k); err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
		var err error
		switch k.Kind {
		case "header":
			err = json.Unmarshal(b, &hdr)
		case "event":
			var e LineageEvent
			if err = json.Unmarshal(b, &e); err == nil {
				evs = append(evs, e)
			}
		case "final":
			var e LineageFinal
			if err = json.Unmarshal(b, &e); err == nil {
				fin = append(fin, e)
			}
		default:
			err = fmt.Errorf("kind %q (want header, event or final)", k.Kind)
		}
		if err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
		return nil
	})
	if rerr != nil && !errors.Is(rerr, ErrTornLine) {
		return hdr, nil, nil, rerr
	}
	if hdr.Format == "" {
		return hdr, nil, nil, fmt.Errorf("%s: no header line", path)
	}
	// A torn last line: the complete lines, and the error saying so.
	return hdr, evs, fin, rerr
}

// lineageFigures draws, for each traced bank (at most 4), the bank's
// composition by source frame after every update (replayed from the
// events) and its admissions by source frame.
func lineageFigures(dir string, frames int, fps float64) ([]*plots.Figure, error) {
	hdr, evs, _, err := ReadLineage(filepath.Join(dir, FileLineage))
	if errors.Is(err, ErrTornLine) {
		err = nil // an incomplete run: its complete lines
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	P := hdr.FrameSeqLength
	if P <= 0 || frames <= 0 {
		return nil, fmt.Errorf("%s: frame_seq_length %d, %d frames", FileLineage, P, frames)
	}
	type key struct{ l, h int }
	var order []key
	byKey := map[key][]LineageEvent{}
	for _, e := range evs {
		k := key{e.Layer, e.Head}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], e)
	}
	var figs []*plots.Figure
	for _, k := range order[:min(4, len(order))] {
		es := byKey[k]
		U := len(es)
		comp := make([]float64, frames*U) // rows source frames, cols updates
		adm := make([]float64, frames*U)
		var bank []int64
		frameOf := func(id int64) int { return int(id/int64(P)) + hdr.SourceFrameOffset }
		for u, e := range es {
			ev := map[int64]bool{}
			for _, s := range e.EvictedSource {
				ev[s] = true
			}
			next := bank[:0:0]
			for _, s := range bank {
				if !ev[s] {
					next = append(next, s)
				}
			}
			for j, a := range e.Accepted {
				if a == 1 {
					next = append(next, e.CandidateSource[j])
					if f := frameOf(e.CandidateSource[j]); f >= 0 && f < frames {
						adm[f*U+u]++
					}
				}
			}
			bank = next
			for _, s := range bank {
				if f := frameOf(s); f >= 0 && f < frames {
					comp[f*U+u]++
				}
			}
		}
		x0, dx := 0.0, 1.0
		if U > 1 {
			x0 = float64(es[0].QueryFrame) / fps
			dx = float64(es[U-1].QueryFrame-es[0].QueryFrame) / float64(U-1) / fps
		}
		grid := func(z []float64) plots.Grid {
			return plots.Grid{Cols: U, Rows: frames, Z: z, X0: x0, DX: dx, DY: 1 / fps}
		}
		f, err := plots.HeatGrid(fmt.Sprintf("lineage_l%d_h%d", k.l, k.h),
			fmt.Sprintf("DensityKV bank of layer %d head %d over the run (from %s)", k.l, k.h, FileLineage), 2, 11*vg.Centimeter, 10*vg.Centimeter,
			plots.HeatPanel{Title: "states held, by source frame, after each update", XLabel: "video time of the update (s)",
				YLabel: "source time (s)", ZLabel: "states from the frame", Grid: grid(comp), Palette: "blues"},
			plots.HeatPanel{Title: "states admitted by each update, by source frame", XLabel: "video time of the update (s)",
				YLabel: "source time (s)", ZLabel: "admitted states", Grid: grid(adm), Palette: "oranges"})
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	return figs, nil
}

// traceLayersFigure draws the per-layer trace (at most 6 layers, spread
// over those traced): each layer's attention from each query frame to
// each source frame, averaged over its heads.
func traceLayersFigure(dir string) (*plots.Figure, error) {
	lt, err := ReadTraceLayers(filepath.Join(dir, FileTraceLayers))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(lt.Layers) == 0 {
		return nil, nil
	}
	F, H := lt.Frames, lt.Heads
	var panels []plots.HeatPanel
	for _, i := range pickLayers(len(lt.Layers), 6) {
		z := make([]float64, F*F)
		for h := 0; h < H; h++ {
			for o := 0; o < F*F; o++ {
				z[o] += float64(lt.Mass[i][h*F*F+o]) / float64(H)
			}
		}
		panels = append(panels, plots.HeatPanel{Title: fmt.Sprintf("layer %d (mean over %d heads)", lt.Layers[i], H),
			XLabel: "source frame", YLabel: "query frame", ZLabel: "attention (log)", Grid: plots.Grid{Cols: F, Rows: F, Z: z},
			Log: true, Palette: "magma", ImageY: true})
	}
	return plots.HeatGrid("attention_trace_layers", "Attention from each query frame to each source frame, per layer (query tokens averaged)",
		min(3, len(panels)), 9*vg.Centimeter, 8*vg.Centimeter, panels...)
}
