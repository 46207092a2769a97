package vbench

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// nDims is len(Dimensions).
const nDims = 6

// SuiteTables are the paper's tables of one prompt set (suite).
type SuiteTables struct {
	Suite     string
	Videos    int    // prompts per folder
	Mode      string // ModeLong or ModeStandard
	Horizons  []float64
	Backbones []string
	Methods   []*Method
	// Rows is the main table: per horizon and backbone, every method.
	Rows []MainRow
	// Overall is each method's Avg. Rank over every cell and its wins.
	Overall []OverallRow
	// Cells is the number of backbone–metric cells per horizon; Tied how
	// many of them have a best value that several methods share.
	Cells int
	Tied  []int // per horizon
	// Means are the three-backbone-mean (ablation) tables, per horizon.
	Means []MeansBlock
}

// MainRow is one method on one backbone at one horizon.
type MainRow struct {
	Horizon  float64
	Backbone string
	Method   *Method
	Raw      [nDims]float64 // VBench's scores × 100
	Values   [nDims]cents   // as shown
	Ranks2   [nDims]int     // twice the midrank within the group
	Avg      ratio          // Avg. Rank
	// Marks: 1 best, 2 second best, per column and for Avg. Rank (last).
	Marks [nDims + 1]int
}

// OverallRow is one method over the whole suite.
type OverallRow struct {
	Method *Method
	Avg    ratio // midranks over every backbone–horizon–metric cell
	Cells  int
	Wins   []int // per horizon
	Total  int
	Mark   int
}

// MeansBlock is the three-backbone-mean table at one horizon.
type MeansBlock struct {
	Horizon   float64
	Backbones []string
	Groups    []MeansGroup
}

// MeansGroup is one block of an ablation table: the methods ranked
// against each other (a parameter sweep, the policy variants, the
// geometries; or every method).
type MeansGroup struct {
	Name label
	Rows []MeansRow
}

// MeansRow is one method's means over the backbones.
type MeansRow struct {
	Method  *Method
	Setting label
	Values  [nDims]cents
	Ranks   [nDims]int // competition ranks within the group
	Avg     ratio
	Marks   [nDims + 1]int
}

// scoreKey names one folder's scores: a method on a backbone at a horizon.
type scoreKey struct {
	h        float64
	backbone string
	method   string
}

// scoreGrid holds a suite's scores (×100) by folder.
type scoreGrid map[scoreKey]*[nDims]float64

// suiteTables computes the tables of the folders of one suite from their
// scores; every folder must have all six, and every method every backbone
// at every horizon.
func suiteTables(m *Manifest, suite Suite, scores map[string]*folderScores) (*SuiteTables, error) {
	t := &SuiteTables{Suite: suite.ID, Videos: suite.Videos}
	raw, err := t.gather(m, suite, scores)
	if err != nil {
		return nil, err
	}
	if err := t.checkGrid(suite, raw); err != nil {
		return nil, err
	}
	if err := t.mainTable(raw); err != nil {
		return nil, err
	}
	if err := t.meansTables(raw); err != nil {
		return nil, err
	}
	return t, nil
}

// gather reads the scores of the suite's folders, and the horizons,
// backbones and methods they cover (in order) and their protocol (Mode);
// a folder without all six scores is an error.
func (t *SuiteTables) gather(m *Manifest, suite Suite, scores map[string]*folderScores) (scoreGrid, error) {
	raw := scoreGrid{}
	methods := map[string]bool{}
	var missing []string
	found := false
	for i := range m.Folders {
		f := &m.Folders[i]
		if f.Suite != suite.ID {
			continue
		}
		fs := scores[f.Dir]
		found = found || fs != nil
		switch {
		case fs == nil:
			missing = append(missing, f.Dir+" (no results)")
			continue
		case len(fs.missing()) > 0:
			missing = append(missing, fmt.Sprintf("%s (no %s)", f.Dir, strings.Join(fs.missing(), ", ")))
			continue
		}
		if t.Mode == "" {
			t.Mode = fs.mode
		} else if t.Mode != fs.mode {
			return nil, userf("vbench table: prompt set %s mixes VBench-Long results and standard VBench results (%s is %s): one protocol per table", suite.ID, f.Dir, fs.mode)
		}
		var r [nDims]float64
		for d := range r {
			r[d] = fs.score[d] * 100
		}
		raw[scoreKey{f.Horizon, f.Backbone, f.Method}] = &r
		if !slices.Contains(t.Horizons, f.Horizon) {
			t.Horizons = append(t.Horizons, f.Horizon)
		}
		if !slices.Contains(t.Backbones, f.Backbone) {
			t.Backbones = append(t.Backbones, f.Backbone)
		}
		methods[f.Method] = true
	}
	if !found {
		return nil, errNoResults
	}
	if len(missing) > 0 {
		return nil, userf("vbench table: prompt set %s: %d folders lack results: %s", suite.ID, len(missing), strings.Join(head(missing, 8), "; "))
	}
	sort.Float64s(t.Horizons)
	sortBackbones(t.Backbones)
	for i := range m.Methods {
		if methods[m.Methods[i].ID] {
			t.Methods = append(t.Methods, &m.Methods[i])
		}
	}
	return raw, nil
}

