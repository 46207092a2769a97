package vbench

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/atomicfile"
)

// How videos are exported.
const (
	// LinkHard makes hard links (the default): no copy, and the export
	// keeps the videos as they were even if a run folder is removed or
	// re-encoded later. Across file systems it falls back to copies.
	LinkHard = "hard"
	// LinkSymlink makes symbolic links to the run folders' videos
	// (absolute paths): they follow later changes and break if the run
	// folders move.
	LinkSymlink = "symlink"
	// LinkCopy copies every video.
	LinkCopy = "copy"
)

// LinkModes are the accepted --link values.
var LinkModes = []string{LinkHard, LinkSymlink, LinkCopy}

// ExportOptions say what Export lays out.
type ExportOptions struct {
	// Runs are prompt-list folders (several folders of one list are its
	// shards, merged) and generate run folders.
	Runs []string
	// Out is the export folder (created; an earlier export there is
	// replaced only with Force).
	Out string
	// Horizons are the video lengths to export, in seconds; empty takes
	// each run's own horizon videos (generate.horizons), or its full
	// video when it has none.
	Horizons []float64
	// Link is LinkHard (default), LinkSymlink or LinkCopy.
	Link  string
	Force bool
}

// ExportResult is what Export did.
type ExportResult struct {
	Manifest *Manifest
	Out      string // absolute
	// UpToDate: Out already held this very export; nothing was written.
	UpToDate bool
	// Commands is the path of vbench.sh; Example the VBench command of
	// the first folder, as vbench.sh runs it.
	Commands, Example string
	// Copied counts videos copied where hard links were asked for.
	Copied int
}

// link makes a hard link (a variable: tests make it fail as across file
// systems).
var link = os.Link

