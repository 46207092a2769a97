package memory

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/densitykv/densitykv/bank"
)

// The states of format-1 snapshots (snapshot.go), as gob decodes them: gob
// matches struct fields by name, so these keep the field names and types
// of the code that wrote them (frames of float32 K/V per layer, banks as
// their own snapshots' bytes).

type frameV1 struct {
	ID   int
	K, V [][]float32
}

// framesV1 converts legacy frames (float32 tensors).
func framesV1(fs []*frameV1) []*frame {
	out := make([]*frame, len(fs))
	for i, f := range fs {
		if f == nil {
			continue
		}
		fr := &frame{ID: f.ID, K: make([]tensor, len(f.K)), V: make([]tensor, len(f.V))}
		for l := range f.K {
			fr.K[l] = f32Tensor(f.K[l])
		}
		for l := range f.V {
			fr.V[l] = f32Tensor(f.V[l])
		}
		out[i] = fr
	}
	return out
}

type nativeStateV1 struct{ Frames []*frameV1 }

type windowStateV1 struct {
	Sink, Recent []*frameV1
	Seen         int
	Tokens       *tokenState
	RAG          *ragStateV1
	Banks        [][]byte
	UpdateBlocks []int
}

type ragStateV1 struct {
	Descs  map[int][]float32
	Pool   []*frameV1
	Picked []int
}

// dfStateV1 is Deep Forcing's state in a format-1 snapshot: Version 2
// (the authors' adapter) or, without Version, the earlier reading, whose
// query frames (QBuf) Load refuses.
type dfStateV1 struct {
	Version    int
	Sink, Hist []*frameV1
	Mid        []dfStore
	QBuf       [][]qframe
	QTok       [][]float32
	Compressed bool
	SinkBase   []int
	SinkSet    []bool
	SinkShift  []int
}

// qframe is a buffered query frame of the earlier reading.
type qframe struct {
	ID int
	Q  []float32
}

// convert fills st from a legacy state (banks decoded from their bytes).
func (v *windowStateV1) convert(st *windowState) error {
	st.Sink, st.Recent, st.Seen, st.Tokens, st.UpdateBlocks = framesV1(v.Sink), framesV1(v.Recent), v.Seen, v.Tokens, v.UpdateBlocks
	if v.RAG != nil {
		st.RAG = &ragState{Descs: v.RAG.Descs, Pool: framesV1(v.RAG.Pool), Picked: v.RAG.Picked}
	}
	for l, raw := range v.Banks {
		b, err := bank.Load(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("layer %d bank: %v", l, err)
		}
		st.Banks = append(st.Banks, b)
	}
	return nil
}

func slicesSort(x []int) { sort.Ints(x) }