// checkGrid requires a folder for every method on every backbone at every
// horizon.
func (t *SuiteTables) checkGrid(suite Suite, raw scoreGrid) error {
	var gaps []string
	for _, h := range t.Horizons {
		for _, b := range t.Backbones {
			for _, x := range t.Methods {
				if raw[scoreKey{h, b, x.ID}] == nil {
					gaps = append(gaps, fmt.Sprintf("%s on %s at %g s", x.Label, b, h))
				}
			}
		}
	}
	if len(gaps) > 0 {
		return userf("vbench table: prompt set %s is not a full grid of methods, backbones and horizons: no folder for %s (export and evaluate those runs too)", suite.ID, strings.Join(head(gaps, 8), "; "))
	}
	return nil
}

// mainTable fills the main table (a row per method, backbone and horizon:
// displayed values, midranks, marks, the Avg. Rank), the ties per horizon
// and the overall rows (the Avg. Rank over every cell, the wins).
func (t *SuiteTables) mainTable(raw scoreGrid) error {
	nm := len(t.Methods)
	t.Cells = len(t.Backbones) * nDims
	t.Tied = make([]int, len(t.Horizons))
	sum2 := make([]int64, nm) // twice the rank sums over all cells
	wins := make([][]int, nm)
	for i := range wins {
		wins[i] = make([]int, len(t.Horizons))
	}
	for hi, h := range t.Horizons {
		for _, b := range t.Backbones {
			rows, err := t.mainRows(raw, h, b)
			if err != nil {
				return err
			}
			for d := range nDims {
				if t.rankColumn(rows, d, sum2, wins, hi) > 1 {
					t.Tied[hi]++
				}
			}
			avg := make([]cents, nm)
			for mi := range rows {
				s := 0
				for _, r := range rows[mi].Ranks2 {
					s += r
				}
				rows[mi].Avg = ratio{int64(s), 2 * nDims}
				avg[mi] = rows[mi].Avg.round2()
			}
			for mi, mk := range marks(avg, true) {
				rows[mi].Marks[nDims] = mk
			}
			t.Rows = append(t.Rows, rows...)
		}
	}
	cells := len(t.Horizons) * t.Cells
	avg := make([]cents, nm)
	for mi, x := range t.Methods {
		o := OverallRow{Method: x, Avg: ratio{sum2[mi], 2 * int64(cells)}, Cells: cells, Wins: wins[mi]}
		for _, w := range wins[mi] {
			o.Total += w
		}
		t.Overall = append(t.Overall, o)
		avg[mi] = o.Avg.round2()
	}
	for mi, mk := range marks(avg, true) {
		t.Overall[mi].Mark = mk
	}
	return nil
}

// mainRows are the methods' rows on backbone b at horizon h, with their
// displayed values.
func (t *SuiteTables) mainRows(raw scoreGrid, h float64, b string) ([]MainRow, error) {
	rows := make([]MainRow, len(t.Methods))
	for mi, x := range t.Methods {
		rows[mi] = MainRow{Horizon: h, Backbone: b, Method: x, Raw: *raw[scoreKey{h, b, x.ID}]}
		for d := range nDims {
			v, err := display(rows[mi].Raw[d])
			if err != nil {
				return nil, fmt.Errorf("vbench table: %s on %s at %g s: %s: %w", x.Label, b, h, Dimensions[d].Name, err)
			}
			rows[mi].Values[d] = v
		}
	}
	return rows, nil
}

