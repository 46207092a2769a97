// Package vbenchtest writes the inputs of package vbench for tests:
// synthetic prompt-list folders as a finished generate --prompts run
// leaves them (with small fake videos: the export only links files) and
// VBench-Long results files.
package vbenchtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/video"
)

// List describes a prompt-list folder.
type List struct {
	Backbone string
	Policy   string
	Bank     map[string]string // memory.bank keys (YAML values)
	Capacity int               // memory.capacity (0: the default)
	Seed     int64
	Seconds  float64   // the run's length (3-frame blocks; 0: 120)
	Horizons []float64 // generate.horizons
	Prompts  []string  // the prompts file's lines
	Selected []int     // nil: every line
	// Incomplete are prompt indices whose folders hold a stopped run.
	Incomplete []int
	Precision  string // generate.precision ("": the default)
}

// WriteList writes the list folder dir as l describes it: the list's
// files (owner marker, batch.yaml with the resolved memory configuration,
// prompts.txt, list.json) and each prompt's run folder NNNNN/ (owner,
// summary, final checkpoint, video.mp4 and the horizon videos, whose bytes
// name them). It returns dir.
func WriteList(t testing.TB, dir string, l List) string {
	t.Helper()
	gc := config.GenerateDefaults()
	if err := gc.Generate.Backbone.UnmarshalText([]byte(l.Backbone)); err != nil {
		t.Fatal(err)
	}
	gc.Policies = []string{l.Policy}
	gc.Run.Seed = l.Seed
	if l.Seconds == 0 {
		l.Seconds = 120
	}
	gc.Stream.Seconds = l.Seconds
	gc.Generate.Blocks = config.HorizonBlocks(l.Seconds, 3)
	gc.Generate.Horizons = l.Horizons
	if l.Precision != "" {
		if err := gc.Generate.Precision.UnmarshalText([]byte(l.Precision)); err != nil {
			t.Fatal(err)
		}
	}
	gc.Memory.Capacity = l.Capacity
	if len(l.Bank) > 0 {
		var parts []string
		for k, v := range l.Bank {
			parts = append(parts, k+": "+v)
		}
		doc := "memory:\n  bank: {" + strings.Join(parts, ", ") + "}\n"
		if _, err := config.Decode([]byte(doc), &gc, true); err != nil {
			t.Fatal(err)
		}
	}
	rm, err := gc.Memory.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	gc.Memory = rm
	y, err := config.MarshalGenerate(config.ListIdentity(gc))
	if err != nil {
		t.Fatal(err)
	}
	pt := strings.Join(l.Prompts, "\n") + "\n"
	sel := l.Selected
	if sel == nil {
		for i := range l.Prompts {
			sel = append(sel, i)
		}
	}
	psum, csum := sha256.Sum256([]byte(pt)), sha256.Sum256(y)
	man := runfolder.ListManifest{Version: 2, PromptsSHA256: hex.EncodeToString(psum[:]), Prompts: len(l.Prompts), Selected: sel, ConfigSHA256: hex.EncodeToString(csum[:])}
	WriteFile(t, filepath.Join(dir, runfolder.FileBatch), string(y))
	WriteFile(t, filepath.Join(dir, runfolder.FileBatchPrompts), pt)
	WriteJSON(t, filepath.Join(dir, runfolder.FileList), man)
	WriteJSON(t, filepath.Join(dir, runfolder.FileOwner), runfolder.Owner{Format: "densitykv-run-folder", Command: runfolder.ListCommand})
	for _, i := range sel {
		if strings.TrimSpace(l.Prompts[i]) == "" {
			continue
		}
		sd := runfolder.BatchDir(dir, i)
		complete := true
		for _, k := range l.Incomplete {
			complete = complete && k != i
		}
		writeRun(t, sd, gc.Generate.Blocks, complete)
		WriteFile(t, filepath.Join(sd, video.FileVideo), fmt.Sprintf("mp4 %s %d full", dir, i))
		for _, h := range l.Horizons {
			WriteFile(t, filepath.Join(sd, config.HorizonName(h)), fmt.Sprintf("mp4 %s %d %g", dir, i, h))
		}
	}
	return dir
}

