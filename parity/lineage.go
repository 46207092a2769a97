package parity

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/checkpoint"
)

// lhKey names one bank update of a traced bank: the first frame of the
// block whose first call ran it, the layer and the head.
type lhKey struct{ QueryFrame, Layer, Head int }

// lineage is the part of a DensityKV lineage the comparison reads: the
// global source ids each traced bank admitted at each update, and its
// final contents.
type lineage struct {
	path           string
	tokensPerFrame int // frame_seq_length of the header (0: none)
	admitted       map[lhKey][]int64
	final          map[[2]int][]int64 // (layer, head)
}

// sorted returns ids sorted, without duplicates.
func sorted(ids []int64) []int64 {
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := ids[:0]
	for i, v := range ids {
		if i == 0 || v != ids[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// lineageLine is any line of density_kv_lineage.jsonl (the fields the
// comparison needs).
type lineageLine struct {
	Kind              string  `json:"kind"`
	FrameSeqLength    int     `json:"frame_seq_length"`
	SourceFrameOffset int64   `json:"source_frame_offset"`
	QueryFrame        int     `json:"query_frame"`
	SourceBase        int64   `json:"source_base"`
	Layer             int     `json:"layer"`
	Batch             int     `json:"batch"`
	Head              int     `json:"head"`
	Accepted          []int   `json:"accepted"`
	CandidateIndex    []int64 `json:"candidate_index"`
	CandidateSource   []int64 `json:"candidate_source"`
	SourceIndex       []int64 `json:"source_index"`
}

// readLineageJSONL reads density_kv_lineage.jsonl (runfolder's lineage: a
// header line, then events and finals in the authors' field names).
func readLineageJSONL(path string) (*lineage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lg := &lineage{path: path, admitted: map[lhKey][]int64{}, final: map[[2]int][]int64{}}
	dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	var offset int64
	for n := 1; ; n++ {
		var ln lineageLine
		if err := dec.Decode(&ln); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: record %d: %w", path, n, err)
		}
		switch ln.Kind {
		case "header":
			if ln.FrameSeqLength <= 0 || ln.SourceFrameOffset < 0 {
				return nil, fmt.Errorf("%s: header: frame_seq_length %d, source_frame_offset %d", path, ln.FrameSeqLength, ln.SourceFrameOffset)
			}
			lg.tokensPerFrame, offset = ln.FrameSeqLength, ln.SourceFrameOffset*int64(ln.FrameSeqLength)
		case "event":
			if lg.tokensPerFrame == 0 {
				return nil, fmt.Errorf("%s: record %d: an event before the header", path, n)
			}
			if ln.Batch != 0 {
				continue
			}
			ids, err := admittedIDs(ln.Accepted, ln.CandidateSource, ln.CandidateIndex, ln.SourceBase)
			if err != nil {
				return nil, fmt.Errorf("%s: record %d (layer %d head %d frame %d): %w", path, n, ln.Layer, ln.Head, ln.QueryFrame, err)
			}
			lg.add(lhKey{ln.QueryFrame, ln.Layer, ln.Head}, ids, offset)
		case "final":
			lg.final[[2]int{ln.Layer, ln.Head}] = globalIDs(ln.SourceIndex, offset)
		default:
			return nil, fmt.Errorf("%s: record %d: kind %q, want header, event or final", path, n, ln.Kind)
		}
	}
	if lg.tokensPerFrame == 0 {
		return nil, fmt.Errorf("%s: no header line", path)
	}
	return lg, nil
}

// admittedIDs returns the source ids of the accepted candidates: their
// candidate_source, or candidate_index + source_base where the event has
// no candidate_source (the authors' detailed format).
func admittedIDs(accepted []int, source, index []int64, base int64) ([]int64, error) {
	if source == nil {
		if index == nil {
			return nil, errors.New("neither candidate_source nor candidate_index")
		}
		source = make([]int64, len(index))
		for i, x := range index {
			source[i] = x + base
		}
	}
	if len(accepted) != len(source) {
		return nil, fmt.Errorf("%d accepted flags for %d candidates", len(accepted), len(source))
	}
	var ids []int64
	for i, a := range accepted {
		if a != 0 {
			ids = append(ids, source[i])
		}
	}
	return ids, nil
}

func globalIDs(ids []int64, offset int64) []int64 {
	out := make([]int64, len(ids))
	for i, v := range ids {
		out[i] = v + offset
	}
	return sorted(out)
}

// add records the admissions of an update (several events of one update,
// which the authors' chunked updates may write, are merged).
func (lg *lineage) add(k lhKey, ids []int64, offset int64) {
	lg.admitted[k] = sorted(append(lg.admitted[k], globalIDs(ids, offset)...))
}

// readLineagePT reads the authors' export_density_kv_lineage saved with
// torch.save: format, frame_seq_length, source_frame_offset and layers
// {"L": {"events": [...], "final_heads": {"b0_hH": {source_index}}}}.
func readLineagePT(path string) (*lineage, error) {
	tree, err := checkpoint.TorchTreeFile(path)
	if err != nil {
		return nil, err
	}
	top, _ := tree.(map[string]any)
	if f, _ := top["format"].(string); !strings.HasPrefix(f, "density_kv_lineage_v") {
		return nil, fmt.Errorf("%s: format %q, want density_kv_lineage_v1 or v2 (export_density_kv_lineage)", path, top["format"])
	}
	P, _ := top["frame_seq_length"].(int64)
	off, _ := top["source_frame_offset"].(int64)
	if P <= 0 || off < 0 {
		return nil, fmt.Errorf("%s: frame_seq_length %v, source_frame_offset %v", path, top["frame_seq_length"], top["source_frame_offset"])
	}
	layers, ok := top["layers"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: no layers dictionary", path)
	}
	lg := &lineage{path: path, tokensPerFrame: int(P), admitted: map[lhKey][]int64{}, final: map[[2]int][]int64{}}
	offset := off * P
	for name, lv := range layers {
		layer, err := strconv.Atoi(name)
		ld, ok := lv.(map[string]any)
		if err != nil || !ok {
			return nil, fmt.Errorf("%s: layers.%s is not a layer's lineage", path, name)
		}
		events, _ := ld["events"].([]any)
		for i, ev := range events {
			e, ok := ev.(map[string]any)
			where := fmt.Sprintf("%s: layers.%s.events[%d]", path, name, i)
			if !ok {
				return nil, fmt.Errorf("%s: not a dictionary", where)
			}
			if b, _ := e["batch"].(int64); b != 0 {
				continue
			}
			qf, ok1 := e["query_frame"].(int64)
			head, ok2 := e["head"].(int64)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("%s: no query_frame or head", where)
			}
			acc, err := intsOf(e["accepted"])
			if err != nil {
				return nil, fmt.Errorf("%s: accepted: %w", where, err)
			}
			var src, idx []int64
			if e["candidate_source"] != nil {
				if src, err = intsOf(e["candidate_source"]); err != nil {
					return nil, fmt.Errorf("%s: candidate_source: %w", where, err)
				}
			} else if idx, err = intsOf(e["candidate_index"]); err != nil {
				return nil, fmt.Errorf("%s: candidate_index: %w", where, err)
			}
			base, _ := e["source_base"].(int64)
			a := make([]int, len(acc))
			for k, v := range acc {
				a[k] = int(v)
			}
			ids, err := admittedIDs(a, src, idx, base)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			lg.add(lhKey{int(qf), layer, int(head)}, ids, offset)
		}
		finals, _ := ld["final_heads"].(map[string]any)
		for hn, fv := range finals {
			var b, h int
			if _, err := fmt.Sscanf(hn, "b%d_h%d", &b, &h); err != nil {
				return nil, fmt.Errorf("%s: layers.%s.final_heads.%s: not b<batch>_h<head>", path, name, hn)
			}
			fd, _ := fv.(map[string]any)
			if b != 0 || fd == nil {
				continue
			}
			ids, err := intsOf(fd["source_index"])
			if err != nil {
				return nil, fmt.Errorf("%s: layers.%s.final_heads.%s.source_index: %w", path, name, hn, err)
			}
			lg.final[[2]int{layer, h}] = globalIDs(ids, offset)
		}
	}
	return lg, nil
}

// intsOf returns the values of a tensor (or list of integers) as int64;
// floating values must be integers.
func intsOf(v any) ([]int64, error) {
	switch x := v.(type) {
	case *checkpoint.TorchTensor:
		f := x.Float64()
		out := make([]int64, len(f))
		for i, y := range f {
			if y != float64(int64(y)) {
				return nil, fmt.Errorf("value %d is %v, not an integer", i, y)
			}
			out[i] = int64(y)
		}
		return out, nil
	case []any:
		out := make([]int64, len(x))
		for i, y := range x {
			n, ok := y.(int64)
			if !ok {
				return nil, fmt.Errorf("item %d is %T, not an integer", i, y)
			}
			out[i] = n
		}
		return out, nil
	}
	return nil, fmt.Errorf("%T is not a tensor or list of integers", v)
}
