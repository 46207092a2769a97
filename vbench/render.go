package vbench

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/plots"
)

// TableOptions say what Table reads and where it writes.
type TableOptions struct {
	// Manifest is the export's manifest.json (or the export folder).
	Manifest string
	// Results are VBench results files, or folders searched for
	// *_eval_results.json.
	Results []string
	// Out is the folder of the tables (created).
	Out string
}

// TableResult is what Table made.
type TableResult struct {
	Suites []*SuiteTables
	// Skipped are the prompt sets without any results.
	Skipped []string
	Files   []string
	// Markdown is every table, as tables.md holds them.
	Markdown string
}

// Files Table writes: per prompt set, in a folder named after it, the main
// table (backbones), the three-backbone means (means), each method's
// overall Avg. Rank and wins (overall) and the wins figure; beside them
// every folder's scores and all the Markdown.
const (
	FileTables = "tables.md"
	FileScores = "scores.csv"
)

// Table reads VBench's results of an export's folders and writes the
// paper's tables for every prompt set of the export with results: the
// main table (six values per method for each backbone and horizon, Avg.
// Rank from midranks of the displayed values, bold/underline), the
// overall Avg. Rank and single-metric wins (and their figure, PNG and
// SVG), and the three-backbone means with the ablation groups' competition
// ranks, as Markdown, CSV and LaTeX.
func Table(o TableOptions) (*TableResult, error) {
	if o.Manifest == "" {
		return nil, userf("vbench table: --manifest is required (the export's manifest.json or folder)")
	}
	if o.Out == "" {
		return nil, userf("vbench table: --out is required")
	}
	if len(o.Results) == 0 {
		return nil, userf("vbench table: no results given (VBench's *%s files, or folders holding them)", ResultsSuffix)
	}
	m, err := ReadManifest(o.Manifest)
	if err != nil {
		return nil, err
	}
	files, err := expandResults(o.Results)
	if err != nil {
		return nil, err
	}
	scores, err := scoresByFolder(m, files)
	if err != nil {
		return nil, err
	}
	res := &TableResult{}
	for _, s := range m.Suites {
		t, err := suiteTables(m, s, scores)
		if errors.Is(err, errNoResults) {
			res.Skipped = append(res.Skipped, s.ID)
			continue
		}
		if err != nil {
			return nil, err
		}
		res.Suites = append(res.Suites, t)
	}
	// Everything is rendered before anything is written.
	outs := map[string][]byte{}
	var order []string
	put := func(name string, b []byte) {
		p := filepath.Join(o.Out, filepath.FromSlash(name))
		outs[p] = b
		order = append(order, p)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# VBench tables\n\nFrom %s: %d results files.", o.Manifest, len(files))
	if len(res.Skipped) > 0 {
		fmt.Fprintf(&md, " Prompt sets without results: %s.", strings.Join(res.Skipped, ", "))
	}
	md.WriteString("\n")
	type fig struct {
		f    *plots.Figure
		base string
	}
	var figs []fig
	for _, t := range res.Suites {
		b, mt := backbonesMarkdown(t), meansMarkdown(t)
		put(t.Suite+"/backbones.md", []byte(b))
		put(t.Suite+"/means.md", []byte(mt))
		md.WriteString("\n" + b + "\n" + mt)
		c, err := backbonesCSV(t)
		if err != nil {
			return nil, err
		}
		put(t.Suite+"/backbones.csv", c)
		if c, err = overallCSV(t); err != nil {
			return nil, err
		}
		put(t.Suite+"/overall.csv", c)
		if c, err = meansCSV(t); err != nil {
			return nil, err
		}
		put(t.Suite+"/means.csv", c)
		rows := backbonesTeXRows(t)
		put(t.Suite+"/backbones_rows.tex", []byte(rows+"\n"))
		put(t.Suite+"/backbones.tex", []byte(texTable(o.Manifest, t, "l@{\\hspace{0.85em}}llrrrrrrr", "Time & Backbone & Method", rows)))
		rows = meansTeXRows(t)
		put(t.Suite+"/means_rows.tex", []byte(rows+"\n"))
		put(t.Suite+"/means.tex", []byte(texTable(o.Manifest, t, "llrrrrrrr", "Group & Setting", rows)))
		f, err := winsFigure(t)
		if err != nil {
			return nil, err
		}
		figs = append(figs, fig{f, filepath.Join(o.Out, t.Suite, "wins")})
	}
	sc, err := scoresCSV(m, scores)
	if err != nil {
		return nil, err
	}
	put(FileScores, sc)
	put(FileTables, []byte(md.String()))
	res.Markdown = md.String()
	var outputs []atomicfile.Output
	for _, p := range order {
		outputs = append(outputs, atomicfile.Output{Role: "--out", Path: p})
	}
	for _, f := range figs {
		outputs = append(outputs, atomicfile.Output{Role: "--out", Path: f.base + ".png"}, atomicfile.Output{Role: "--out", Path: f.base + ".svg"})
	}
	ins := []atomicfile.Input{{Role: "--manifest", Path: o.Manifest}}
	for _, f := range files {
		ins = append(ins, atomicfile.Input{Role: "results", Path: f})
	}
	if err := atomicfile.CheckOutputs(outputs, ins); err != nil {
		return nil, userf("vbench table: %w", err)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("vbench table: %w", err)
	}
	for _, t := range res.Suites {
		if err := os.MkdirAll(filepath.Join(o.Out, t.Suite), 0o755); err != nil {
			return nil, fmt.Errorf("vbench table: %w", err)
		}
	}
	for _, p := range order {
		if err := atomicfile.WriteBytes(p, outs[p]); err != nil {
			return nil, fmt.Errorf("vbench table: %w", err)
		}
		res.Files = append(res.Files, p)
	}
	for _, f := range figs {
		ps, err := f.f.Save(f.base)
		if err != nil {
			return nil, fmt.Errorf("vbench table: %w", err)
		}
		res.Files = append(res.Files, ps...)
	}
	return res, nil
}

func seconds(h float64) string { return strconv.FormatFloat(h, 'g', -1, 64) + " s" }

func mdMark(v string, mark int) string {
	switch mark {
	case 1:
		return "**" + v + "**"
	case 2:
		return "_" + v + "_"
	}
	return v
}

func texMark(v string, mark int) string {
	switch mark {
	case 1:
		return `\textbf{` + v + `}`
	case 2:
		return `\underline{` + v + `}`
	}
	return v
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func header(lead string) string {
	var b strings.Builder
	b.WriteString("| " + lead)
	for _, d := range Dimensions {
		b.WriteString(" | " + d.Label + "↑")
	}
	b.WriteString(" | Avg. Rank↓ |\n|")
	n := strings.Count(lead, "|") + 1
	for range n {
		b.WriteString("---|")
	}
	for range nDims + 1 {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	return b.String()
}

func protocol(t *SuiteTables) string {
	if t.Mode == ModeLong {
		return "VBench-Long"
	}
	return "VBench (whole videos, not VBench-Long)"
}

// backbonesMarkdown is the main table of a suite and its overall ranks and
// wins.
func backbonesMarkdown(t *SuiteTables) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Prompt set %s: per backbone\n\n", t.Suite)
	fmt.Fprintf(&b, "%s, %d videos per method, backbone and horizon. Values: VBench score × 100; **bold** and _italic_ mark the best and second-best displayed value of a column within a horizon and backbone. Avg. Rank: the mean of the six ranks of the displayed values (midranks for ties), lower is better.\n\n", protocol(t), t.Videos)
	b.WriteString(header("Time | Backbone | Method"))
	for _, r := range t.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s", seconds(r.Horizon), backboneLabel(r.Backbone), mdEscape(r.Method.Label))
		for d := range nDims {
			fmt.Fprintf(&b, " | %s", mdMark(r.Values[d].String(), r.Marks[d]))
		}
		fmt.Fprintf(&b, " | %s |\n", mdMark(r.Avg.round2().String(), r.Marks[nDims]))
	}
	cells := len(t.Horizons) * t.Cells
	fmt.Fprintf(&b, "\n### Overall Avg. Rank and single-metric wins\n\nAvg. Rank over all %d backbone–horizon–metric cells; a win is a cell whose best displayed value the method holds (%d cells per horizon; a shared best counts for each method sharing it).\n\n", cells, t.Cells)
	b.WriteString("| Method | Avg. Rank↓")
	for _, h := range t.Horizons {
		fmt.Fprintf(&b, " | Wins %s", seconds(h))
	}
	b.WriteString(" | Wins |\n|---|---:|")
	for range t.Horizons {
		b.WriteString("---:|")
	}
	b.WriteString("---:|\n")
	for _, o := range t.Overall {
		fmt.Fprintf(&b, "| %s | %s", mdEscape(o.Method.Label), mdMark(o.Avg.round2().String(), o.Mark))
		for _, w := range o.Wins {
			fmt.Fprintf(&b, " | %d", w)
		}
		fmt.Fprintf(&b, " | %d of %d |\n", o.Total, cells)
	}
	var tied []string
	for i, h := range t.Horizons {
		if t.Tied[i] > 0 {
			tied = append(tied, fmt.Sprintf("%d at %s", t.Tied[i], seconds(h)))
		}
	}
	if len(tied) > 0 {
		fmt.Fprintf(&b, "\nCells with a shared best value: %s.\n", strings.Join(tied, ", "))
	}
	return b.String()
}

// meansMarkdown is the three-backbone-mean table of a suite.
func meansMarkdown(t *SuiteTables) string {
	var b strings.Builder
	var bl []string
	for _, x := range t.Backbones {
		bl = append(bl, backboneLabel(x))
	}
	fmt.Fprintf(&b, "## Prompt set %s: means over the backbones\n\n", t.Suite)
	fmt.Fprintf(&b, "Unweighted means of VBench score × 100 over %s. **Bold** and _italic_ mark the best and second-best displayed value within a group; Avg. Rank: the mean of the six competition ranks (ties 1, 1, 3) of the displayed means within the group, lower is better; * marks the reference setting.\n", strings.Join(bl, ", "))
	for _, blk := range t.Means {
		fmt.Fprintf(&b, "\n### %s\n\n", seconds(blk.Horizon))
		b.WriteString(header("Group | Setting"))
		for _, g := range blk.Groups {
			for i, r := range g.Rows {
				name := ""
				if i == 0 {
					name = g.Name.Text
				}
				fmt.Fprintf(&b, "| %s | %s", mdEscape(name), mdEscape(r.Setting.Text))
				for d := range nDims {
					fmt.Fprintf(&b, " | %s", mdMark(r.Values[d].String(), r.Marks[d]))
				}
				fmt.Fprintf(&b, " | %s |\n", mdMark(r.Avg.round2().String(), r.Marks[nDims]))
			}
		}
	}
	return b.String()
}

func csvBytes(rows [][]string) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.WriteAll(rows); err != nil {
		return nil, fmt.Errorf("vbench table: %w", err)
	}
	return buf.Bytes(), nil
}

