package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/record"
	"github.com/densitykv/densitykv/runfolder"
)

// readLineage reads density_kv_lineage.jsonl: its header, events and final
// records.
func readLineage(t *testing.T, path string) (runfolder.LineageHeader, []runfolder.LineageEvent, []runfolder.LineageFinal) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hdr runfolder.LineageHeader
	var evs []runfolder.LineageEvent
	var fin []runfolder.LineageFinal
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var k struct{ Kind string }
		if err := json.Unmarshal(sc.Bytes(), &k); err != nil {
			t.Fatal(err)
		}
		switch k.Kind {
		case "header":
			json.Unmarshal(sc.Bytes(), &hdr)
		case "event":
			var e runfolder.LineageEvent
			json.Unmarshal(sc.Bytes(), &e)
			evs = append(evs, e)
		case "final":
			var e runfolder.LineageFinal
			json.Unmarshal(sc.Bytes(), &e)
			fin = append(fin, e)
		default:
			t.Fatalf("lineage line of kind %q", k.Kind)
		}
	}
	return hdr, evs, fin
}

// readLog reads memory_log.jsonl.
func readLog(t *testing.T, path string) []runfolder.LogLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []runfolder.LogLine
	for _, ln := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l runfolder.LogLine
		if err := json.Unmarshal([]byte(ln), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// TestGenerateDiagnostics runs DensityKV on the tiny model with every
// layer and head traced and checks the diagnostics in the authors' shapes:
//
//   - the lineage replays the banks: starting empty, each event's
//     survivors (the previous slots less evicted_source) followed by its
//     accepted candidates in target_slot order give the next bank, every
//     target_source_before is the previous state at that slot, and the
//     replayed banks equal the final records and provenance.csv; the first
//     update (block 2, the empty bank) is the known answer: candidates in
//     source order, the first M stored at slots 0…M−1, energy_delta −τ,
//     sources frame 1's tokens (12…) or, with --source-ids authors, 0…;
//   - the memory log's candidate-density and admission-score means are
//     head 0's means over the event's candidates;
//   - the per-layer trace has every traced query frame's mass summing to 1
//     per head (DensityKV keys all have a source frame), its visible-token
//     counts are the keys the clean pass read, and averaged over layers and
//     heads it is attention_trace.json.
func TestGenerateDiagnostics(t *testing.T) {
	g := golden.Wan(t)
	dir := t.TempDir()
	const blocks, M, tau = 6, 24, 2.0
	args := func(name string, extra ...string) []string {
		return append([]string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"),
			"--text", filepath.Join(g, "rollout_native.safetensors"), "--text-tensor", "context",
			"--latent-height", "6", "--latent-width", "8", "--blocks", strconv.Itoa(blocks), "--policy", "densitykv",
			"--capacity", strconv.Itoa(M), "--sigma", "4", "--ordering", "max", "--out", dir, "--name", name, "--quiet", "--preview=false",
			"--lineage-layers", "all", "--lineage-heads", "all"}, extra...)
	}
	for _, ids := range []string{"global", "authors"} {
		if code, _, errs := run(t, context.Background(), args(ids, "--source-ids", ids)...); code != 0 {
			t.Fatalf("%s: exit %d: %s", ids, code, errs)
		}
		rd := filepath.Join(dir, ids)
		for _, f := range []string{"attention_trace_layers.png", "lineage_l0_h0.png", "lineage_l1_h1.png", "attention_trace.png"} {
			if _, err := os.Stat(filepath.Join(rd, runfolder.DirPlots, f)); err != nil {
				t.Errorf("%s: no figure %s", ids, f)
			}
		}
		hdr, evs, fin := readLineage(t, filepath.Join(rd, runfolder.FileLineage))
		off := int64(0)
		if ids == "authors" {
			off = 12
		}
		if hdr.Format != "density_kv_lineage_v1" || hdr.FrameSeqLength != 12 || hdr.SpatialHeight != 3 || hdr.SpatialWidth != 4 ||
			hdr.SourceFrameOffset != int(off/12) || !slices.Equal(hdr.Layers, []int{0, 1}) || !slices.Equal(hdr.Heads, []int{0, 1}) {
			t.Fatalf("%s: header %+v", ids, hdr)
		}
		bank := replayLineage(t, ids, evs, off, M, tau)
		if len(fin) != 4 {
			t.Fatalf("%s: %d final records", ids, len(fin))
		}
		for _, f := range fin {
			if got := bank[[2]int{f.Layer, f.Head}]; !slices.Equal(got, f.SourceIndex) || f.Count != len(got) {
				t.Fatalf("%s: layer %d head %d: replayed bank %v, final %v", ids, f.Layer, f.Head, got, f.SourceIndex)
			}
		}
		checkProvenance(t, ids, rd, bank)
		lines := checkLogMeans(t, ids, rd, evs)
		checkTraceLayers(t, ids, rd, lines, blocks)
	}
}