// Export lays the runs' videos out for VBench-Long's custom-input
// evaluation: one folder per prompt set (suite), backbone, method and
// horizon, the videos named {prompt}-{k}.mp4 with VBench's naming rules
// (see the package documentation), each folder's prompt map, the manifest
// of what went where and vbench.sh, the VBench command of every folder.
// Runs whose prompts are not all complete are refused, as are two runs
// that would fill the same folder.
func Export(o ExportOptions) (*ExportResult, error) {
	if len(o.Runs) == 0 {
		return nil, userf("vbench export: no run folder given")
	}
	if o.Out == "" {
		return nil, userf("vbench export: --out is required")
	}
	if o.Link == "" {
		o.Link = LinkHard
	}
	if !slices.Contains(LinkModes, o.Link) {
		return nil, userf("vbench export: --link %q, want one of %s", o.Link, strings.Join(LinkModes, ", "))
	}
	if err := CheckHorizons(o.Horizons); err != nil {
		return nil, userf("vbench export: %w", err)
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, fmt.Errorf("vbench export: %w", err)
	}
	runs, err := readRuns(o.Runs, out)
	if err != nil {
		return nil, err
	}
	m, plan, err := plan(runs, o)
	if err != nil {
		return nil, err
	}
	res := &ExportResult{Manifest: m, Out: out, Commands: filepath.Join(out, FileCommands), Example: exampleCommand(out, m)}
	// An export already there: the same one is left as it is, another is
	// replaced only with --force.
	if st, err := os.Stat(out); err == nil {
		if !st.IsDir() {
			return nil, userf("vbench export: --out %s is a file, want a folder", o.Out)
		}
		old, rerr := ReadManifest(out)
		ents, _ := os.ReadDir(out)
		switch {
		case rerr == nil && sameExport(old, m):
			res.Manifest, res.UpToDate = old, true
			return res, nil
		case rerr == nil && !o.Force:
			return nil, userf("vbench export: %s holds an export of other runs or videos (%s); --force replaces it (and whatever VBench wrote inside it)", o.Out, exportDiff(old, m))
		case rerr != nil && len(ents) > 0:
			return nil, userf("vbench export: %s is not empty and holds no export (%s); choose a new or empty folder", o.Out, FileManifest)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("vbench export: --out %s: %w", o.Out, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, fmt.Errorf("vbench export: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("vbench export: %w", err)
	}
	defer os.RemoveAll(tmp) // gone after the rename into place
	if res.Copied, err = write(tmp, m, plan); err != nil {
		return nil, err
	}
	if err := replaceDir(tmp, out); err != nil {
		return nil, fmt.Errorf("vbench export: %w", err)
	}
	return res, nil
}

// CheckHorizons checks --horizons: positive, finite, increasing.
func CheckHorizons(hs []float64) error {
	for i, h := range hs {
		if !(h > 0) || math.IsInf(h, 0) {
			return fmt.Errorf("--horizons %v: a horizon is a positive number of seconds", hs)
		}
		if i > 0 && h <= hs[i-1] {
			return fmt.Errorf("--horizons %v: list the horizons in increasing order, each once", hs)
		}
	}
	return nil
}

// readRuns reads the run folders and merges the folders of one list.
func readRuns(dirs []string, out string) ([]*listRun, error) {
	var runs []*listRun
	byKey := map[string]*listRun{}
	seen := map[string]string{}
	for _, d := range dirs {
		r, err := readRun(d)
		if err != nil {
			return nil, err
		}
		abs := r.dirs[0]
		if prev, ok := seen[abs]; ok {
			return nil, userf("vbench export: run %s is given twice (%s, %s)", abs, prev, d)
		}
		seen[abs] = d
		if within(abs, out) {
			return nil, userf("vbench export: run %s is inside --out %s: the export would replace it", d, out)
		}
		if within(out, abs) {
			return nil, userf("vbench export: --out %s is inside run %s; export beside the runs", out, d)
		}
		if first, ok := byKey[r.key]; ok {
			first.dirs = append(first.dirs, abs)
			continue
		}
		byKey[r.key] = r
		runs = append(runs, r)
	}
	for _, r := range runs {
		if err := r.findVideos(); err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// placed is one video to export: where from, into which folder.
type placed struct {
	folder int
	source string
}

// plan decides the export: methods, suites, folders, file names.
func plan(runs []*listRun, o ExportOptions) (*Manifest, [][]placed, error) {
	m := &Manifest{Format: ManifestFormat, Version: ManifestVersion, Dimensions: DimensionNames(), Link: o.Link, Horizons: o.Horizons}
	methodOf, err := methods(runs, m)
	if err != nil {
		return nil, nil, err
	}
	suiteOf := suites(runs, m)
	type cellKey struct {
		suite, backbone, method string
		h                       float64
	}
	cellRun := map[cellKey]int{}
	type folderPlan struct {
		f   Folder
		run int
		src string // the video's file in a prompt's folder
	}
	var fps []folderPlan
	for ri, r := range runs {
		hs := o.Horizons
		if len(hs) == 0 {
			hs = r.ownHorizons()
		}
		mr := Run{Dirs: r.dirs, Kind: r.kind, PromptsSHA256: r.man.PromptsSHA256, ConfigSHA256: r.man.ConfigSHA256, Selected: r.man.Selected,
			Blank: r.blank, Suite: suiteOf[ri], Method: methodOf[ri], Policy: r.policy(), Backbone: r.backbone(), Seed: r.gc.Run.Seed,
			Seconds: r.seconds(), Horizons: hs}
		m.Runs = append(m.Runs, mr)
		for _, h := range hs {
			file, err := r.videoFile(h)
			if err != nil {
				return nil, nil, err
			}
			k := cellKey{suiteOf[ri], r.backbone(), methodOf[ri], h}
			if prev, ok := cellRun[k]; ok {
				p := runs[prev]
				d := diffKeys(p.flat, r.flat, func(k string) bool { return !slices.Contains(noiseKeys, k) })
				why := "the same configuration and prompts"
				if len(d) > 0 {
					why = "configurations differing in " + describeDiff(d, p.flat, r.flat)
				}
				return nil, nil, userf("vbench export: runs %s and %s would both give %s on %s at %g s for prompt set %s (%s); export them separately",
					strings.Join(p.dirs, "+"), strings.Join(r.dirs, "+"), m.method(methodOf[ri]).Label, r.backbone(), h, suiteOf[ri], why)
			}
			cellRun[k] = ri
			dir := path.Join(suiteOf[ri], r.backbone(), methodOf[ri], strconv.FormatFloat(h, 'g', -1, 64)+"s")
			fps = append(fps, folderPlan{f: Folder{Dir: dir, Suite: suiteOf[ri], Backbone: r.backbone(), Method: methodOf[ri], Horizon: h}, run: ri, src: file})
		}
	}
	// Folders in table order: suite, horizon, backbone, method.
	bbOrder := map[string]int{}
	var bbs []string
	for _, r := range runs {
		if _, ok := bbOrder[r.backbone()]; !ok {
			bbOrder[r.backbone()] = 0
			bbs = append(bbs, r.backbone())
		}
	}
	sortBackbones(bbs)
	for i, b := range bbs {
		bbOrder[b] = i
	}
	mOrder := map[string]int{}
	for i, x := range m.Methods {
		mOrder[x.ID] = i
	}
	sort.SliceStable(fps, func(i, j int) bool {
		a, b := fps[i].f, fps[j].f
		switch {
		case a.Suite != b.Suite:
			return a.Suite < b.Suite
		case a.Horizon != b.Horizon:
			return a.Horizon < b.Horizon
		case a.Backbone != b.Backbone:
			return bbOrder[a.Backbone] < bbOrder[b.Backbone]
		}
		return mOrder[a.Method] < mOrder[b.Method]
	})
	var plans [][]placed
	for fi, fp := range fps {
		r := runs[fp.run]
		var nm namer
		var ps []placed
		for _, i := range r.indices() {
			src := filepath.Join(r.complete[i], fp.src)
			st, err := os.Stat(src)
			switch {
			case err != nil:
				return nil, nil, userf("vbench export: run %s, prompt %d: %s: %v", r.dirs[0], i, src, unwrapPath(err))
			case !st.Mode().IsRegular() || st.Size() == 0:
				return nil, nil, userf("vbench export: run %s, prompt %d: %s is not a video file", r.dirs[0], i, src)
			}
			fp.f.Videos = append(fp.f.Videos, Video{File: nm.name(r.prompts[i]), Prompt: strings.TrimSpace(r.prompts[i]), Index: i, Run: fp.run,
				RunDir: r.complete[i], Source: src, Policy: r.policy(), Backbone: r.backbone(), Seed: r.gc.Run.Seed, Horizon: fp.f.Horizon,
				Link: o.Link, Bytes: st.Size()})
			ps = append(ps, placed{folder: fi, source: src})
		}
		m.Folders = append(m.Folders, fp.f)
		plans = append(plans, ps)
	}
	m.Warnings = warnings(runs, m)
	return m, plans, nil
}

// methods finds the methods (policy + memory settings) of the runs and
// returns each run's method ID.
func methods(runs []*listRun, m *Manifest) ([]string, error) {
	defaults, err := flattenConfig(config.GenerateDefaults())
	if err != nil {
		return nil, fmt.Errorf("vbench export: %w", err)
	}
	type mcfg struct {
		policy string
		keys   map[string]string
		hash   string
	}
	byHash := map[string]*mcfg{}
	var order []*mcfg
	runCfg := make([]*mcfg, len(runs))
	for i, r := range runs {
		p := r.policy()
		keys := identityKeys(r.flat, func(k string) bool { return settingKey(p, k) })
		h := hashMap(keys)
		c := byHash[p+" "+h]
		if c == nil {
			c = &mcfg{policy: p, keys: keys, hash: h}
			byHash[p+" "+h] = c
			order = append(order, c)
		}
		runCfg[i] = c
	}
	// Each policy's reference: per key, the value most of its distinct
	// configurations share (a tie goes to the default's value, then to
	// the smallest).
	ref := map[string]map[string]string{}
	for _, c := range order {
		if ref[c.policy] != nil {
			continue
		}
		var same []*mcfg
		for _, d := range order {
			if d.policy == c.policy {
				same = append(same, d)
			}
		}
		allKeys := map[string]bool{}
		for _, d := range same {
			for k := range d.keys {
				allKeys[k] = true
			}
		}
		r := map[string]string{}
		for k := range allKeys {
			count := map[string]int{}
			for _, d := range same {
				count[d.keys[k]]++
			}
			best, bestN := "", -1
			for _, v := range sortedKeys(count) {
				if n := count[v]; n > bestN || (n == bestN && v == defaults[k]) {
					best, bestN = v, n
				}
			}
			r[k] = best
		}
		ref[c.policy] = r
	}
	// The keys in which a policy's methods differ.
	varying := map[string]map[string]bool{}
	for _, c := range order {
		if varying[c.policy] == nil {
			varying[c.policy] = map[string]bool{}
		}
		for _, d := range order {
			if d.policy == c.policy {
				for _, k := range diffKeys(c.keys, d.keys, func(string) bool { return true }) {
					varying[c.policy][k] = true
				}
			}
		}
	}
	ids := map[*mcfg]string{}
	used := map[string]bool{}
	for _, c := range order {
		settings, values := map[string]string{}, map[string]string{}
		for k, v := range c.keys {
			if ref[c.policy][k] != v {
				settings[k] = v
			}
			if varying[c.policy][k] {
				values[k] = v
			}
		}
		id := methodSlug(c.policy, settings)
		if used[id] {
			id += "-" + c.hash[:8]
		}
		used[id] = true
		ids[c] = id
		l := methodLabel(c.policy, settings)
		if len(settings) == 0 {
			settings = nil
		}
		if len(values) == 0 {
			values = nil
		}
		m.Methods = append(m.Methods, Method{ID: id, Policy: c.policy, Label: l.Text, TeX: l.TeX, Settings: settings, Values: values, SHA256: c.hash})
	}
	// Methods in table order: the paper's policies first, a policy's
	// reference before its variants.
	sort.SliceStable(m.Methods, func(i, j int) bool {
		a, b := m.Methods[i], m.Methods[j]
		if ra, rb := policyRank(a.Policy), policyRank(b.Policy); ra != rb {
			return ra < rb
		}
		if a.Policy != b.Policy {
			return a.Policy < b.Policy
		}
		if (len(a.Settings) == 0) != (len(b.Settings) == 0) {
			return len(a.Settings) == 0
		}
		return a.ID < b.ID
	})
	out := make([]string, len(runs))
	for i := range runs {
		out[i] = ids[runCfg[i]]
	}
	return out, nil
}

// methodSlug is a method's folder name: the policy and its settings.
func methodSlug(policy string, settings map[string]string) string {
	parts := []string{policy}
	for _, k := range sortedKeys(settings) {
		parts = append(parts, k[strings.LastIndexByte(k, '.')+1:], settings[k])
	}
	s := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, strings.Join(parts, "-"))
	if len(s) > 96 {
		h := sha256.Sum256([]byte(s))
		s = s[:87] + "-" + hex.EncodeToString(h[:4])
	}
	return s
}

// suites finds the prompt sets and returns each run's suite ID.
func suites(runs []*listRun, m *Manifest) []string {
	type skey struct{ sha, sel string }
	idx := map[skey]int{}
	out := make([]string, len(runs))
	var keys []skey
	for i, r := range runs {
		k := skey{r.man.PromptsSHA256, fmt.Sprint(r.man.Selected)}
		if _, ok := idx[k]; !ok {
			idx[k] = len(m.Suites)
			keys = append(keys, k)
			m.Suites = append(m.Suites, Suite{ID: "prompts-" + strconv.Itoa(len(r.prompts)), PromptsSHA256: r.man.PromptsSHA256, Selected: r.man.Selected, Videos: len(r.prompts)})
		}
		out[i] = strconv.Itoa(idx[k])
	}
	count := map[string]int{}
	for _, s := range m.Suites {
		count[s.ID]++
	}
	for i := range m.Suites {
		if count[m.Suites[i].ID] > 1 {
			h := sha256.Sum256([]byte(keys[i].sha + " " + keys[i].sel))
			m.Suites[i].ID += "-" + hex.EncodeToString(h[:4])
		}
	}
	for i, s := range out {
		n, _ := strconv.Atoi(s)
		out[i] = m.Suites[n].ID
	}
	sort.SliceStable(m.Suites, func(i, j int) bool { return m.Suites[i].ID < m.Suites[j].ID })
	return out
}

// warnings are what makes an export's tables incomplete or its
// comparisons uneven: a method missing on a backbone, and runs of one
// prompt set and backbone that differ elsewhere than in their memory
// settings (seed, schedule, precision, …).
func warnings(runs []*listRun, m *Manifest) []string {
	var w []string
	type sh struct {
		suite string
		h     float64
	}
	cells := map[sh]map[string]map[string]bool{} // → backbone → method
	var order []sh
	for _, f := range m.Folders {
		k := sh{f.Suite, f.Horizon}
		if cells[k] == nil {
			cells[k] = map[string]map[string]bool{}
			order = append(order, k)
		}
		if cells[k][f.Backbone] == nil {
			cells[k][f.Backbone] = map[string]bool{}
		}
		cells[k][f.Backbone][f.Method] = true
	}
	for _, k := range order {
		all := map[string]bool{}
		for _, ms := range cells[k] {
			for x := range ms {
				all[x] = true
			}
		}
		bbs := sortedKeys(cells[k])
		sortBackbones(bbs)
		for _, b := range bbs {
			var miss []string
			for _, x := range m.Methods {
				if all[x.ID] && !cells[k][b][x.ID] {
					miss = append(miss, x.Label)
				}
			}
			if len(miss) > 0 {
				w = append(w, fmt.Sprintf("prompt set %s at %g s: %s has no run of %s; the tables need every method on every backbone", k.suite, k.h, b, strings.Join(miss, ", ")))
			}
		}
	}
	type sb struct{ suite, backbone string }
	groups := map[sb][]int{}
	var gorder []sb
	for i, r := range m.Runs {
		k := sb{r.Suite, r.Backbone}
		if groups[k] == nil {
			gorder = append(gorder, k)
		}
		groups[k] = append(groups[k], i)
	}
	other := func(k string) bool {
		return !slices.Contains(noiseKeys, k) && !slices.Contains(lengthKeys, k) && !strings.HasPrefix(k, "memory.") && k != "policies"
	}
	for _, k := range gorder {
		idx := groups[k]
		keys := map[string]bool{}
		for _, i := range idx[1:] {
			for _, d := range diffKeys(runs[idx[0]].flat, runs[i].flat, other) {
				keys[d] = true
			}
		}
		for _, key := range sortedKeys(keys) {
			vals := map[string][]string{}
			for _, i := range idx {
				v := runs[i].flat[key]
				vals[v] = append(vals[v], m.method(m.Runs[i].Method).Label)
			}
			var parts []string
			for _, v := range sortedKeys(vals) {
				parts = append(parts, fmt.Sprintf("%q: %s", v, strings.Join(vals[v], ", ")))
			}
			w = append(w, fmt.Sprintf("prompt set %s, %s: the runs differ in %s (%s), not only in their memory policy", k.suite, k.backbone, key, strings.Join(parts, "; ")))
		}
	}
	return w
}

// write makes the export in the empty folder dir and returns how many
// videos were copied where links were asked for.
func write(dir string, m *Manifest, plans [][]placed) (int, error) {
	copied := 0
	for fi := range m.Folders {
		f := &m.Folders[fi]
		fd := filepath.Join(dir, filepath.FromSlash(f.Dir))
		if err := os.MkdirAll(fd, 0o755); err != nil {
			return 0, fmt.Errorf("vbench export: %w", err)
		}
		prompts := map[string]string{}
		for vi, p := range plans[fi] {
			v := &f.Videos[vi]
			kind, err := place(p.source, filepath.Join(fd, v.File), m.Link)
			if err != nil {
				return 0, fmt.Errorf("vbench export: %s: %w", f.Dir, err)
			}
			if kind != m.Link {
				copied++
			}
			v.Link = kind
			prompts[v.File] = v.Prompt
		}
		if err := writeJSON(filepath.Join(fd, FilePrompts), prompts); err != nil {
			return 0, err
		}
		if err := atomicfile.SyncDir(fd); err != nil {
			return 0, fmt.Errorf("vbench export: %w", err)
		}
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, FileCommands), []byte(commandsScript(m))); err != nil {
		return 0, fmt.Errorf("vbench export: %w", err)
	}
	if err := os.Chmod(filepath.Join(dir, FileCommands), 0o755); err != nil {
		return 0, fmt.Errorf("vbench export: %w", err)
	}
	// The manifest last: an export folder with one is complete.
	if err := writeJSON(filepath.Join(dir, FileManifest), m); err != nil {
		return 0, err
	}
	return copied, nil
}

// place puts the video src at dst as mode asks and returns how it did: a
// hard link falls back to a copy where the file system refuses links
// (another file system, or none supported).
func place(src, dst, mode string) (string, error) {
	switch mode {
	case LinkSymlink:
		return LinkSymlink, os.Symlink(src, dst)
	case LinkHard:
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return "", err
		}
		err = link(real, dst)
		if err == nil {
			return LinkHard, nil
		}
		if !errors.Is(err, syscall.EXDEV) && !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EMLINK) && !errors.Is(err, syscall.ENOTSUP) && !errors.Is(err, syscall.EOPNOTSUPP) {
			return "", err
		}
	}
	return LinkCopy, copyFile(src, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.Write(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

func writeJSON(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("vbench: %s: %w", p, err)
	}
	if err := atomicfile.WriteBytes(p, append(b, '\n')); err != nil {
		return fmt.Errorf("vbench: %w", err)
	}
	return nil
}

// replaceDir moves the finished export tmp to out: into place when out is
// missing or empty, else swapping it with the old export, which is then
// removed.
func replaceDir(tmp, out string) error {
	if err := os.Remove(out); err != nil && !errors.Is(err, os.ErrNotExist) {
		// Not empty: an earlier export (--force).
		old, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".old*")
		if err != nil {
			return err
		}
		if err := os.Remove(old); err != nil {
			return err
		}
		if err := os.Rename(out, old); err != nil {
			return err
		}
		if err := os.Rename(tmp, out); err != nil {
			os.Rename(old, out)
			return err
		}
		atomicfile.SyncDir(filepath.Dir(out))
		return os.RemoveAll(old)
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(out))
}

// sameExport reports whether two manifests describe the same export (how
// each video was linked aside).
func sameExport(a, b *Manifest) bool {
	return bytes.Equal(canonical(a), canonical(b))
}

func canonical(m *Manifest) []byte {
	c := *m
	c.Folders = slices.Clone(m.Folders)
	for i := range c.Folders {
		c.Folders[i].Videos = slices.Clone(c.Folders[i].Videos)
		for j := range c.Folders[i].Videos {
			c.Folders[i].Videos[j].Link = ""
		}
	}
	b, _ := json.Marshal(c)
	return b
}

// exportDiff says how an old export differs from the one asked for.
func exportDiff(old, m *Manifest) string {
	dirs := func(x *Manifest) []string {
		var s []string
		for _, r := range x.Runs {
			s = append(s, r.Dirs...)
		}
		sort.Strings(s)
		return s
	}
	if a, b := dirs(old), dirs(m); !slices.Equal(a, b) {
		return fmt.Sprintf("it holds runs %s; this export takes %s", strings.Join(a, ", "), strings.Join(b, ", "))
	}
	if !slices.Equal(old.Horizons, m.Horizons) || old.Link != m.Link {
		return fmt.Sprintf("it was made with --horizons %v --link %s; this export asks for %v, %s", old.Horizons, old.Link, m.Horizons, m.Link)
	}
	for i := range min(len(old.Folders), len(m.Folders)) {
		a, b := old.Folders[i], m.Folders[i]
		if a.Dir != b.Dir || len(a.Videos) != len(b.Videos) {
			return fmt.Sprintf("folder %s became %s (%d videos, now %d)", a.Dir, b.Dir, len(a.Videos), len(b.Videos))
		}
		for j := range a.Videos {
			va, vb := a.Videos[j], b.Videos[j]
			if va.Source != vb.Source || va.Bytes != vb.Bytes || va.File != vb.File {
				return fmt.Sprintf("%s: video %s (%d bytes) is now %s (%d bytes)", a.Dir, va.Source, va.Bytes, vb.Source, vb.Bytes)
			}
		}
	}
	return "the same runs, other results of them"
}
