package eval

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/memory"
)

// Column is one metric column of a table.
type Column struct {
	Name        string // header
	Key         string // CSV key
	Decimals    int    // displayed decimals (ranks use displayed values)
	LowerBetter bool   // direction
	Ranked      bool   // part of the average rank
	Value       func(r *Result, v, z int) float64
}

// Mark values of a ranked cell.
const (
	MarkNone   = ""
	MarkBest   = "best"
	MarkSecond = "second"
)

// Row is one variant's line of a table.
type Row struct {
	Variant int // index into Result.Variants
	Label   string
	Values  []float64 // per column, full precision
	Shown   []float64 // per column, rounded to the displayed decimals
	Ranks   []float64 // per column midrank (NaN for unranked columns)
	Marks   []string  // per column: MarkBest, MarkSecond or MarkNone
	AvgRank float64   // mean of the ranked columns' midranks
	// Note, when set, is a footnote the Markdown table marks with "†": the
	// row's memory held more history tokens per head than the capacity M
	// it was configured with (Deep Forcing sizes its memory from its own
	// cache layout), so it is not at matched capacity.
	Note string
}

// Table is one group of variants at one horizon.
type Table struct {
	Group   string
	Horizon int // blocks
	Columns []Column
	Rows    []Row
}

func metricCol(name, key string, dec int, lower bool, scale float64, f func(Metrics) float64) Column {
	return Column{Name: name, Key: key, Decimals: dec, LowerBetter: lower, Ranked: true,
		Value: func(r *Result, v, z int) float64 { return scale * r.Mean(v, z, f) }}
}

// Columns returns the standard table columns for a result: the five ranked
// attention-level metrics, then unranked cost columns.
func Columns(r *Result) []Column {
	inv := 1 / math.Sqrt(float64(r.Layout.HeadDim))
	return []Column{
		metricCol("Rel. L2 err (%) ↓", "rel_err_pct", 2, true, 100, func(m Metrics) float64 { return m.RelErr }),
		metricCol("Dropped mass (%) ↓", "dropped_mass_pct", 2, true, 100, func(m Metrics) float64 { return m.Dropped }),
		metricCol("Top-k recall (%) ↑", "topk_recall_pct", 1, false, 100, func(m Metrics) float64 { return m.Recall }),
		metricCol("Cover max/√d ↓", "cover_max_over_sqrt_d", 3, true, inv, func(m Metrics) float64 { return m.CoverMax }),
		metricCol("Cover mean/√d ↓", "cover_mean_over_sqrt_d", 3, true, inv, func(m Metrics) float64 { return m.CoverMean }),
		{Name: "Mean age (frames)", Key: "retained_age_frames", Decimals: 1, Value: func(r *Result, v, z int) float64 {
			return r.Mean(v, z, func(m Metrics) float64 { return m.RetainedAge })
		}},
		{Name: "Memory (tok/head)", Key: "memory_tokens", Decimals: 0, Value: func(r *Result, v, z int) float64 {
			return r.PerBlock[v][r.Horizons[z]-1].Memory
		}},
		{Name: "State (MiB)", Key: "state_mib", Decimals: 2, Value: func(r *Result, v, z int) float64 {
			return float64(r.PerBlock[v][r.Horizons[z]-1].Bytes) / (1 << 20)
		}},
		{Name: "Update (ms/block)", Key: "update_ms_per_block", Decimals: 2, Value: func(r *Result, v, z int) float64 {
			var s float64
			n := 0
			for _, b := range r.PerBlock[v][:r.Horizons[z]] {
				if b.UpdateSeconds >= 0 {
					s += b.UpdateSeconds
					n++
				}
			}
			if n == 0 {
				return math.NaN()
			}
			return 1000 * s / float64(n)
		}},
	}
}