// replayLineage replays the lineage events of run ids into each layer's
// and head's bank of sources (off: the authors' ids' offset), checking the
// empty bank's known first update and every admission's slot and
// eviction, and returns the banks.
func replayLineage(t *testing.T, ids string, evs []runfolder.LineageEvent, off int64, M int, tau float64) map[[2]int][]int64 {
	t.Helper()
	bank := map[[2]int][]int64{}
	updates, evictions := 0, 0
	for _, e := range evs {
		key := [2]int{e.Layer, e.Head}
		old := bank[key]
		N := len(e.CandidateIndex)
		if e.Update == 0 {
			// The known answer of the empty bank (block 2: frames 1–3).
			if e.QueryFrame != 6 || e.SourceBase != 0 || N != 36 {
				t.Fatalf("%s: first update at frame %d, base %d, %d candidates", ids, e.QueryFrame, e.SourceBase, N)
			}
			for j := 0; j < N; j++ {
				acc, slot := 0, int32(-1)
				if j < M {
					acc, slot = 1, int32(j)
				}
				if e.CandidateIndex[j] != int32(j) || e.Accepted[j] != acc || e.TargetSlot[j] != slot || e.EnergyDelta[j] != -tau ||
					e.CandidateDensity[j] != 0 || e.CandidateSource[j] != 12+int64(j)-off || e.TargetSourceBefore[j] != -1 {
					t.Fatalf("%s: empty-bank update, candidate %d: %+v", ids, j, e)
				}
			}
		}
		evicted := map[int64]bool{}
		for _, s := range e.EvictedSource {
			evicted[s] = true
		}
		var next []int64
		for _, s := range old {
			if !evicted[s] {
				next = append(next, s)
			}
		}
		if len(old)-len(next) != len(e.EvictedSource) {
			t.Fatalf("%s: update %d layer %d head %d evicts sources not stored", ids, e.Update, e.Layer, e.Head)
		}
		surv := len(next)
		for j := range e.CandidateIndex {
			if e.Accepted[j] != 1 {
				continue
			}
			slot := int(e.TargetSlot[j])
			if slot != len(next) {
				t.Fatalf("%s: update %d: accepted candidate %d at slot %d, want %d", ids, e.Update, j, slot, len(next))
			}
			next = append(next, e.CandidateSource[j])
			want := int64(-1)
			if slot < len(old) {
				want = old[slot]
			}
			if e.TargetSourceBefore[j] != want {
				t.Fatalf("%s: update %d: target_source_before %d, want %d", ids, e.Update, e.TargetSourceBefore[j], want)
			}
		}
		// evicted_density: the evictions' densities at positions
		// added … admitted−1 (added = admitted − evicted), 0 elsewhere.
		admitted := len(next) - surv
		added := admitted - len(e.EvictedSource)
		for k, v := range e.EvictedDensity {
			if v != 0 && (k < added || k >= admitted) {
				t.Fatalf("%s: update %d: evicted density %v at position %d (%d admitted, %d evicted)", ids, e.Update, v, k, admitted, len(e.EvictedSource))
			}
		}
		evictions += len(e.EvictedSource)
		bank[key] = next
		updates = max(updates, e.Update+1)
	}
	if updates < 3 || len(evs) != 4*updates || evictions == 0 {
		t.Fatalf("%s: %d events for %d updates of 2 layers × 2 heads, %d evictions", ids, len(evs), updates, evictions)
	}
	return bank
}