// rankColumn ranks the rows on dimension d (midranks, twice, added to
// sum2; marks, the best counted as wins at horizon hi) and returns how
// many rows are best.
func (t *SuiteTables) rankColumn(rows []MainRow, d int, sum2 []int64, wins [][]int, hi int) (best int) {
	col := make([]cents, len(rows))
	for mi := range rows {
		col[mi] = rows[mi].Values[d]
	}
	r2, mk := midRanks2(col), marks(col, false)
	for mi := range rows {
		rows[mi].Ranks2[d], rows[mi].Marks[d] = r2[mi], mk[mi]
		sum2[mi] += int64(r2[mi])
		if mk[mi] == 1 {
			wins[mi][hi]++
			best++
		}
	}
	return best
}

// meansTables fills the ablation tables: per horizon, each group's rows of
// means over the backbones, ranked within the group.
func (t *SuiteTables) meansTables(raw scoreGrid) error {
	groups := meansGroups(t.Methods)
	for _, h := range t.Horizons {
		blk := MeansBlock{Horizon: h, Backbones: t.Backbones}
		for _, g := range groups {
			mg := MeansGroup{Name: g.name}
			for _, gr := range g.rows {
				row, err := t.meansRow(raw, h, gr)
				if err != nil {
					return err
				}
				mg.Rows = append(mg.Rows, row)
			}
			mg.rank()
			blk.Groups = append(blk.Groups, mg)
		}
		t.Means = append(t.Means, blk)
	}
	return nil
}

// meansRow is gr's row at horizon h: the unweighted mean over the
// backbones, in their order, of each dimension, displayed.
func (t *SuiteTables) meansRow(raw scoreGrid, h float64, gr groupRow) (MeansRow, error) {
	row := MeansRow{Method: gr.method, Setting: gr.setting}
	for d := range nDims {
		s := 0.0
		for _, b := range t.Backbones {
			s += raw[scoreKey{h, b, gr.method.ID}][d]
		}
		v, err := display(s / float64(len(t.Backbones)))
		if err != nil {
			return row, fmt.Errorf("vbench table: %s at %g s: %s: %w", gr.method.Label, h, Dimensions[d].Name, err)
		}
		row.Values[d] = v
	}
	return row, nil
}

// rank gives the group's rows their competition ranks and marks per
// dimension, and their Avg. Rank and its mark.
func (mg *MeansGroup) rank() {
	for d := range nDims {
		col := make([]cents, len(mg.Rows))
		for i := range mg.Rows {
			col[i] = mg.Rows[i].Values[d]
		}
		rk, mk := competitionRanks(col), marks(col, false)
		for i := range mg.Rows {
			mg.Rows[i].Ranks[d], mg.Rows[i].Marks[d] = rk[i], mk[i]
		}
	}
	avg := make([]cents, len(mg.Rows))
	for i := range mg.Rows {
		s := 0
		for _, r := range mg.Rows[i].Ranks {
			s += r
		}
		mg.Rows[i].Avg = ratio{int64(s), nDims}
		avg[i] = mg.Rows[i].Avg.round2()
	}
	for i, mk := range marks(avg, true) {
		mg.Rows[i].Marks[nDims] = mk
	}
}

// groupRow is one row of an ablation group: a method and its setting.
type groupRow struct {
	method  *Method
	setting label
}

type meansGroupDef struct {
	name label
	rows []groupRow
}