// WriteSingle writes a complete single generate run folder (generate
// --prompt TEXT) of seconds on backbone with policy, its video.mp4 and
// its resolved configuration, and returns dir. An empty prompt leaves the
// configuration without prompt text (a run made from --text embeddings).
func WriteSingle(t testing.TB, dir, backbone, policy, prompt string, seconds float64) string {
	t.Helper()
	gc := config.GenerateDefaults()
	if err := gc.Generate.Backbone.UnmarshalText([]byte(backbone)); err != nil {
		t.Fatal(err)
	}
	gc.Policies = []string{policy}
	gc.Stream.Seconds = seconds
	gc.Generate.Blocks = config.HorizonBlocks(seconds, 3)
	if prompt != "" {
		gc.Generate.Prompts = []config.PromptSpec{{Text: prompt}}
	}
	rm, err := gc.Memory.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	gc.Memory = rm
	y, err := config.MarshalGenerate(gc)
	if err != nil {
		t.Fatal(err)
	}
	WriteFile(t, filepath.Join(dir, runfolder.FileConfig), string(y))
	writeRun(t, dir, gc.Generate.Blocks, true)
	WriteFile(t, filepath.Join(dir, video.FileVideo), "mp4 "+dir)
	return dir
}

// writeRun writes a generate run folder's records: complete (summary and
// final checkpoint agree) or stopped half-way.
func writeRun(t testing.TB, dir string, blocks int, complete bool) {
	t.Helper()
	done := blocks
	if !complete {
		done = blocks / 2
	}
	WriteJSON(t, filepath.Join(dir, runfolder.FileOwner), runfolder.Owner{Format: "densitykv-run-folder", Command: "generate"})
	WriteJSON(t, filepath.Join(dir, runfolder.FileSummary), runfolder.Summary{Command: "generate", Complete: complete, Blocks: blocks, CompletedBlocks: done})
	state := fmt.Sprintf(`{"next_block":%d}`, done)
	sum := sha256.Sum256([]byte(state))
	env := fmt.Sprintf(`{"format":%q,"version":1,"sha256":%q,"state":%s}`, runfolder.GenerateCheckpoint, hex.EncodeToString(sum[:]), state)
	WriteFile(t, filepath.Join(dir, runfolder.DirState, runfolder.FileCheckpoint), env)
}

// Dimensions are VBench's names of the paper's six dimensions, in its
// column order (vbench.Dimensions; this package cannot import vbench,
// whose tests use it).
var Dimensions = []string{"subject_consistency", "background_consistency", "motion_smoothness", "dynamic_degree", "aesthetic_quality", "imaging_quality"}

// WriteResults writes the VBench-Long results file p of one exported
// folder as VBench saw it (videosPath, its --videos_path) holding the
// videos files: for each dimension whose score is not negative, the score
// and per-clip results named as VBench-Long names them (two 2 s clips per
// video, {folder}/split_clip/{video}/{video}_{NNN}.mp4; the consistency
// dimensions' entries with "/{video}.mp4" appended, as their fused results
// have them). extra adds entries as they are.
func WriteResults(t testing.TB, p, videosPath string, files []string, scores [6]float64, extra map[string]any) {
	t.Helper()
	out := map[string]any{}
	for d, s := range scores {
		if s < 0 {
			continue
		}
		var per []map[string]any
		for _, f := range files {
			stem := strings.TrimSuffix(f, ".mp4")
			for c := range 2 {
				clip := fmt.Sprintf("%s/split_clip/%s/%s_%03d.mp4", videosPath, stem, stem, c)
				if d < 2 {
					clip += "/" + stem + ".mp4"
				}
				per = append(per, map[string]any{"video_path": clip, "video_results": s})
			}
		}
		if d < 2 {
			out[Dimensions[d]] = []any{s, per}
		} else {
			out[Dimensions[d]] = []any{s, per, []any{}}
		}
	}
	for k, v := range extra {
		out[k] = v
	}
	WriteJSON(t, p, out)
}

// WriteFile writes s to p, making its folder.
func WriteFile(t testing.TB, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// WriteJSON writes v to p as indented JSON.
func WriteJSON(t testing.TB, p string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	WriteFile(t, p, string(b))
}