// MakeTable builds the table of group at horizon index z with midrank
// average ranks over the ranked columns (computed on displayed values).
func MakeTable(r *Result, group string, z int) Table {
	t := Table{Group: group, Horizon: r.Horizons[z], Columns: Columns(r)}
	for v, vr := range r.Variants {
		if vr.Group != group {
			continue
		}
		row := Row{Variant: v, Label: vr.Label, Note: budgetNote(r, v, z)}
		for _, c := range t.Columns {
			x := c.Value(r, v, z)
			row.Values = append(row.Values, x)
			row.Shown = append(row.Shown, RoundTo(x, c.Decimals))
		}
		t.Rows = append(t.Rows, row)
	}
	nr := len(t.Rows)
	for i := range t.Rows {
		t.Rows[i].Ranks = make([]float64, len(t.Columns))
		t.Rows[i].Marks = make([]string, len(t.Columns))
	}
	ranked := 0
	for ci, c := range t.Columns {
		if !c.Ranked {
			for i := range t.Rows {
				t.Rows[i].Ranks[ci] = math.NaN()
			}
			continue
		}
		ranked++
		vals := make([]float64, nr)
		for i, row := range t.Rows {
			vals[i] = row.Shown[ci]
		}
		rk := MidRanks(vals, c.LowerBetter)
		best, second := distinctBest(vals, c.LowerBetter)
		for i := range t.Rows {
			t.Rows[i].Ranks[ci] = rk[i]
			t.Rows[i].AvgRank += rk[i]
			switch {
			case nr > 1 && !math.IsNaN(best) && vals[i] == best:
				t.Rows[i].Marks[ci] = MarkBest
			case nr > 2 && !math.IsNaN(second) && vals[i] == second:
				t.Rows[i].Marks[ci] = MarkSecond
			}
		}
	}
	for i := range t.Rows {
		t.Rows[i].AvgRank /= float64(max(ranked, 1))
	}
	return t
}

// budgetNote explains a variant whose memory part held more history tokens
// per head (at any block up to horizon z) than its configured capacity M.
func budgetNote(r *Result, v, z int) string {
	if v >= len(r.PerBlock) {
		return ""
	}
	rc, err := r.Variants[v].Config.Resolve()
	if err != nil {
		return ""
	}
	peak := 0.0
	for _, b := range r.PerBlock[v][:min(r.Horizons[z], len(r.PerBlock[v]))] {
		peak = math.Max(peak, b.Memory)
	}
	if peak <= float64(rc.Capacity)+0.5 {
		return ""
	}
	note := fmt.Sprintf("%s holds up to %.0f history tokens per head in its memory part, more than the matched capacity M = %d of this table",
		r.Variants[v].Label, peak, rc.Capacity)
	if r.Variants[v].Policy == memory.NameDeepForcing {
		tpf := rc.Layout.TokensPerFrame()
		mid := rc.CacheFrames - rc.SinkFrames - rc.DeepForcing.RecentFrames
		note += fmt.Sprintf(": its own configuration, a %d-frame cache with a %d-frame sink and a %d-frame recent tail (vs the %d-frame local window of the others), leaves %d frames (%d tokens) to its compressed middle; its total context, %d frames, equals Native's",
			rc.CacheFrames, rc.SinkFrames, rc.DeepForcing.RecentFrames, rc.WindowFrames, mid, mid*tpf, rc.CacheFrames)
	}
	return note + "."
}

// distinctBest returns the best and second-best distinct non-NaN values.
func distinctBest(vals []float64, lower bool) (best, second float64) {
	best, second = math.NaN(), math.NaN()
	better := func(a, b float64) bool {
		if math.IsNaN(b) {
			return true
		}
		if lower {
			return a < b
		}
		return a > b
	}
	for _, v := range vals {
		if math.IsNaN(v) {
			continue
		}
		switch {
		case v == best || v == second:
		case better(v, best):
			best, second = v, best
		case better(v, second):
			second = v
		}
	}
	return best, second
}

func format(x float64, dec int) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case math.IsInf(x, 1):
		return "∞"
	case math.IsInf(x, -1):
		return "−∞"
	}
	return strconv.FormatFloat(x, 'f', dec, 64)
}

