package parity

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/runfolder"
)

// trace is a per-layer attention trace (temporal_attention_trace_v2): per
// traced layer, the mass each query frame puts on each source frame.
type trace struct {
	path   string
	frames int
	layers map[int]*traceLayer
}

// traceLayer is one layer's trace, batch 0: mass [H][F][F] (query frame,
// source frame), averaged over the frame's traced calls, and count [F]
// (traced calls per query frame; 0: not traced).
type traceLayer struct {
	heads  []int // the traced heads
	h      int
	mass   []float64
	counts []float64
}

// readTraceSafetensors reads attention_trace_layers.safetensors (every
// head traced).
func readTraceSafetensors(path string) (*trace, error) {
	lt, err := runfolder.ReadTraceLayers(path)
	if err != nil {
		return nil, err
	}
	tr := &trace{path: path, frames: lt.Frames, layers: map[int]*traceLayer{}}
	for i, l := range lt.Layers {
		tl := &traceLayer{h: lt.Heads, mass: f64(lt.Mass[i]), counts: f64(lt.Count[i])}
		for h := range lt.Heads {
			tl.heads = append(tl.heads, h)
		}
		tr.layers[l] = tl
	}
	return tr, nil
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// readTracePT reads the authors' export_temporal_attention_trace saved with
// torch.save: format, max_frames and layers {"L": {heads, mass [B, H, F,
// F], count [B, F]}}.
func readTracePT(path string) (*trace, error) {
	tree, err := checkpoint.TorchTreeFile(path)
	if err != nil {
		return nil, err
	}
	top, _ := tree.(map[string]any)
	if f, _ := top["format"].(string); f != "temporal_attention_trace_v2" {
		return nil, fmt.Errorf("%s: format %q, want temporal_attention_trace_v2 (export_temporal_attention_trace)", path, top["format"])
	}
	layers, ok := top["layers"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: no layers dictionary", path)
	}
	tr := &trace{path: path, layers: map[int]*traceLayer{}}
	names := make([]string, 0, len(layers))
	for n := range layers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		where := path + ": layers." + name
		l, err := strconv.Atoi(name)
		ld, ok := layers[name].(map[string]any)
		if err != nil || !ok {
			return nil, fmt.Errorf("%s: not a layer's trace", where)
		}
		mass, ok1 := ld["mass"].(*checkpoint.TorchTensor)
		count, ok2 := ld["count"].(*checkpoint.TorchTensor)
		if !ok1 || !ok2 || len(mass.Shape) != 4 || len(count.Shape) != 2 || mass.Shape[2] != mass.Shape[3] ||
			count.Shape[0] != mass.Shape[0] || count.Shape[1] != mass.Shape[2] || mass.Shape[0] < 1 {
			return nil, fmt.Errorf("%s: want mass [B, H, F, F] and count [B, F] tensors", where)
		}
		H, F := mass.Shape[1], mass.Shape[2]
		if tr.frames == 0 {
			tr.frames = F
		} else if tr.frames != F {
			return nil, fmt.Errorf("%s: %d frames, another layer has %d", where, F, tr.frames)
		}
		heads, err := intsOf(ld["heads"])
		if err != nil {
			return nil, fmt.Errorf("%s.heads: %w", where, err)
		}
		tl := &traceLayer{h: H, mass: mass.Float64()[:H*F*F], counts: count.Float64()[:F]} // batch 0
		for _, h := range heads {
			if h < 0 || int(h) >= H {
				return nil, fmt.Errorf("%s.heads: head %d of %d", where, h, H)
			}
			tl.heads = append(tl.heads, int(h))
		}
		tr.layers[l] = tl
	}
	return tr, nil
}
