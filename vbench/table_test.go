package vbench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/runfolder"
)

// scoresOf turns displayed values (score × 100) into VBench's fractions.
func scoresOf(v [nDims]float64) [nDims]float64 {
	var s [nDims]float64
	for i, x := range v {
		s[i] = x / 100
	}
	return s
}

// evaluate writes, for every folder of the export at out, the VBench-Long
// results file VBench would write into results/<folder>/, with the values
// val gives the folder.
func evaluate(t *testing.T, out string, m *Manifest, val func(f *Folder) [nDims]float64) string {
	t.Helper()
	res := filepath.Join(out, "results")
	for i := range m.Folders {
		f := &m.Folders[i]
		resultsFile(t, filepath.Join(res, f.Dir, "results_2026-01-01-00:00:00"+ResultsSuffix), filepath.Join(out, f.Dir), f, scoresOf(val(f)), nil)
	}
	return res
}

// The hand-computed main table: native (N), LongLive-RAG (L) and
// DensityKV (D) on LongLive and Self-Forcing at 30 and 60 s, with ties
// (of displayed values: 97.104 and 97.099 both show as 97.10).
var mainValues = map[string][nDims]float64{
	"30 longlive native":       {97.104, 96.00, 98.00, 50.00, 60.00, 70.00}, // Subject ties
	"30 longlive longlive-rag": {97.099, 96.50, 98.00, 40.00, 61.00, 69.00}, // as displayed

	"30 longlive densitykv":        {97.20, 96.50, 98.00, 45.00, 59.00, 68.00},
	"30 self-forcing native":       {90.00, 90.00, 90.00, 30.00, 50.00, 60.00},
	"30 self-forcing longlive-rag": {91.00, 90.00, 89.00, 30.00, 50.00, 61.00},
	"30 self-forcing densitykv":    {92.00, 91.00, 89.00, 35.00, 49.00, 62.00},
	"60 longlive native":           {96.00, 95.00, 97.00, 55.00, 58.00, 66.00},
	"60 longlive longlive-rag":     {96.00, 95.00, 97.00, 55.00, 58.00, 66.00},
	"60 longlive densitykv":        {95.00, 96.00, 97.50, 50.00, 59.00, 67.00},
	"60 self-forcing native":       {80.00, 80.00, 80.00, 20.00, 40.00, 50.00},
	"60 self-forcing longlive-rag": {81.00, 81.00, 81.00, 21.00, 41.00, 51.00},
	"60 self-forcing densitykv":    {82.00, 82.00, 82.00, 22.00, 42.00, 52.00},
}