// Markdown renders the table; best values are bold, second-best underlined.
func (t Table) Markdown() string {
	var b strings.Builder
	b.WriteString("| " + t.Group + " |")
	for _, c := range t.Columns {
		b.WriteString(" " + c.Name + " |")
	}
	b.WriteString(" Avg. Rank ↓ |\n|---|")
	for range t.Columns {
		b.WriteString("---:|")
	}
	b.WriteString("---:|\n")
	bestRank, secondRank := distinctBest(avgRanks(t), true)
	var notes []string
	for _, row := range t.Rows {
		label := row.Label
		if row.Note != "" {
			label += " †"
			notes = append(notes, row.Note)
		}
		b.WriteString("| " + label + " |")
		for ci, c := range t.Columns {
			b.WriteString(" " + mark(format(row.Shown[ci], c.Decimals), row.Marks[ci]) + " |")
		}
		m := MarkNone
		ar := RoundTo(row.AvgRank, 2)
		if len(t.Rows) > 1 && ar == bestRank {
			m = MarkBest
		} else if len(t.Rows) > 2 && ar == secondRank {
			m = MarkSecond
		}
		b.WriteString(" " + mark(format(ar, 2), m) + " |\n")
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			b.WriteString("† " + n + "\n")
		}
	}
	return b.String()
}

func avgRanks(t Table) []float64 {
	out := make([]float64, len(t.Rows))
	for i, r := range t.Rows {
		out[i] = RoundTo(r.AvgRank, 2)
	}
	return out
}

func mark(s, m string) string {
	switch m {
	case MarkBest:
		return "**" + s + "**"
	case MarkSecond:
		return "<u>" + s + "</u>"
	}
	return s
}

