package vbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/densitykv/densitykv/internal/limitread"
)

// ResultsSuffix ends the name of VBench's results files
// (results_<time>_eval_results.json).
const ResultsSuffix = "_eval_results.json"

// maxResults bounds a results file (per-clip entries of every video).
const maxResults = 1 << 30

// Modes of VBench results.
const (
	ModeLong     = "long"     // VBench-Long: clips under split_clip/
	ModeStandard = "standard" // VBench: whole videos
)

// resultFile is one results file: which exported folder it scores and its
// scores by dimension (index into Dimensions).
type resultFile struct {
	path   string
	folder string
	mode   string
	scores map[int]float64
}

// expandResults lists the results files among paths: files as given, and
// under each folder every *_eval_results.json.
func expandResults(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, userf("vbench table: results %s: %v", p, unwrapPath(err))
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ResultsSuffix) {
				found = append(found, q)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("vbench table: %w", err)
		}
		if len(found) == 0 {
			return nil, userf("vbench table: no VBench results (*%s) under %s", ResultsSuffix, p)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

// readResult reads one VBench results file ({dimension: [score, per-video
// results, …]}) and places it in the manifest's folders: every video it
// scores must lie in one exported folder, and it must score every video of
// that folder and no other.
func readResult(m *Manifest, p string) (*resultFile, error) {
	b, err := limitread.File(p, maxResults, "VBench results")
	if err != nil {
		return nil, userf("vbench table: %w", err)
	}
	bad := func(format string, a ...any) error {
		return userf("vbench table: %s is not a VBench results file (%s: {dimension: [score, per-video results]}): %s", p, "*"+ResultsSuffix, fmt.Sprintf(format, a...))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw map[string][]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
			return nil, bad("it is a list (VBench's *_full_info.json lists the videos it evaluated; the scores are in *%s)", ResultsSuffix)
		}
		return nil, bad("%v (VBench writes NaN for a score it could not compute)", err)
	}
	if len(raw) == 0 {
		return nil, bad("no dimension")
	}
	rf := &resultFile{path: p, scores: map[int]float64{}}
	stems := map[string]bool{}
	folders := map[string]bool{}
	for _, name := range sortedKeys(raw) {
		d := dimensionIndex(name)
		if d < 0 {
			return nil, userf("vbench table: %s holds dimension %q, which is not one of the paper's six (%s): results of another dimension set", p, name, strings.Join(DimensionNames(), ", "))
		}
		v := raw[name]
		if len(v) < 2 {
			return nil, bad("%s: want [score, per-video results, …], got %d elements", name, len(v))
		}
		var score float64
		if err := json.Unmarshal(v[0], &score); err != nil {
			return nil, bad("%s: score %s is not a number", name, v[0])
		}
		if math.IsNaN(score) || score < 0 || score > 1 {
			return nil, userf("vbench table: %s: %s score %v is outside [0, 1] (VBench's scores are fractions; results of another VBench version?)", p, name, score)
		}
		rf.scores[d] = score
		var per []map[string]any
		if err := json.Unmarshal(v[1], &per); err != nil {
			return nil, bad("%s: per-video results: %v", name, err)
		}
		if len(per) == 0 {
			return nil, bad("%s: no per-video results", name)
		}
		for k, e := range per {
			vp, ok := e["video_path"].(string)
			if !ok || vp == "" {
				return nil, bad("%s: per-video result %d has no video_path", name, k)
			}
			dir, stem, mode := videoOf(vp)
			if rf.mode == "" {
				rf.mode = mode
			} else if rf.mode != mode {
				return nil, userf("vbench table: %s mixes VBench-Long clips and whole videos", p)
			}
			folders[dir] = true
			stems[stem] = true
		}
	}
	if len(folders) != 1 {
		return nil, userf("vbench table: %s scores videos of %d folders (%s); VBench evaluates one exported folder per call", p, len(folders), strings.Join(sortedKeys(folders), ", "))
	}
	var dir string
	for d := range folders {
		dir = d
	}
	var match []string
	for _, f := range m.Folders {
		if dir == f.Dir || strings.HasSuffix(dir, "/"+f.Dir) {
			match = append(match, f.Dir)
		}
	}
	if len(match) != 1 {
		return nil, userf("vbench table: %s scores the videos of %s, which is no folder of the manifest (results of another export?)", p, dir)
	}
	rf.folder = match[0]
	f := m.folder(rf.folder)
	want := map[string]bool{}
	for _, v := range f.Videos {
		want[strings.TrimSuffix(v.File, ".mp4")] = true
	}
	var missing, extra []string
	for s := range want {
		if !stems[s] {
			missing = append(missing, s)
		}
	}
	for s := range stems {
		if !want[s] {
			extra = append(extra, s)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	switch {
	case len(extra) > 0:
		return nil, userf("vbench table: %s scores %d videos that the manifest does not list in %s (e.g. %q): the manifest does not match these results", p, len(extra), f.Dir, extra[0])
	case len(missing) > 0:
		return nil, userf("vbench table: %s scores %d of the %d videos of %s (missing e.g. %q): evaluate the whole folder", p, len(want)-len(missing), len(want), f.Dir, missing[0])
	}
	return rf, nil
}

// videoOf is the exported folder and video (file name without .mp4) of a
// path in VBench's results: VBench-Long's clips lie in
// {folder}/split_clip/{video}/{video}_{NNN}.mp4 (its consistency scores
// append "/{video}.mp4" to a clip's path), VBench's videos in
// {folder}/{video}.mp4.
func videoOf(p string) (dir, stem, mode string) {
	p = filepath.ToSlash(p)
	if i := strings.LastIndex(p, "/split_clip/"); i >= 0 {
		rest := p[i+len("/split_clip/"):]
		stem, _, _ = strings.Cut(rest, "/")
		return path.Clean(p[:i]), stem, ModeLong
	}
	return path.Clean(path.Dir(p)), strings.TrimSuffix(path.Base(p), path.Ext(p)), ModeStandard
}

// scoresByFolder reads the results files and gathers each folder's
// scores, refusing a dimension given twice for one folder.
func scoresByFolder(m *Manifest, files []string) (map[string]*folderScores, error) {
	out := map[string]*folderScores{}
	for _, p := range files {
		rf, err := readResult(m, p)
		if err != nil {
			return nil, err
		}
		fs := out[rf.folder]
		if fs == nil {
			fs = &folderScores{mode: rf.mode}
			out[rf.folder] = fs
		}
		if fs.mode != rf.mode {
			return nil, userf("vbench table: %s is scored by VBench-Long in %s and by VBench in %s: one protocol per table", rf.folder, fs.mode, rf.mode)
		}
		for d, s := range rf.scores {
			if fs.from[d] != "" {
				return nil, userf("vbench table: %s and %s both give %s for %s; keep one (remove the older results file)", fs.from[d], p, Dimensions[d].Name, rf.folder)
			}
			fs.from[d], fs.score[d] = p, s
		}
	}
	return out, nil
}

// folderScores are one folder's six scores and the files they came from.
type folderScores struct {
	mode  string
	score [6]float64
	from  [6]string
}

func (f *folderScores) missing() []string {
	var out []string
	for d, src := range f.from {
		if src == "" {
			out = append(out, Dimensions[d].Name)
		}
	}
	return out
}

var errNoResults = errors.New("no results")
