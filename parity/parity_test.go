package parity

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/internal/torchtest"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
)

// The synthetic runs: 2 blocks of 3 frames of [2, 2, 3] latents; 4 tokens
// per frame, 1 sink frame; the lineage traces layer 0, heads 0 and 1; the
// attention trace layer 1, 2 heads, 6 frames.
const (
	tF, tC, tH, tW = 3, 2, 2, 3
	tBlocks        = 2
	tP, tSink      = 4, 1
	tHeads         = 2
	tFrames        = tF * tBlocks
)

// run is the content of a synthetic run: latents [frames][C][H][W], the
// global source ids each (block, head) update admitted and each head's
// final bank, and the trace's mass [H][F][F] and count [F].
type run struct {
	latents  []float32
	admitted [tBlocks][tHeads][]int64
	final    [tHeads][]int64
	mass     []float32
	count    []float32
}

func baseRun() *run {
	r := &run{latents: make([]float32, tFrames*tC*tH*tW), mass: make([]float32, tHeads*tFrames*tFrames), count: make([]float32, tFrames)}
	for i := range r.latents {
		r.latents[i] = float32(math.Sin(float64(i))) * 2
	}
	r.admitted = [tBlocks][tHeads][]int64{{{4, 5, 6}, {4, 7}}, {{8, 9, 12}, {10, 11, 13, 14}}}
	r.final = [tHeads][]int64{{4, 5, 6, 8, 9, 12}, {4, 7, 10, 11}}
	for h := range tHeads {
		for q := range tFrames {
			r.count[q] = 1
			for s := 0; s <= q; s++ { // causal: mass on frames ≤ q, summing to 1
				r.mass[(h*tFrames+q)*tFrames+s] = 1 / float32(q+1)
			}
		}
	}
	return r
}