// checkProvenance: provenance.csv of run folder rd holds the replayed
// banks.
func checkProvenance(t *testing.T, ids, rd string, bank map[[2]int][]int64) {
	t.Helper()
	pf, _ := os.Open(filepath.Join(rd, runfolder.FileProvenance))
	rows, err := csv.NewReader(pf).ReadAll()
	pf.Close()
	if err != nil {
		t.Fatal(err)
	}
	prov := map[[2]int][]int64{}
	for _, r := range rows[1:] {
		l, _ := strconv.Atoi(r[1])
		h, _ := strconv.Atoi(r[2])
		s, _ := strconv.ParseInt(r[4], 10, 64)
		prov[[2]int{l, h}] = append(prov[[2]int{l, h}], s)
	}
	for k, v := range bank {
		if !slices.Equal(prov[k], v) {
			t.Fatalf("%s: provenance.csv of layer %d head %d %v, lineage %v", ids, k[0], k[1], prov[k], v)
		}
	}
}

// checkLogMeans: the memory log's candidate-density and admission-score
// means are head 0's means over each event's candidates; it returns the
// log's lines.
func checkLogMeans(t *testing.T, ids, rd string, evs []runfolder.LineageEvent) []runfolder.LogLine {
	t.Helper()
	lines := readLog(t, filepath.Join(rd, runfolder.FileLog))
	for _, e := range evs {
		if e.Head != 0 {
			continue
		}
		var cd, sc float64
		for j := range e.CandidateDensity {
			cd += e.CandidateDensity[j]
			sc += e.EnergyDelta[j]
		}
		n := float64(len(e.CandidateDensity))
		found := false
		for _, ln := range lines {
			if ln.Block == e.QueryFrame/3 && ln.Layer == e.Layer {
				found = true
				if ln.CandidateDensityMean == nil || math.Abs(*ln.CandidateDensityMean-cd/n) > 1e-9*max(1, cd/n) || math.Abs(*ln.AdmissionScoreMean-sc/n) > 1e-9 {
					t.Fatalf("%s: block %d layer %d log means %v %v, lineage %v %v", ids, ln.Block, ln.Layer, ln.CandidateDensityMean, ln.AdmissionScoreMean, cd/n, sc/n)
				}
			}
		}
		if !found {
			t.Fatalf("%s: no log line of block %d layer %d", ids, e.QueryFrame/3, e.Layer)
		}
	}
	for _, ln := range lines {
		if ln.Offered == 0 && ln.CandidateDensityMean != nil {
			t.Fatalf("%s: block %d has a candidate-density mean without an update", ids, ln.Block)
		}
	}
	return lines
}

// checkTraceLayers: the per-layer trace's query frames each have mass 1
// per head over the keys the clean pass read, and its average over layers
// and heads is attention_trace.json.
func checkTraceLayers(t *testing.T, ids, rd string, lines []runfolder.LogLine, blocks int) {
	t.Helper()
	lt, err := runfolder.ReadTraceLayers(filepath.Join(rd, runfolder.FileTraceLayers))
	if err != nil {
		t.Fatal(err)
	}
	F := blocks * 3
	if !slices.Equal(lt.Layers, []int{0, 1}) || lt.Heads != 2 || lt.Frames != F {
		t.Fatalf("%s: per-layer trace layers %v heads %d frames %d", ids, lt.Layers, lt.Heads, lt.Frames)
	}
	var tr record.TraceFile
	if err := runfolder.ReadJSON(filepath.Join(rd, runfolder.FileTrace), &tr); err != nil {
		t.Fatal(err)
	}
	for q := 0; q < F; q++ {
		for s := 0; s < F; s++ {
			var avg float64
			for i := range lt.Layers {
				for h := 0; h < 2; h++ {
					avg += float64(lt.Mass[i][(h*F+q)*F+s]) / 4
				}
			}
			if math.Abs(avg-tr.Mass[q][s]) > 1e-5 {
				t.Fatalf("%s: query frame %d source %d: per-layer average %v, attention_trace.json %v", ids, q, s, avg, tr.Mass[q][s])
			}
		}
		for i, l := range lt.Layers {
			if lt.Count[i][q] != 1 {
				t.Fatalf("%s: layer %d query frame %d traced %v times", ids, l, q, lt.Count[i][q])
			}
			ln := lines[(q/3)*2+l]
			for h := 0; h < 2; h++ {
				var sum, tok float64
				for s := 0; s < F; s++ {
					sum += float64(lt.Mass[i][(h*F+q)*F+s])
					tok += float64(lt.Tokens[i][(h*F+q)*F+s])
				}
				if math.Abs(sum-1) > 1e-5 {
					t.Fatalf("%s: layer %d head %d query frame %d: mass sums to %v", ids, l, h, q, sum)
				}
				if want := ln.Tokens.Sink + ln.Occupancy[h] + ln.Tokens.Local; int(tok) != want {
					t.Fatalf("%s: layer %d head %d query frame %d: %v visible keys, the clean pass read %d", ids, l, h, q, tok, want)
				}
			}
		}
	}
}

