package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/internal/vocab"
)

// Recache selects what a generate run does to the cached K/V at a prompt
// switch (generate.recache, --recache): none (the DensityKV authors'
// pipeline: only the cross-attention changes) or longlive (LongLive's
// interactive pipeline re-runs the most recent frames under the new
// prompt, see memory.Recacher).
type Recache uint8

const (
	RecacheNone Recache = iota
	RecacheLongLive
)

var recacheNames = vocab.List{Pkg: "config", Kind: "recache", Names: []string{"none", "longlive"}}

func (r Recache) String() string               { return recacheNames.String(uint8(r), "Recache") }
func (r Recache) MarshalText() ([]byte, error) { return recacheNames.Marshal(uint8(r)) }
func (r *Recache) UnmarshalText(b []byte) error {
	x, err := recacheNames.Parse(b)
	if err == nil {
		*r = Recache(x)
	}
	return err
}

// Names lists the recache modes.
func (Recache) Names() []string { return recacheNames.All() }

// SourceIDs selects how provenance ids are written (generate.source_ids,
// --source-ids): global (this project's global token index frame·P +
// h·W + w, sink frames included) or authors (the DensityKV authors'
// source_index: the count of non-sink tokens before the token, so their
// frame is id/P + SinkFrames, their lineage's source_frame_offset).
type SourceIDs uint8

const (
	SourceGlobal SourceIDs = iota
	SourceAuthors
)

var sourceIDNames = vocab.List{Pkg: "config", Kind: "source ids", Names: []string{"global", "authors"}}

func (s SourceIDs) String() string               { return sourceIDNames.String(uint8(s), "SourceIDs") }
func (s SourceIDs) MarshalText() ([]byte, error) { return sourceIDNames.Marshal(uint8(s)) }
func (s *SourceIDs) UnmarshalText(b []byte) error {
	x, err := sourceIDNames.Parse(b)
	if err == nil {
		*s = SourceIDs(x)
	}
	return err
}

// Names lists the provenance id conventions.
func (SourceIDs) Names() []string { return sourceIDNames.All() }

// ParseIndexList reads a list of indices below n: "all" (0..n−1), "none"
// (empty, not nil), or comma-separated integers (sorted, each once).
// what names the list in errors.
func ParseIndexList(spec, what string, n int) ([]int, error) {
	s := strings.ToLower(strings.TrimSpace(spec))
	switch s {
	case "all":
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	case "none", "":
		return []int{}, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 || v >= n {
			return nil, fmt.Errorf("%s %q: %q is not all, none or a list of integers in 0..%d", what, spec, f, n-1)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}