// writeRun writes r as a densitykv run folder (manifest and shards,
// density_kv_lineage.jsonl with global ids, the per-layer trace).
func writeRun(t *testing.T, dir string, r *run) {
	t.Helper()
	w, err := rollout.NewWriter(dir, rollout.Manifest{Policy: "densitykv", Channels: tC, Height: tH, Width: tW, FramesPerBlock: tF, BlocksPlanned: tBlocks})
	if err != nil {
		t.Fatal(err)
	}
	bs := tF * tC * tH * tW
	for b := range tBlocks {
		if err := w.WriteBlock(b, r.latents[b*bs:(b+1)*bs], 0); err != nil {
			t.Fatal(err)
		}
	}
	var lines []string
	add := func(v any) {
		b, _ := json.Marshal(v)
		lines = append(lines, string(b))
	}
	add(runfolder.LineageHeader{Kind: "header", Format: "density_kv_lineage_v1", FrameSeqLength: tP, SourceIDs: "global", Layers: []int{0}, Heads: []int{0, 1}})
	for b := range tBlocks {
		for h := range tHeads {
			// Candidates: the block's frame tokens; accepted the admitted.
			ev := runfolder.LineageEvent{Kind: "event", QueryFrame: b * tF, Layer: 0, Head: h, Mode: "frozen_snapshot"}
			for id := int64(tP * tSink); id < int64(tP*tFrames); id++ {
				ev.CandidateSource = append(ev.CandidateSource, id)
				acc := 0
				if slices.Contains(r.admitted[b][h], id) {
					acc = 1
				}
				ev.Accepted = append(ev.Accepted, acc)
			}
			add(ev)
		}
	}
	for h := range tHeads {
		add(runfolder.LineageFinal{Kind: "final", Layer: 0, Head: h, Count: len(r.final[h]), SourceIndex: r.final[h]})
	}
	if err := os.WriteFile(filepath.Join(dir, runfolder.FileLineage), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := []checkpoint.WriteTensor{
		{Name: "layers.1.mass", Shape: []int{1, tHeads, tFrames, tFrames}, Data: r.mass},
		{Name: "layers.1.source_token_count", Shape: []int{1, tHeads, tFrames, tFrames}, Data: make([]float32, len(r.mass))},
		{Name: "layers.1.count", Shape: []int{1, tFrames}, Data: r.count},
	}
	meta := map[string]string{"format": "temporal_attention_trace_v2", "layers": "[1]", "heads": "2", "max_frames": "6", "frame_seq_length": "4", "denoise_call": "3"}
	if err := checkpoint.WriteSafetensorsFile(filepath.Join(dir, runfolder.FileTraceLayers), ts, meta); err != nil {
		t.Fatal(err)
	}
}

func writePT(t *testing.T, path string, d torchtest.Dict) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, torchtest.Bytes(d, torchtest.Options{}), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeAuthors writes r as the authors' pipeline does: LatentShardWriter
// shards (of 4 and 2 frames: not blocks), export_density_kv_lineage (their
// ids: the non-sink token count, source_frame_offset 1) and
// export_temporal_attention_trace, each with torch.save.
func writeAuthors(t *testing.T, dir string, r *run) {
	t.Helper()
	fs := tC * tH * tW
	for _, s := range [][2]int{{0, 4}, {4, 6}} {
		writePT(t, filepath.Join(dir, "rank0-0-0_regular_stream", "latents", "latent_"+pad6(s[0])+"_"+pad6(s[1]-1)+".pt"), torchtest.Dict{
			{Key: "start_frame", Value: s[0]}, {Key: "end_frame", Value: s[1]},
			{Key: "latents", Value: &torchtest.Tensor{Shape: []int{1, s[1] - s[0], tC, tH, tW}, Data: r.latents[s[0]*fs : s[1]*fs]}},
		})
	}
	var events torchtest.List
	for b := range tBlocks {
		for h := range tHeads {
			base := int64(b*tF*tP - tP*tSink) // their source_base: tokens offered before
			var idx, acc []float32
			for id := int64(tP * tSink); id < int64(tP*tFrames); id++ {
				idx = append(idx, float32(id-int64(tP*tSink)-base))
				a := float32(0)
				if slices.Contains(r.admitted[b][h], id) {
					a = 1
				}
				acc = append(acc, a)
			}
			n := len(idx)
			// The detailed format: no candidate_source, ids from index + base.
			events = append(events, torchtest.Dict{{Key: "query_frame", Value: b * tF}, {Key: "source_base", Value: int(base)}, {Key: "layer", Value: 0},
				{Key: "batch", Value: 0}, {Key: "head", Value: h}, {Key: "mode", Value: "frozen_snapshot"},
				{Key: "candidate_index", Value: &torchtest.Tensor{Shape: []int{n}, Data: idx}},
				{Key: "accepted", Value: &torchtest.Tensor{Shape: []int{n}, Data: acc}}})
		}
	}
	finals := torchtest.Dict{}
	for h := range tHeads {
		var src []float32
		for _, id := range r.final[h] {
			src = append(src, float32(id-tP*tSink))
		}
		finals = append(finals, torchtest.KV{Key: "b0_h" + string(rune('0'+h)), Value: torchtest.Dict{{Key: "count", Value: len(src)},
			{Key: "source_index", Value: &torchtest.Tensor{Shape: []int{len(src)}, Data: src}}}})
	}
	writePT(t, filepath.Join(dir, "rank0-0-0_regular_density_lineage.pt"), torchtest.Dict{
		{Key: "format", Value: "density_kv_lineage_v2"}, {Key: "frame_seq_length", Value: tP}, {Key: "spatial_height", Value: 2}, {Key: "spatial_width", Value: 2},
		{Key: "source_frame_offset", Value: tSink},
		{Key: "layers", Value: torchtest.Dict{{Key: "0", Value: torchtest.Dict{{Key: "events", Value: events}, {Key: "final_count", Value: 6}, {Key: "final_heads", Value: finals}}}}},
	})
	writePT(t, filepath.Join(dir, "rank0-0-0_regular_temporal_attention.pt"), torchtest.Dict{
		{Key: "format", Value: "temporal_attention_trace_v2"}, {Key: "definition", Value: "..."}, {Key: "frame_seq_length", Value: tP}, {Key: "max_frames", Value: tFrames},
		{Key: "layers", Value: torchtest.Dict{{Key: "1", Value: torchtest.Dict{{Key: "heads", Value: torchtest.List{0, 1}},
			{Key: "mass", Value: &torchtest.Tensor{Shape: []int{1, tHeads, tFrames, tFrames}, Data: r.mass}},
			{Key: "source_token_count", Value: &torchtest.Tensor{Shape: []int{1, tHeads, tFrames, tFrames}, Data: make([]float32, len(r.mass))}},
			{Key: "count", Value: &torchtest.Tensor{Shape: []int{1, tFrames}, Data: r.count}}}}}},
	})
}

func pad6(n int) string {
	s := "000000" + itoa(n)
	return s[len(s)-6:]
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func compareDirs(t *testing.T, a, b string) *Report {
	t.Helper()
	sa, err := Open(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := Open(b)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compare(sa, sb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// exact checks a report of identical runs: every part compared in every
// block, zero error, full overlap.
func exact(t *testing.T, what string, r *Report) {
	t.Helper()
	if len(r.Blocks) != tBlocks || r.FramesPerBlock != tF || r.Latents == nil || r.Latents.Frames != tFrames || r.Bank == nil || r.Bank.Pairs != tBlocks*tHeads ||
		r.FinalBank == nil || r.FinalBank.Pairs != tHeads || r.Trace == nil || r.Trace.Rows != tHeads*tFrames || len(r.Notes) > 0 {
		t.Fatalf("%s: incomplete report:\n%s", what, r.Text())
	}
	if r.Latents.MaxAbs != 0 || r.Latents.RelL2 != 0 || r.Bank.Min != 1 || r.Bank.Identical != r.Bank.Pairs || r.FinalBank.Min != 1 || r.Trace.MaxTV != 0 {
		t.Fatalf("%s: identical runs differ:\n%s", what, r.Text())
	}
	for _, bl := range r.Blocks {
		if bl.Latents == nil || bl.Bank == nil || bl.Trace == nil || bl.Latents.Frames != tF || bl.Bank.Pairs != tHeads || bl.Trace.Rows != tHeads*tF {
			t.Fatalf("%s: block %d incomplete: %+v", what, bl.Block, bl)
		}
	}
}

// TestCompareIdentical: a run folder against a copy of itself, and against
// the same run as the authors' files (their shards, ids, dtypes and
// layouts), compares every part with zero error and full overlap.
func TestCompareIdentical(t *testing.T) {
	dir := t.TempDir()
	r := baseRun()
	a, b, au := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "authors")
	writeRun(t, a, r)
	writeRun(t, b, r)
	writeAuthors(t, au, r)
	exact(t, "run vs run", compareDirs(t, a, b))
	rep := compareDirs(t, a, au)
	exact(t, "run vs authors", rep)
	if rep.B.Kind != KindAuthors || !strings.HasSuffix(rep.B.Files["latents"], "latent_000000_000003.pt") || rep.A.Kind != KindRun {
		t.Errorf("sides %+v, %+v", rep.A, rep.B)
	}
	exact(t, "authors vs run", compareDirs(t, au, a))
}

// TestCompareDifferences: each kind of difference shows in its block and
// only there, with the value its definition gives.
func TestCompareDifferences(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeRun(t, a, baseRun())
	r := baseRun()
	bs := tF * tC * tH * tW
	r.latents[bs+5] += 0.5                 // block 1
	r.admitted[1][0] = []int64{8, 9, 13}   // block 1 head 0: {8,9,12} vs {8,9,13}: J = 2/4
	r.final[1] = []int64{4, 7, 10}         // head 1: 3 of 4 kept: J = 3/4
	q := 4                                 // block 1, head 1: move 0.2 of query frame 4's mass from frame 0 to 4
	r.mass[(1*tFrames+q)*tFrames+0] -= 0.2 //
	r.mass[(1*tFrames+q)*tFrames+q] += 0.2 //
	writeAuthors(t, b, r)
	rep := compareDirs(t, a, b)
	b0, b1 := rep.Blocks[0], rep.Blocks[1]
	if b0.Latents.MaxAbs != 0 || b0.Bank.Min != 1 || b0.Trace.MaxTV != 0 {
		t.Errorf("block 0 differs: %+v %+v %+v", b0.Latents, b0.Bank, b0.Trace)
	}
	want := math.Abs(float64(r.latents[bs+5] - (r.latents[bs+5] - 0.5)))
	if math.Abs(b1.Latents.MaxAbs-want) > 1e-7 || math.Abs(b1.Latents.MeanAbs-want/float64(bs)) > 1e-9 || b1.Latents.RelL2 <= 0 {
		t.Errorf("block 1 latents %+v, want max %g", b1.Latents, want)
	}
	if b1.Bank.Min != 0.5 || b1.Bank.Mean != 0.75 || b1.Bank.Identical != 1 {
		t.Errorf("block 1 bank %+v, want min 0.5, mean 0.75", b1.Bank)
	}
	if rep.FinalBank.Min != 0.75 || rep.FinalBank.Identical != 1 {
		t.Errorf("final banks %+v, want min 0.75", rep.FinalBank)
	}
	if math.Abs(b1.Trace.MaxTV-0.2) > 1e-6 || rep.Trace.Rows != tHeads*tFrames {
		t.Errorf("block 1 trace %+v, want max TV 0.2", b1.Trace)
	}
	txt := rep.Text()
	for _, s := range []string{"block", "0–3", "3–6", "bank decisions (4 updates", "min 0.5000", "total variation"} {
		if !strings.Contains(txt, s) {
			t.Errorf("text lacks %q:\n%s", s, txt)
		}
	}
	out := filepath.Join(dir, "report")
	paths, err := rep.Write(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 4 {
		t.Fatalf("wrote %v", paths)
	}
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	var back Report
	if b, err := os.ReadFile(filepath.Join(out, FileJSON)); err != nil || json.Unmarshal(b, &back) != nil || back.Blocks[1].Bank.Min != 0.5 {
		t.Errorf("compare.json: %v %+v", err, back.Blocks)
	}
}

// TestCompareRefusals: folders that cannot be compared are refused with
// what is wrong.
func TestCompareRefusals(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	writeRun(t, a, baseRun())
	open := func(d string) (*Side, error) { return Open(d) }
	// Another frame shape.
	other := filepath.Join(dir, "other")
	writePT(t, filepath.Join(other, "latents.pt"), torchtest.Dict{{Key: "latents", Value: &torchtest.Tensor{Shape: []int{1, 6, 2, 3, 2}, Data: make([]float32, 72)}}})
	sa, _ := open(a)
	so, err := open(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compare(sa, so, Options{}); err == nil || !strings.Contains(err.Error(), "runs of different sizes") {
		t.Errorf("other frame shape: %v", err)
	}
	// Another frame_seq_length in the lineage.
	p16 := filepath.Join(dir, "p16")
	writePT(t, filepath.Join(p16, "x_density_lineage.pt"), torchtest.Dict{{Key: "format", Value: "density_kv_lineage_v1"}, {Key: "frame_seq_length", Value: 1560},
		{Key: "source_frame_offset", Value: 1}, {Key: "layers", Value: torchtest.Dict{}}})
	sp, err := open(p16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compare(sa, sp, Options{}); err == nil || !strings.Contains(err.Error(), "frame_seq_length 4") || !strings.Contains(err.Error(), "has 1560") {
		t.Errorf("other frame_seq_length: %v", err)
	}
	for _, c := range []struct {
		name  string
		files map[string]torchtest.Dict
		want  string
	}{
		{"empty", nil, "neither a densitykv run folder"},
		{"two latents", map[string]torchtest.Dict{"latents.pt": {{Key: "latents", Value: &torchtest.Tensor{Shape: []int{1, 1, 1, 1}, Data: []float32{0}}}},
			"x_latents.pt": {{Key: "latents", Value: &torchtest.Tensor{Shape: []int{1, 1, 1, 1}, Data: []float32{0}}}}}, "2 files could be the latents"},
		{"batch", map[string]torchtest.Dict{"latents.pt": {{Key: "latents", Value: &torchtest.Tensor{Shape: []int{2, 1, 1, 1, 1}, Data: []float32{0, 0}}}}}, "batch of 2"},
		{"no tensor", map[string]torchtest.Dict{"latents.pt": {{Key: "x", Value: 1}}}, `no tensor "latents"`},
		{"trace format", map[string]torchtest.Dict{"x_temporal_attention.pt": {{Key: "format", Value: "v1"}}}, "temporal_attention_trace_v2"},
		{"gap", map[string]torchtest.Dict{"latents/latent_000000_000001.pt": {{Key: "latents", Value: &torchtest.Tensor{Shape: []int{1, 2, 1, 1, 1}, Data: []float32{0, 0}}}},
			"latents/latent_000003_000003.pt": {{Key: "latents", Value: &torchtest.Tensor{Shape: []int{1, 1, 1, 1, 1}, Data: []float32{0}}}}}, "the shards before it end at frame 2"},
	} {
		d := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
		os.MkdirAll(d, 0o755)
		for f, v := range c.files {
			writePT(t, filepath.Join(d, f), v)
		}
		if _, err := open(d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := open(filepath.Join(a, runfolder.FileLineage)); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("a file: %v", err)
	}
}