// TestGenerateRAGAndRecacheDiagnostics checks LongLive-RAG's selections in
// the memory log (and that the trace knows their frames), and the recache
// flag: the frames recomputed at the switch, and its refusals.
func TestGenerateRAGAndRecacheDiagnostics(t *testing.T) {
	g := golden.Wan(t)
	dir := t.TempDir()
	text := tinyText(t, dir)
	base := func(name string, extra ...string) []string {
		return append([]string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"),
			"--latent-height", "6", "--latent-width", "8", "--blocks", "8", "--out", dir, "--name", name, "--quiet", "--preview=false"}, extra...)
	}
	if code, _, errs := run(t, context.Background(), base("rag", "--text", text, "--policy", "longlive-rag", "--rag-top-k", "2")...); code != 0 {
		t.Fatalf("rag: %s", errs)
	}
	picked := 0
	for _, ln := range readLog(t, filepath.Join(dir, "rag", runfolder.FileLog)) {
		if len(ln.SelectedGlobalFrames) != len(ln.SelectedSimilarities) || len(ln.SelectedGlobalFrames) > 2 {
			t.Fatalf("block %d: selected %v with similarities %v", ln.Block, ln.SelectedGlobalFrames, ln.SelectedSimilarities)
		}
		for i, f := range ln.SelectedGlobalFrames {
			if f < 1 || f >= ln.Block*3 || math.Abs(ln.SelectedSimilarities[i]) > 1+1e-9 {
				t.Fatalf("block %d: selected frame %d, similarity %v", ln.Block, f, ln.SelectedSimilarities[i])
			}
		}
		picked += len(ln.SelectedGlobalFrames)
	}
	if picked == 0 {
		t.Fatal("LongLive-RAG never retrieved a frame")
	}
	var tr record.TraceFile
	if err := runfolder.ReadJSON(filepath.Join(dir, "rag", runfolder.FileTrace), &tr); err != nil {
		t.Fatal(err)
	}
	for q, row := range tr.Mass {
		if row[len(row)-1] != 0 {
			t.Fatalf("query frame %d: %v of the attention on memory of unknown source (the retrieved frames are known)", q, row[len(row)-1])
		}
	}
	// Recache at the switch to the second prompt at block 5 (start 15).
	sw := []string{"--text", text, "--text", text + "@5", "--policy", "native"}
	if code, _, errs := run(t, context.Background(), base("recache", append(sw, "--recache", "longlive")...)...); code != 0 {
		t.Fatalf("recache: %s", errs)
	}
	for _, ln := range readLog(t, filepath.Join(dir, "recache", runfolder.FileLog)) {
		want := []int(nil)
		if ln.Block == 5 && ln.Layer == 0 {
			for f := 4; f < 15; f++ {
				want = append(want, f)
			}
		}
		if !slices.Equal(ln.Recached, want) {
			t.Fatalf("block %d layer %d: recached %v, want %v", ln.Block, ln.Layer, ln.Recached, want)
		}
	}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--policy", "deep-forcing", "--recache", "longlive"}, "deep-forcing"},
		{[]string{"--recache", "longlive", "--record-stream", filepath.Join(dir, "x.dkvs")}, "--record-stream"},
		{[]string{"--recache", "always"}, "--recache"},
		{[]string{"--trace-layers", "7"}, "--trace-layers"},
		{[]string{"--lineage-heads", "x"}, "--lineage-heads"},
		{[]string{"--source-ids", "local"}, "--source-ids"},
	} {
		code, _, errs := run(t, context.Background(), base("bad", append([]string{"--text", text}, c.extra...)...)...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q (want %q)", c.extra, code, errs, c.want)
		}
	}
}