func exportMain(t *testing.T, root string) (*Manifest, string) {
	t.Helper()
	var runs []string
	for _, b := range []string{"self-forcing", "longlive"} {
		for _, p := range []string{"densitykv", "native", "longlive-rag"} {
			runs = append(runs, writeList(t, filepath.Join(root, "runs", b+"-"+p), fakeList{Backbone: b, Policy: p, Seconds: 60, Horizons: []float64{30, 60}, Prompts: []string{"a red fox", "two cats_playing"}}))
		}
	}
	out := filepath.Join(root, "export")
	res, err := Export(ExportOptions{Runs: runs, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Manifest.Warnings) > 0 {
		t.Fatalf("warnings: %v", res.Manifest.Warnings)
	}
	return res.Manifest, out
}

// TestMainTable: midranks of the displayed values, Avg. Rank per group and
// overall, marks and single-metric wins, against values computed by hand.
func TestMainTable(t *testing.T) {
	root := t.TempDir()
	m, out := exportMain(t, root)
	results := evaluate(t, out, m, func(f *Folder) [nDims]float64 {
		return mainValues[fmt.Sprintf("%g %s %s", f.Horizon, f.Backbone, f.Method)]
	})
	tables := filepath.Join(root, "tables")
	res, err := Table(TableOptions{Manifest: out, Results: []string{results}, Out: tables})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Suites) != 1 {
		t.Fatalf("%d suites", len(res.Suites))
	}
	st := res.Suites[0]
	// Rows in table order: horizon, backbone (the paper's order: LongLive
	// first), method (the paper's order).
	type row struct {
		key    string
		ranks  string // the six midranks
		avg    string
		marks  [nDims + 1]int
		values string
	}
	want := []row{
		{"30 longlive native", "2.5 3 2 1 2 1", "1.92", [7]int{2, 2, 1, 1, 2, 1, 1}, "97.10 96.00 98.00 50.00 60.00 70.00"},
		{"30 longlive longlive-rag", "2.5 1.5 2 3 1 2", "2.00", [7]int{2, 1, 1, 0, 1, 2, 2}, ""},
		{"30 longlive densitykv", "1 1.5 2 2 3 3", "2.08", [7]int{1, 1, 1, 2, 0, 0, 0}, ""},
		{"30 self-forcing native", "3 2.5 1 2.5 1.5 3", "2.25", [7]int{0, 2, 1, 2, 1, 0, 0}, ""},
		{"30 self-forcing longlive-rag", "2 2.5 2.5 2.5 1.5 2", "2.17", [7]int{2, 2, 2, 2, 1, 2, 2}, ""},
		{"30 self-forcing densitykv", "1 1 2.5 1 3 1", "1.58", [7]int{1, 1, 2, 1, 2, 1, 1}, ""},
		{"60 longlive native", "1.5 2.5 2.5 1.5 2.5 2.5", "2.17", [7]int{1, 2, 2, 1, 2, 2, 2}, ""},
		{"60 longlive longlive-rag", "1.5 2.5 2.5 1.5 2.5 2.5", "2.17", [7]int{1, 2, 2, 1, 2, 2, 2}, ""},
		{"60 longlive densitykv", "3 1 1 3 1 1", "1.67", [7]int{2, 1, 1, 2, 1, 1, 1}, "95.00 96.00 97.50 50.00 59.00 67.00"},
		{"60 self-forcing native", "3 3 3 3 3 3", "3.00", [7]int{}, ""},
		{"60 self-forcing longlive-rag", "2 2 2 2 2 2", "2.00", [7]int{2, 2, 2, 2, 2, 2, 2}, ""},
		{"60 self-forcing densitykv", "1 1 1 1 1 1", "1.00", [7]int{1, 1, 1, 1, 1, 1, 1}, ""},
	}
	if len(st.Rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(st.Rows), len(want))
	}
	for i, r := range st.Rows {
		w := want[i]
		key := fmt.Sprintf("%g %s %s", r.Horizon, r.Backbone, r.Method.ID)
		var ranks, vals []string
		for d := range nDims {
			ranks = append(ranks, halfRank(r.Ranks2[d]))
			vals = append(vals, r.Values[d].String())
		}
		if key != w.key || strings.Join(ranks, " ") != w.ranks || r.Avg.round2().String() != w.avg || r.Marks != w.marks || (w.values != "" && strings.Join(vals, " ") != w.values) {
			t.Errorf("row %d: %s ranks %s avg %s marks %v values %s;\nwant %s ranks %s avg %s marks %v %s", i, key, strings.Join(ranks, " "), r.Avg.round2(), r.Marks, strings.Join(vals, " "), w.key, w.ranks, w.avg, w.marks, w.values)
		}
	}
	// Overall: native 56/24, LongLive-RAG 50/24, DensityKV 38/24; wins per
	// horizon, a shared best counted for each sharer.
	wantOverall := []string{"native 2.33 [5 2] 7 0", "longlive-rag 2.08 [4 2] 6 2", "densitykv 1.58 [7 10] 17 1"}
	for i, o := range st.Overall {
		got := fmt.Sprintf("%s %s %v %d %d", o.Method.ID, o.Avg.round2(), o.Wins, o.Total, o.Mark)
		if got != wantOverall[i] {
			t.Errorf("overall %q, want %q", got, wantOverall[i])
		}
	}
	if !slices.Equal(st.Tied, []int{3, 2}) || st.Cells != 12 {
		t.Errorf("tied cells %v of %d per horizon, want [3 2] of 12", st.Tied, st.Cells)
	}
	// The three-backbone (here two-backbone) means: one group of every
	// method, competition ranks.
	wantMeans := []string{
		"30 native 93.55 93.00 94.00 40.00 55.00 65.00 [3 3 1 1 2 1] 1.83",
		"30 longlive-rag 94.05 93.25 93.50 35.00 55.50 65.00 [2 2 2 3 1 1] 1.83",
		"30 densitykv 94.60 93.75 93.50 40.00 54.00 65.00 [1 1 2 1 3 1] 1.50",
		"60 native 88.00 87.50 88.50 37.50 49.00 58.00 [3 3 3 2 3 3] 2.83",
		"60 longlive-rag 88.50 88.00 89.00 38.00 49.50 58.50 [1 2 2 1 2 2] 1.67",
		"60 densitykv 88.50 89.00 89.75 36.00 50.50 59.50 [1 1 1 3 1 1] 1.33",
	}
	var gotMeans []string
	for _, b := range st.Means {
		if len(b.Groups) != 1 || b.Groups[0].Name.Text != "Methods" {
			t.Fatalf("means groups %+v", b.Groups)
		}
		for _, r := range b.Groups[0].Rows {
			var v []string
			for _, x := range r.Values {
				v = append(v, x.String())
			}
			gotMeans = append(gotMeans, fmt.Sprintf("%g %s %s %v %s", b.Horizon, r.Method.ID, strings.Join(v, " "), r.Ranks, r.Avg.round2()))
		}
	}
	if !slices.Equal(gotMeans, wantMeans) {
		t.Errorf("means\n%s\nwant\n%s", strings.Join(gotMeans, "\n"), strings.Join(wantMeans, "\n"))
	}
	// The files.
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(tables, "prompts-2", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct{ file, line string }{
		{"backbones.md", "| 30 s | LongLive | Native | _97.10_ | _96.00_ | **98.00** | **50.00** | _60.00_ | **70.00** | **1.92** |"},
		{"backbones.csv", "30,longlive,native,Native,97.10,96.00,98.00,50.00,60.00,70.00,2.5,3,2,1,2,1,1.92"},
		{"backbones_rows.tex", `\multirow{6}{*}{30\,s} & \multirow{3}{*}{LongLive} & Native & \underline{97.10} & \underline{96.00} & \textbf{98.00} & \textbf{50.00} & \underline{60.00} & \textbf{70.00} & \textbf{1.92} \\`},
		{"backbones_rows.tex", `\cmidrule(l){2-10}`},
		{"backbones_rows.tex", ` &  & DensityKV & \textbf{82.00} & \textbf{82.00} & \textbf{82.00} & \textbf{22.00} & \textbf{42.00} & \textbf{52.00} & \textbf{1.00}` + "\n"},
		{"backbones.md", "| DensityKV | **1.58** | 7 | 10 | 17 of 24 |"},
		{"backbones.md", "Cells with a shared best value: 3 at 30 s, 2 at 60 s."},
		{"overall.csv", "densitykv,DensityKV,1.58,24,7,10,17"},
		{"means.csv", "60,Methods,DensityKV,densitykv,88.50,89.00,89.75,36.00,50.50,59.50,1,1,1,3,1,1,1.33"},
		{"means.md", "| Methods | Native | 93.55 | 93.00 | **94.00** | **40.00** | _55.00_ | **65.00** | _1.83_ |"},
	} {
		if s := read(c.file); !strings.Contains(s, c.line+"\n") && !strings.HasSuffix(s, c.line) {
			t.Errorf("%s lacks the line\n%s\n--- it holds:\n%s", c.file, c.line, s)
		}
	}
	for _, f := range []string{"wins.png", "wins.svg", "backbones.tex", "means.tex", "means_rows.tex"} {
		if st, err := os.Stat(filepath.Join(tables, "prompts-2", f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if s, _ := os.ReadFile(filepath.Join(tables, FileScores)); !strings.Contains(string(s), "prompts-2/longlive/densitykv/60s,prompts-2,longlive,densitykv,60,long,0.95,0.96,0.975,0.5,0.59,0.67") {
		t.Errorf("scores.csv:\n%s", s)
	}
}

// TestAblationTable: the paper's printed ablation rows. Every backbone
// scores the paper's three-backbone means, so the means are the paper's
// values and the Avg. Ranks must be the printed ones (ties 1, 1, 3 within
// each sweep, the policy variants, the geometries). The geometry group's
// reference is this suite's default (the paper's geometry suite was a run
// of its own), so its ranks are computed by hand.
func TestAblationTable(t *testing.T) {
	root := t.TempDir()
	paper := map[string][nDims]float64{
		"default":                     {97.19, 96.34, 98.33, 51.94, 57.74, 68.73},
		"tau-1.5":                     {97.03, 96.29, 98.26, 52.57, 57.97, 68.70},
		"tau-3":                       {97.20, 96.33, 98.35, 44.44, 57.83, 65.50},
		"capacity-6240":               {97.25, 96.31, 98.34, 49.38, 57.61, 67.06},
		"capacity-12480":              {97.12, 96.30, 98.33, 51.39, 57.85, 69.21},
		"sigma-4":                     {97.08, 96.28, 98.28, 52.64, 57.78, 68.85},
		"sigma-16":                    {97.18, 96.27, 98.32, 50.49, 57.94, 69.27},
		"p-1":                         {97.19, 96.32, 98.32, 50.35, 57.71, 69.02},
		"p-4":                         {97.06, 96.27, 98.22, 51.88, 57.68, 68.52},
		"refresh-baselines":           {97.19, 96.30, 98.42, 47.29, 56.84, 64.85},
		"source-order":                {97.06, 96.30, 98.28, 51.32, 57.36, 68.54},
		"densest-eviction":            {97.12, 96.28, 98.34, 51.53, 57.85, 69.22},
		"mandatory-source-eviction":   {97.12, 96.28, 98.34, 51.11, 57.86, 69.23},
		"per-head":                    {97.14, 96.31, 98.30, 50.00, 58.14, 69.05},
		"within-block":                {96.96, 96.16, 98.10, 57.50, 57.69, 68.83},
		"geometry-pre-rope-key":       {96.93, 96.18, 98.23, 51.88, 57.38, 67.79},
		"geometry-pre-rope-key-value": {96.93, 96.22, 98.28, 52.64, 57.24, 66.41},
		"geometry-key-value":          {96.88, 96.20, 98.28, 50.56, 57.17, 65.91},
	}
	prompts := []string{"p0", "p1", "p2", "p3"}
	var runs []string
	runOf := map[string]string{} // list folder → variant
	for _, b := range config.PaperBackbones {
		for _, v := range config.PaperAblations {
			l := fakeList{Backbone: b, Policy: "densitykv", Seconds: 60, Prompts: prompts, Selected: []int{0, 2, 3}, Bank: map[string]string{}}
			for _, kv := range v.Bank {
				k, val, _ := strings.Cut(kv, ": ")
				l.Bank[k] = val
			}
			if len(v.Memory) > 0 {
				l.Capacity = map[string]int{"capacity: 6240": 6240, "capacity: 12480": 12480}[v.Memory[0]]
			}
			d := writeList(t, filepath.Join(root, "runs", b+"-"+v.Name), l)
			runs = append(runs, d)
			runOf[d] = v.Name
		}
	}
	out := filepath.Join(root, "export")
	ex, err := Export(ExportOptions{Runs: runs, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	m := ex.Manifest
	if len(m.Methods) != 18 || len(m.Folders) != 54 || m.Suites[0].ID != "prompts-3" {
		t.Fatalf("%d methods, %d folders, suites %+v", len(m.Methods), len(m.Folders), m.Suites)
	}
	variantOf := map[string]string{} // method → variant
	for _, r := range m.Runs {
		variantOf[r.Method] = runOf[r.Dirs[0]]
	}
	results := evaluate(t, out, m, func(f *Folder) [nDims]float64 { return paper[variantOf[f.Method]] })
	res, err := Table(TableOptions{Manifest: filepath.Join(out, FileManifest), Results: []string{results}, Out: filepath.Join(root, "tables")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range res.Suites[0].Means[0].Groups {
		for _, r := range g.Rows {
			got = append(got, fmt.Sprintf("%s | %s | %v | %s %d", g.Name.Text, r.Setting.Text, r.Ranks, r.Avg.round2(), r.Marks[nDims]))
		}
	}
	want := []string{
		"τ | 1.5 | [3 3 3 1 1 2] | 2.17 0",
		"τ | 2.0* | [2 1 2 2 3 1] | 1.83 1",
		"τ | 3.0 | [1 2 1 3 2 3] | 2.00 2",
		"M | 6,240 | [1 2 1 3 3 3] | 2.17 0",
		"M | 9,360* | [2 1 2 1 2 2] | 1.67 1",
		"M | 12,480 | [3 3 2 2 1 1] | 2.00 2",
		"σ | 4 | [3 2 3 1 2 2] | 2.17 0",
		"σ | 8* | [1 1 1 2 3 3] | 1.83 1",
		"σ | 16 | [2 3 2 3 1 1] | 2.00 2",
		"p | 1 | [1 2 2 3 2 1] | 1.83 2",
		"p | 2* | [1 1 1 1 1 2] | 1.17 1",
		"p | 4 | [3 3 3 2 3 3] | 2.83 0",
		"Policy | Default* | [1 1 4 2 4 5] | 2.83 1",
		"Policy | Refresh density baselines | [1 3 1 7 7 7] | 4.33 0",
		"Policy | Source-order candidates | [6 3 6 4 6 6] | 5.17 0",
		"Policy | Densest-only eviction | [4 5 2 3 3 2] | 3.17 2",
		"Policy | Mandatory + source eviction | [4 5 2 5 2 1] | 3.17 2",
		"Policy | Independent per-head | [3 2 5 6 1 3] | 3.33 0",
		"Policy | Within-block competition | [7 7 7 1 5 4] | 5.17 0",
		"Geometry | pre-RoPE K | [2 4 4 3 2 2] | 2.83 0",
		"Geometry | pre-RoPE [K;V] | [2 2 2 1 3 3] | 2.17 2",
		"Geometry | post-RoPE K* | [1 1 1 2 1 1] | 1.17 1",
		"Geometry | post-RoPE [K;V] | [4 3 2 4 4 4] | 3.50 0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ablation rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	b, err := os.ReadFile(filepath.Join(root, "tables", "prompts-3", "means_rows.tex"))
	if err != nil {
		t.Fatal(err)
	}
	// The paper's p sweep, as it prints it (Setting column in its style).
	for _, line := range []string{
		`\multirow{3}{*}{$p$} & $1$ & \textbf{97.19} & \underline{96.32} & \underline{98.32} & 50.35 & \underline{57.71} & \textbf{69.02} & \underline{1.83} \\`,
		` & $2^{*}$ & \textbf{97.19} & \textbf{96.34} & \textbf{98.33} & \textbf{51.94} & \textbf{57.74} & \underline{68.73} & \textbf{1.17} \\`,
		` & 9{,}360$^{*}$ & \underline{97.19} & \textbf{96.34} & \underline{98.33} & \textbf{51.94} & \underline{57.74} & \underline{68.73} & \textbf{1.67} \\`,
		` & Default$^{*}$ & \textbf{97.19} & \textbf{96.34} & 98.33 & \underline{51.94} & 57.74 & 68.73 & \textbf{2.83} \\`,
	} {
		if !strings.Contains(string(b), line+"\n") {
			t.Errorf("means_rows.tex lacks\n%s\n--- it holds:\n%s", line, b)
		}
	}
}

// TestTableRefusals: results of another dimension set, of another export,
// of part of a folder, twice for a folder, out of range; a prompt set with
// folders lacking results; a damaged manifest.
func TestTableRefusals(t *testing.T) {
	root := t.TempDir()
	m, out := exportMain(t, root)
	f := &m.Folders[0]
	val := [nDims]float64{0.9, 0.9, 0.9, 0.5, 0.6, 0.7}
	good := filepath.Join(root, "good"+ResultsSuffix)
	resultsFile(t, good, filepath.Join(out, f.Dir), f, val, nil)
	other := filepath.Join(root, "other"+ResultsSuffix)
	resultsFile(t, other, filepath.Join(out, f.Dir), f, val, map[string]any{"temporal_flickering": []any{0.97, []any{}}})
	elsewhere := filepath.Join(root, "elsewhere"+ResultsSuffix)
	resultsFile(t, elsewhere, "/data/another-export/prompts-2/longlive/native/45s", f, val, nil)
	partial := filepath.Join(root, "partial"+ResultsSuffix)
	short := *f
	short.Videos = short.Videos[:1]
	resultsFile(t, partial, filepath.Join(out, f.Dir), &short, val, nil)
	foreign := filepath.Join(root, "foreign"+ResultsSuffix)
	alien := *f
	alien.Videos = append(slices.Clone(f.Videos), Video{File: "a third prompt-0.mp4"})
	resultsFile(t, foreign, filepath.Join(out, f.Dir), &alien, val, nil)
	high := filepath.Join(root, "high"+ResultsSuffix)
	resultsFile(t, high, filepath.Join(out, f.Dir), f, [nDims]float64{0.9, 0.9, 0.9, 0.5, 0.6, 70}, nil)
	info := filepath.Join(root, "results_x_full_info.json")
	writeFile(t, info, `[{"prompt_en": "a", "dimension": ["subject_consistency"], "video_list": []}]`)
	nan := filepath.Join(root, "nan"+ResultsSuffix)
	writeFile(t, nan, `{"subject_consistency": [NaN, []]}`)
	half := filepath.Join(root, "half"+ResultsSuffix)
	resultsFile(t, half, filepath.Join(out, f.Dir), f, [nDims]float64{0.9, 0.9, 0.9, -1, -1, -1}, nil)
	badManifest := filepath.Join(root, "bad-manifest.json")
	writeFile(t, badManifest, `{"format": "densitykv-vbench-export", "version": 1, "dimensions": ["subject_consistency"]}`)
	tables := filepath.Join(root, "tables")
	for _, c := range []struct {
		name     string
		manifest string
		results  []string
		want     string
	}{
		{"another dimension set", out, []string{other}, `holds dimension "temporal_flickering", which is not one of the paper's six`},
		{"another export", out, []string{elsewhere}, "which is no folder of the manifest"},
		{"part of a folder", out, []string{partial}, "scores 1 of the 2 videos of prompts-2/longlive/native/30s"},
		{"videos the manifest lacks", out, []string{foreign}, `scores 1 videos that the manifest does not list in prompts-2/longlive/native/30s (e.g. "a third prompt-0"): the manifest does not match these results`},
		{"twice", out, []string{good, good}, "both give"},
		{"out of range", out, []string{high}, "imaging_quality score 70 is outside [0, 1]"},
		{"full info", out, []string{info}, "it is a list"},
		{"NaN", out, []string{nan}, "VBench writes NaN"},
		{"folders without results", out, []string{good}, "prompt set prompts-2: 11 folders lack results"},
		{"dimensions missing", out, []string{half}, "(no dynamic_degree, aesthetic_quality, imaging_quality)"},
		{"empty folder", out, []string{t.TempDir()}, "no VBench results"},
		{"damaged manifest", badManifest, []string{good}, "want the paper's six"},
		{"no manifest", filepath.Join(root, "nope"), []string{good}, "no such file"},
	} {
		_, err := Table(TableOptions{Manifest: c.manifest, Results: c.results, Out: tables})
		var ue *runfolder.UserError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a UserError containing %q", c.name, err, c.want)
		}
	}
	if _, err := os.Stat(tables); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused table wrote %s", tables)
	}
	// An output over an input (a results file named like a table) is
	// refused before anything is written.
	results := evaluate(t, out, m, func(f *Folder) [nDims]float64 {
		return mainValues[fmt.Sprintf("%g %s %s", f.Horizon, f.Backbone, f.Method)]
	})
	clash := filepath.Join(root, "clash")
	moved := filepath.Join(clash, FileScores)
	if err := os.MkdirAll(clash, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(results, m.Folders[0].Dir, "results_2026-01-01-00:00:00"+ResultsSuffix), moved); err != nil {
		t.Fatal(err)
	}
	_, err := Table(TableOptions{Manifest: out, Results: []string{results, moved}, Out: clash})
	if err == nil || !strings.Contains(err.Error(), "would overwrite an input") {
		t.Errorf("an output over an input: %v", err)
	}
	if ents, _ := os.ReadDir(clash); len(ents) != 1 {
		t.Errorf("the refused table wrote into %s: %v", clash, ents)
	}
}