// meansGroups arranges the methods of a suite into the ablation table's
// groups. When they are variants of one policy around a reference (the
// method without settings), each variant joins the group of the one key
// it changes (ablationGroups: a sweep per parameter, the policy variants,
// the geometries; any other key its own group; variants changing several
// keys the group "Other"), and the reference joins every group (marked
// *). Otherwise all methods form one group.
func meansGroups(methods []*Method) []meansGroupDef {
	var ref *Method
	policies := map[string]bool{}
	for _, x := range methods {
		policies[x.Policy] = true
		if len(x.Settings) == 0 {
			ref = x
		}
	}
	if len(policies) != 1 || ref == nil || len(methods) < 2 {
		g := meansGroupDef{name: label{"Methods", "Methods"}}
		for _, x := range methods {
			g.rows = append(g.rows, groupRow{x, label{x.Label, x.TeX}})
		}
		return []meansGroupDef{g}
	}
	type grp struct {
		def     groupDef
		members []*Method
	}
	var groups []*grp
	find := func(k string) *grp {
		for _, g := range groups {
			if slices.Contains(g.def.keys, k) {
				return g
			}
		}
		def := groupDef{label{"Other", "Other"}, nil, false}
		if k != "" {
			def = groupDef{keyLabel(k), []string{k}, true}
			for _, d := range ablationGroups {
				if slices.Contains(d.keys, k) {
					def = d
				}
			}
		}
		g := &grp{def: def}
		groups = append(groups, g)
		return g
	}
	for _, x := range methods {
		switch len(x.Settings) {
		case 0:
		case 1:
			for k := range x.Settings {
				g := find(k)
				g.members = append(g.members, x)
			}
		default:
			g := find("")
			g.members = append(g.members, x)
		}
	}
	rank := func(g *grp) int {
		for i, d := range ablationGroups {
			if d.name == g.def.name {
				return i
			}
		}
		if g.def.keys == nil {
			return len(ablationGroups) + 1
		}
		return len(ablationGroups)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		ri, rj := rank(groups[i]), rank(groups[j])
		if ri != rj {
			return ri < rj
		}
		return groups[i].def.name.Text < groups[j].def.name.Text
	})
	names, order := variantRows()
	var out []meansGroupDef
	for _, g := range groups {
		members := append([]*Method{ref}, g.members...)
		rows := make([]groupRow, len(members))
		sortKey := make([]string, len(members))
		num := make([]float64, len(members))
		numeric := g.def.sweep
		for i, x := range members {
			rows[i].method = x
			k := ""
			if len(g.def.keys) > 0 {
				k = g.def.keys[0]
				for _, kk := range g.def.keys {
					if _, ok := x.Settings[kk]; ok {
						k = kk
					}
				}
			}
			v := x.Values[k]
			star := ""
			if x == ref {
				star = "*"
			}
			switch {
			case g.def.keys == nil: // Other
				rows[i].setting = label{x.Label + star, starTeX(x.TeX, star)}
				sortKey[i] = x.Label
			case g.def.sweep:
				s := settingValue(k, v)
				rows[i].setting = label{s.Text + star, starTeX(s.TeX, star)}
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					numeric = false
				}
				num[i] = f
				sortKey[i] = v
			case k == "memory.bank.descriptor":
				l, ok := descriptorLabels[v]
				if !ok {
					l = label{v, texEscape(v)}
				}
				rows[i].setting = label{l.Text + star, starTeX(l.TeX, star)}
				sortKey[i] = fmt.Sprintf("%02d %s", indexOr(descriptorOrder, v), v)
			default: // the policy variants
				if x == ref {
					rows[i].setting = label{"Default*", "Default$^{*}$"}
					sortKey[i] = "00"
					break
				}
				n, ok := names[k+"="+v]
				if !ok {
					n = keyLabel(k).Text + " " + v
				}
				rows[i].setting = label{n, texEscape(n)}
				sortKey[i] = fmt.Sprintf("%02d %s", indexOr(order, k+"="+v)+1, n)
			}
		}
		idx := make([]int, len(rows))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool {
			if numeric {
				return num[idx[a]] < num[idx[b]]
			}
			return sortKey[idx[a]] < sortKey[idx[b]]
		})
		def := meansGroupDef{name: g.def.name}
		for _, i := range idx {
			def.rows = append(def.rows, rows[i])
		}
		out = append(out, def)
	}
	return out
}

// starTeX marks a LaTeX label as the reference's (a superscript *),
// inside its closing math when it ends in math ("$2.0^{*}$", as the paper
// writes it).
func starTeX(tex, star string) string {
	switch {
	case star == "":
		return tex
	case strings.HasSuffix(tex, "$") && !strings.HasSuffix(tex, `\$`):
		return tex[:len(tex)-1] + "^{*}$"
	}
	return tex + "$^{*}$"
}

// indexOr is the index of v in xs, or len(xs).
func indexOr(xs []string, v string) int {
	if i := slices.Index(xs, v); i >= 0 {
		return i
	}
	return len(xs)
}

func head(xs []string, n int) []string {
	if len(xs) <= n {
		return xs
	}
	return append(slices.Clone(xs[:n]), fmt.Sprintf("… %d more", len(xs)-n))
}