func dimHeader(lead ...string) []string {
	h := append([]string{}, lead...)
	for _, d := range Dimensions {
		h = append(h, d.Name)
	}
	for _, d := range Dimensions {
		h = append(h, d.Name+"_rank")
	}
	return append(h, "avg_rank")
}

func halfRank(r2 int) string {
	if r2%2 == 0 {
		return strconv.Itoa(r2 / 2)
	}
	return strconv.Itoa(r2/2) + ".5"
}

func backbonesCSV(t *SuiteTables) ([]byte, error) {
	rows := [][]string{dimHeader("horizon_s", "backbone", "method", "label")}
	for _, r := range t.Rows {
		row := []string{strconv.FormatFloat(r.Horizon, 'g', -1, 64), r.Backbone, r.Method.ID, r.Method.Label}
		for d := range nDims {
			row = append(row, r.Values[d].String())
		}
		for d := range nDims {
			row = append(row, halfRank(r.Ranks2[d]))
		}
		rows = append(rows, append(row, r.Avg.round2().String()))
	}
	return csvBytes(rows)
}

func overallCSV(t *SuiteTables) ([]byte, error) {
	h := []string{"method", "label", "avg_rank", "cells"}
	for _, x := range t.Horizons {
		h = append(h, "wins_"+strconv.FormatFloat(x, 'g', -1, 64)+"s")
	}
	rows := [][]string{append(h, "wins_total")}
	for _, o := range t.Overall {
		row := []string{o.Method.ID, o.Method.Label, o.Avg.round2().String(), strconv.Itoa(o.Cells)}
		for _, w := range o.Wins {
			row = append(row, strconv.Itoa(w))
		}
		rows = append(rows, append(row, strconv.Itoa(o.Total)))
	}
	return csvBytes(rows)
}