// WriteCSV writes the table: one row per variant with every column's full
// precision value, its midrank and mark, and the average rank.
func (t Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := []string{"group", "horizon_blocks", "label"}
	for _, c := range t.Columns {
		head = append(head, c.Key)
		if c.Ranked {
			head = append(head, c.Key+"_rank", c.Key+"_mark")
		}
	}
	head = append(head, "avg_rank", "note")
	if err := cw.Write(head); err != nil {
		return fmt.Errorf("eval: csv: %w", err)
	}
	for _, row := range t.Rows {
		rec := []string{t.Group, strconv.Itoa(t.Horizon), row.Label}
		for ci, c := range t.Columns {
			rec = append(rec, strconv.FormatFloat(row.Values[ci], 'g', 8, 64))
			if c.Ranked {
				rec = append(rec, strconv.FormatFloat(row.Ranks[ci], 'g', 6, 64), row.Marks[ci])
			}
		}
		rec = append(rec, strconv.FormatFloat(row.AvgRank, 'g', 6, 64), row.Note)
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("eval: csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("eval: csv: %w", err)
	}
	return nil
}

// groupsOf returns the groups present in r, in suite order then first use.
func groupsOf(r *Result) []string {
	seen := map[string]bool{}
	var out []string
	for _, g := range Groups() {
		for _, v := range r.Variants {
			if v.Group == g && !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	for _, v := range r.Variants {
		if !seen[v.Group] {
			seen[v.Group] = true
			out = append(out, v.Group)
		}
	}
	return out
}

// Markdown renders every table: the baselines at every horizon, the other
// groups at the last horizon, with a header describing the run.
func (r *Result) Markdown() string {
	var b strings.Builder
	l := r.Layout
	layers := "layers"
	if l.Layers == 1 {
		layers = "layer"
	}
	fmt.Fprintf(&b, "Stream: %d blocks of %d frames, %d×%d tokens per frame, %d %s (evaluated: %v), %d heads, d_k = %d. ",
		r.Blocks, l.FramesPerBlock, l.Height, l.Width, l.Layers, layers, r.Layers, l.Heads, l.HeadDim)
	fmt.Fprintf(&b, "Sink %d frame(s), local window %d frames; reference FullHistory. Run time %.1f s.\n\n",
		r.Base.SinkFrames, r.Base.WindowFrames, r.Seconds)
	if r.CoverageSample > 0 {
		fmt.Fprintf(&b, "Coverage radius on at most %d evenly spaced history keys per layer and head (a sample: the max can underestimate the true radius).\n\n", r.CoverageSample)
	} else {
		b.WriteString("Coverage radius exact over every history key of every evaluated layer and head.\n\n")
	}
	if len(r.Skipped) > 0 {
		b.WriteString("Skipped variants:\n\n")
		for _, s := range r.Skipped {
			b.WriteString("- " + s + "\n")
		}
		b.WriteString("\n")
	}
	last := len(r.Horizons) - 1
	for _, g := range groupsOf(r) {
		zs := []int{last}
		if g == GroupBaselines {
			zs = nil
			for z := range r.Horizons {
				zs = append(zs, z)
			}
		}
		for _, z := range zs {
			fmt.Fprintf(&b, "### %s, horizon %d blocks (%d frames)\n\n", g, r.Horizons[z], r.Horizons[z]*l.FramesPerBlock)
			b.WriteString(MakeTable(r, g, z).Markdown())
			b.WriteString("\n")
		}
	}
	return b.String()
}

// WriteFiles writes the report into dir: the tables (WriteTables) and the
// plots (WritePlots). It returns the paths written.
func (r *Result) WriteFiles(dir string) ([]string, error) {
	files, err := r.WriteTables(dir)
	if err != nil {
		return files, err
	}
	plots, err := r.WritePlots(dir)
	return append(files, plots...), err
}

// WriteTables writes tables.md, one CSV per table (<group>_h<blocks>.csv),
// cells.csv (every policy, layer, head and horizon), series.csv (per block)
// and frame_coverage.csv into dir. It returns the paths written.
func (r *Result) WriteTables(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("eval: report: %w", err)
	}
	var files []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		if err := atomicfile.Write(p, fn); err != nil {
			return fmt.Errorf("eval: report: %w", err)
		}
		files = append(files, p)
		return nil
	}
	if err := write("tables.md", func(w io.Writer) error {
		_, err := io.WriteString(w, r.Markdown())
		return err
	}); err != nil {
		return files, err
	}
	for _, g := range groupsOf(r) {
		for z, h := range r.Horizons {
			if g != GroupBaselines && z != len(r.Horizons)-1 {
				continue
			}
			t := MakeTable(r, g, z)
			if err := write(fmt.Sprintf("%s_h%d.csv", g, h), t.WriteCSV); err != nil {
				return files, err
			}
		}
	}
	if err := write("cells.csv", r.writeCells); err != nil {
		return files, err
	}
	if err := write("series.csv", r.writeSeries); err != nil {
		return files, err
	}
	if err := write("frame_coverage.csv", r.writeFrameCoverage); err != nil {
		return files, err
	}
	return files, nil
}

func ff(x float64) string { return strconv.FormatFloat(x, 'g', 8, 64) }

func (r *Result) writeCells(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"group", "label", "policy", "horizon_blocks", "layer", "head", "rel_err", "dropped_mass", "topk_recall", "cover_max", "cover_mean", "retained_age_frames"})
	for v, vr := range r.Variants {
		for z, hz := range r.Horizons {
			for i, l := range r.Layers {
				for h, m := range r.Cells[v][z][i] {
					cw.Write([]string{vr.Group, vr.Label, vr.Policy, strconv.Itoa(hz), strconv.Itoa(l), strconv.Itoa(h),
						ff(m.RelErr), ff(m.Dropped), ff(m.Recall), ff(m.CoverMax), ff(m.CoverMean), ff(m.RetainedAge)})
				}
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("eval: cells csv: %w", err)
	}
	return nil
}

func (r *Result) writeSeries(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"group", "label", "policy", "block", "rel_err", "dropped_mass", "topk_recall", "memory_tokens", "bytes", "update_seconds", "seconds"})
	for v, vr := range r.Variants {
		for b, s := range r.PerBlock[v] {
			cw.Write([]string{vr.Group, vr.Label, vr.Policy, strconv.Itoa(b), ff(s.RelErr), ff(s.Dropped), ff(s.Recall),
				ff(s.Memory), strconv.FormatInt(s.Bytes, 10), ff(s.UpdateSeconds), ff(s.Seconds)})
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("eval: series csv: %w", err)
	}
	return nil
}

func (r *Result) writeFrameCoverage(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"group", "label", "policy", "horizon_blocks", "frame", "fraction_attended"})
	for v, vr := range r.Variants {
		for z, hz := range r.Horizons {
			for f, x := range r.FrameCoverage[v][z] {
				if math.IsNaN(x) {
					continue
				}
				cw.Write([]string{vr.Group, vr.Label, vr.Policy, strconv.Itoa(hz), strconv.Itoa(f), ff(x)})
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("eval: frame coverage csv: %w", err)
	}
	return nil
}