func meansCSV(t *SuiteTables) ([]byte, error) {
	rows := [][]string{dimHeader("horizon_s", "group", "setting", "method")}
	for _, blk := range t.Means {
		for _, g := range blk.Groups {
			for _, r := range g.Rows {
				row := []string{strconv.FormatFloat(blk.Horizon, 'g', -1, 64), g.Name.Text, r.Setting.Text, r.Method.ID}
				for d := range nDims {
					row = append(row, r.Values[d].String())
				}
				for d := range nDims {
					row = append(row, strconv.Itoa(r.Ranks[d]))
				}
				rows = append(rows, append(row, r.Avg.round2().String()))
			}
		}
	}
	return csvBytes(rows)
}

// scoresCSV lists every folder's six scores as VBench gave them.
func scoresCSV(m *Manifest, scores map[string]*folderScores) ([]byte, error) {
	h := []string{"folder", "suite", "backbone", "method", "horizon_s", "mode"}
	rows := [][]string{append(h, DimensionNames()...)}
	for _, f := range m.Folders {
		fs := scores[f.Dir]
		if fs == nil {
			continue
		}
		row := []string{f.Dir, f.Suite, f.Backbone, f.Method, strconv.FormatFloat(f.Horizon, 'g', -1, 64), fs.mode}
		for d := range nDims {
			v := ""
			if fs.from[d] != "" {
				v = strconv.FormatFloat(fs.score[d], 'g', -1, 64)
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	return csvBytes(rows)
}

// backbonesTeXRows are the main table's rows in the paper's layout (Time &
// Backbone & Method & six values & Avg. Rank), for its
// \input{…_rows.tex}: the last row has no closing \\ (the paper's table
// adds it).
func backbonesTeXRows(t *SuiteTables) string {
	var lines []string
	nm, nb := len(t.Methods), len(t.Backbones)
	for i, r := range t.Rows {
		var b strings.Builder
		switch {
		case i > 0 && i%(nm*nb) == 0:
			lines = append(lines, `\midrule`)
		case i > 0 && i%nm == 0:
			lines = append(lines, `\cmidrule(l){2-10}`)
		}
		if i%(nm*nb) == 0 {
			fmt.Fprintf(&b, `\multirow{%d}{*}{%s\,s}`, nm*nb, strconv.FormatFloat(r.Horizon, 'g', -1, 64))
		}
		b.WriteString(" & ")
		if i%nm == 0 {
			fmt.Fprintf(&b, `\multirow{%d}{*}{%s}`, nm, texEscape(backboneLabel(r.Backbone)))
		}
		b.WriteString(" & " + r.Method.TeX)
		for d := range nDims {
			b.WriteString(" & " + texMark(r.Values[d].String(), r.Marks[d]))
		}
		b.WriteString(" & " + texMark(r.Avg.round2().String(), r.Marks[nDims]))
		lines = append(lines, b.String())
	}
	return joinTeXRows(lines)
}

// meansTeXRows are the means table's rows (Group & Setting & six means &
// Avg. Rank), a \midrule between groups.
func meansTeXRows(t *SuiteTables) string {
	var lines []string
	for bi, blk := range t.Means {
		if len(t.Means) > 1 {
			if bi > 0 {
				lines = append(lines, `\midrule`)
			}
			lines = append(lines, fmt.Sprintf(`\multicolumn{9}{c}{\textbf{%s\,s}}`, strconv.FormatFloat(blk.Horizon, 'g', -1, 64)))
			lines = append(lines, `\midrule`)
		}
		for gi, g := range blk.Groups {
			if gi > 0 {
				lines = append(lines, `\midrule`)
			}
			for i, r := range g.Rows {
				var b strings.Builder
				if i == 0 {
					fmt.Fprintf(&b, `\multirow{%d}{*}{%s}`, len(g.Rows), g.Name.TeX)
				}
				b.WriteString(" & " + r.Setting.TeX)
				for d := range nDims {
					b.WriteString(" & " + texMark(r.Values[d].String(), r.Marks[d]))
				}
				b.WriteString(" & " + texMark(r.Avg.round2().String(), r.Marks[nDims]))
				lines = append(lines, b.String())
			}
		}
	}
	return joinTeXRows(lines)
}

// joinTeXRows ends every table row but the last with \\ (rules stand on
// lines of their own).
func joinTeXRows(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		b.WriteString(l)
		isRule := strings.HasPrefix(l, `\midrule`) || strings.HasPrefix(l, `\cmidrule`)
		last := true
		for _, n := range lines[i+1:] {
			if !strings.HasPrefix(n, `\midrule`) && !strings.HasPrefix(n, `\cmidrule`) {
				last = false
				break
			}
		}
		if !isRule && !last {
			b.WriteString(` \\`)
		}
		if i < len(lines)-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// texTable wraps rows into a standalone booktabs tabular (packages
// booktabs and multirow).
func texTable(manifest string, t *SuiteTables, cols, lead, rows string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%% Generated by densitykv vbench table from %s, prompt set %s (%s).\n", manifest, t.Suite, protocol(t))
	b.WriteString("% Needs \\usepackage{booktabs,multirow}. Bold/underline: best/second-best displayed value.\n")
	fmt.Fprintf(&b, "\\begin{tabular}{%s}\n\\toprule\n%s", cols, lead)
	for _, d := range Dimensions {
		fmt.Fprintf(&b, " & %s$\\uparrow$", d.Label)
	}
	b.WriteString(" & Avg. Rank$\\downarrow$ \\\\\n\\midrule\n")
	b.WriteString(rows)
	b.WriteString(" \\\\\n\\bottomrule\n\\end{tabular}\n")
	return b.String()
}

// winsFigure is the single-metric wins per horizon and method.
func winsFigure(t *SuiteTables) (*plots.Figure, error) {
	bp := plots.BarPanel{Title: fmt.Sprintf("Single-metric wins, prompt set %s (%d cells per horizon)", t.Suite, t.Cells),
		YLabel: "wins", Labels: true}
	for _, h := range t.Horizons {
		bp.Groups = append(bp.Groups, seconds(h))
	}
	top := 0
	for _, o := range t.Overall {
		s := plots.BarSeries{Name: o.Method.Label}
		for _, w := range o.Wins {
			s.Values = append(s.Values, float64(w))
			top = max(top, w)
		}
		bp.Series = append(bp.Series, s)
	}
	bp.YMax = float64(max(top, 1)) * 1.15
	return plots.Bars("vbench wins", 0, 0, bp)
}
