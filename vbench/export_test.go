package vbench

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/vbench/vbenchtest"
)

var fourPrompts = []string{"A cat_on/a mat.", "", "A dog runs.", " A cat on a mat. "}

// TestExportLayout: folders per prompt set, backbone, method and horizon;
// VBench's names (sanitised, equal names counted); hard links to the
// right videos; the prompt map; the manifest; the commands.
func TestExportLayout(t *testing.T) {
	root := t.TempDir()
	native := writeList(t, filepath.Join(root, "runs", "native"), fakeList{Backbone: "longlive", Policy: "native", Horizons: []float64{30, 60, 120}, Prompts: fourPrompts})
	dkv := writeList(t, filepath.Join(root, "runs", "dkv"), fakeList{Backbone: "longlive", Policy: "densitykv", Horizons: []float64{30, 60, 120}, Prompts: fourPrompts, Seed: 0})
	out := filepath.Join(root, "export")
	res, err := Export(ExportOptions{Runs: []string{dkv, native}, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	var dirs []string
	for _, f := range m.Folders {
		dirs = append(dirs, f.Dir)
	}
	want := []string{
		"prompts-3/longlive/native/30s", "prompts-3/longlive/densitykv/30s",
		"prompts-3/longlive/native/60s", "prompts-3/longlive/densitykv/60s",
		"prompts-3/longlive/native/120s", "prompts-3/longlive/densitykv/120s",
	}
	if !slices.Equal(dirs, want) {
		t.Fatalf("folders %q, want %q", dirs, want)
	}
	f := m.Folders[3] // densitykv, 60 s
	var files []string
	for _, v := range f.Videos {
		files = append(files, v.File)
		src := filepath.Join(runfolder.BatchDir(dkv, v.Index), "video_60s.mp4")
		a, err1 := os.Stat(filepath.Join(out, f.Dir, v.File))
		b, err2 := os.Stat(src)
		if err1 != nil || err2 != nil || !os.SameFile(a, b) || v.Link != LinkHard || v.Source != src {
			t.Errorf("%s: not a hard link to %s (%v %v, link %q, source %s)", v.File, src, err1, err2, v.Link, v.Source)
		}
		if v.Policy != "densitykv" || v.Backbone != "longlive" || v.Seed != 0 || v.Horizon != 60 || v.RunDir != runfolder.BatchDir(dkv, v.Index) || m.Runs[v.Run].Dirs[0] != dkv {
			t.Errorf("%s: manifest record %+v", v.File, v)
		}
	}
	if want := []string{"A cat on a mat.-0.mp4", "A dog runs.-0.mp4", "A cat on a mat.-1.mp4"}; !slices.Equal(files, want) {
		t.Errorf("files %q, want %q (blank line 1 has no video)", files, want)
	}
	var pm map[string]string
	b, err := os.ReadFile(filepath.Join(out, f.Dir, FilePrompts))
	if err != nil || json.Unmarshal(b, &pm) != nil || pm["A cat on a mat.-0.mp4"] != "A cat_on/a mat." || pm["A cat on a mat.-1.mp4"] != "A cat on a mat." || len(pm) != 3 {
		t.Errorf("prompt map %s (%v)", b, err)
	}
	if m.Runs[0].Blank == nil || m.Runs[0].Blank[0] != 1 {
		t.Errorf("runs %+v: blank prompt 1 not recorded", m.Runs)
	}
	sh, err := os.ReadFile(filepath.Join(out, FileCommands))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range want {
		cmd := `python vbench2_beta_long/eval_long.py --videos_path "$EXPORT/` + d + `" --dimension subject_consistency background_consistency motion_smoothness dynamic_degree aesthetic_quality imaging_quality --mode long_custom_input --dev_flag --output_path "$RESULTS/` + d + `"`
		if !strings.Contains(string(sh), cmd+"\n") {
			t.Errorf("vbench.sh lacks %s", cmd)
		}
	}
	if st, _ := os.Stat(filepath.Join(out, FileCommands)); st.Mode().Perm()&0o100 == 0 {
		t.Errorf("vbench.sh is not executable: %v", st.Mode())
	}
	if !strings.Contains(res.Example, filepath.Join(out, want[0])) {
		t.Errorf("example command %q names no exported folder", res.Example)
	}
	back, err := ReadManifest(out)
	if err != nil || !sameExport(back, m) {
		t.Fatalf("manifest read back: %v", err)
	}

	// The same export again changes nothing; another needs --force.
	again, err := Export(ExportOptions{Runs: []string{dkv, native}, Out: out})
	if err != nil || !again.UpToDate {
		t.Fatalf("same export again: %v, up to date %v", err, again != nil && again.UpToDate)
	}
	_, err = Export(ExportOptions{Runs: []string{dkv, native}, Out: out, Horizons: []float64{60}})
	if err == nil || !strings.Contains(err.Error(), "--force replaces it") {
		t.Fatalf("another export over an export: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, want[0])); err != nil {
		t.Fatalf("the refused export changed the old one: %v", err)
	}
	res, err = Export(ExportOptions{Runs: []string{dkv, native}, Out: out, Horizons: []float64{60}, Force: true})
	if err != nil || len(res.Manifest.Folders) != 2 {
		t.Fatalf("--force: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, want[0])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--force left the old export's folder %s", want[0])
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, ".export.*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary folders left: %v", leftovers)
	}
}

// TestExportHorizonsAndLength: a run without horizon videos exports its
// video.mp4 at its length; a horizon it has no video for is refused.
func TestExportHorizonsAndLength(t *testing.T) {
	root := t.TempDir()
	r := writeList(t, filepath.Join(root, "abl"), fakeList{Backbone: "self-forcing", Policy: "densitykv", Seconds: 60, Prompts: []string{"p0", "p1"}})
	res, err := Export(ExportOptions{Runs: []string{r}, Out: filepath.Join(root, "x")})
	if err != nil {
		t.Fatal(err)
	}
	f := res.Manifest.Folders[0]
	if f.Dir != "prompts-2/self-forcing/densitykv/60s" || !strings.HasSuffix(f.Videos[0].Source, "/00000/video.mp4") {
		t.Errorf("folder %s, source %s", f.Dir, f.Videos[0].Source)
	}
	_, err = Export(ExportOptions{Runs: []string{r}, Out: filepath.Join(root, "y"), Horizons: []float64{30, 45}})
	if err == nil || !strings.Contains(err.Error(), "has no 30 s video (its length is 60 s, its horizon videos: none)") {
		t.Errorf("missing horizon: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "y")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused export left %s", filepath.Join(root, "y"))
	}
	for _, hs := range [][]float64{{60, 30}, {0}, {-1}} {
		if _, err := Export(ExportOptions{Runs: []string{r}, Out: filepath.Join(root, "z"), Horizons: hs}); err == nil {
			t.Errorf("--horizons %v accepted", hs)
		}
	}
}

// TestExportRefusals: bad runs and outputs are refused with a message
// naming the problem, and nothing is written.
func TestExportRefusals(t *testing.T) {
	root := t.TempDir()
	ok := writeList(t, filepath.Join(root, "ok"), fakeList{Backbone: "longlive", Policy: "native", Seconds: 60, Prompts: []string{"a", "b", "c"}})
	stopped := writeList(t, filepath.Join(root, "stopped"), fakeList{Backbone: "longlive", Policy: "deep-forcing", Seconds: 60, Prompts: []string{"a", "b", "c"}, Incomplete: []int{0, 2}})
	seed1 := writeList(t, filepath.Join(root, "seed1"), fakeList{Backbone: "longlive", Policy: "native", Seconds: 60, Prompts: []string{"a", "b", "c"}, Seed: 1})
	notRun := filepath.Join(root, "plain")
	writeFile(t, filepath.Join(notRun, "x.txt"), "x")
	full := filepath.Join(root, "full")
	writeFile(t, filepath.Join(full, "keep.txt"), "mine")
	for _, c := range []struct {
		name string
		o    ExportOptions
		want string
	}{
		{"incomplete prompts", ExportOptions{Runs: []string{ok, stopped}, Out: filepath.Join(root, "o1")}, "2 of 3 prompts have no complete video (indices 0, 2)"},
		{"same method twice", ExportOptions{Runs: []string{ok, seed1}, Out: filepath.Join(root, "o2")}, `would both give Native on longlive at 60 s for prompt set prompts-3 (configurations differing in run.seed "0"/"1")`},
		{"not a run folder", ExportOptions{Runs: []string{notRun}, Out: filepath.Join(root, "o3")}, "is not a run folder"},
		{"missing folder", ExportOptions{Runs: []string{filepath.Join(root, "nope")}, Out: filepath.Join(root, "o4")}, "no such file or directory"},
		{"given twice", ExportOptions{Runs: []string{ok, ok + "/"}, Out: filepath.Join(root, "o5")}, "is given twice"},
		{"not empty", ExportOptions{Runs: []string{ok}, Out: full}, "is not empty and holds no export"},
		{"run inside out", ExportOptions{Runs: []string{ok}, Out: root}, "is inside --out"},
		{"out inside run", ExportOptions{Runs: []string{ok}, Out: filepath.Join(ok, "vb")}, "is inside run"},
		{"bad link", ExportOptions{Runs: []string{ok}, Out: filepath.Join(root, "o6"), Link: "soft"}, `--link "soft"`},
	} {
		_, err := Export(c.o)
		var ue *runfolder.UserError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a UserError containing %q", c.name, err, c.want)
		}
	}
	ents, _ := os.ReadDir(root)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"full", "ok", "plain", "seed1", "stopped"}; !slices.Equal(names, want) {
		t.Errorf("after the refusals %s holds %v, want %v", root, names, want)
	}
	if b, _ := os.ReadFile(filepath.Join(full, "keep.txt")); string(b) != "mine" {
		t.Errorf("the refused export changed %s", full)
	}
}

// TestExportShards: the folders of one list's shards (copied from several
// machines) are merged, each prompt from the folder that completed it.
func TestExportShards(t *testing.T) {
	root := t.TempDir()
	l := fakeList{Backbone: "causal-forcing", Policy: "longlive-rag", Seconds: 60, Prompts: []string{"a", "b", "c", "d"}}
	l.Incomplete = []int{2, 3}
	a := writeList(t, filepath.Join(root, "node0", "list"), l)
	l.Incomplete = []int{0, 1}
	b := writeList(t, filepath.Join(root, "node1", "list"), l)
	res, err := Export(ExportOptions{Runs: []string{a, b}, Out: filepath.Join(root, "x")})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	if len(m.Runs) != 1 || !slices.Equal(m.Runs[0].Dirs, []string{a, b}) || len(m.Folders) != 1 {
		t.Fatalf("runs %+v", m.Runs)
	}
	for _, v := range m.Folders[0].Videos {
		want := a
		if v.Index >= 2 {
			want = b
		}
		if v.RunDir != runfolder.BatchDir(want, v.Index) {
			t.Errorf("prompt %d from %s, want %s", v.Index, v.RunDir, want)
		}
	}
}

// TestExportLinks: a hard link refused across file systems falls back to a
// copy; symlink and copy modes.
func TestExportLinks(t *testing.T) {
	root := t.TempDir()
	r := writeList(t, filepath.Join(root, "r"), fakeList{Backbone: "longlive", Policy: "native", Seconds: 60, Prompts: []string{"a", "b"}})
	defer func(l func(string, string) error) { link = l }(link)
	link = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EXDEV} }
	res, err := Export(ExportOptions{Runs: []string{r}, Out: filepath.Join(root, "copied")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Copied != 2 {
		t.Errorf("copied %d, want 2", res.Copied)
	}
	for _, v := range res.Manifest.Folders[0].Videos {
		p := filepath.Join(root, "copied", res.Manifest.Folders[0].Dir, v.File)
		a, _ := os.ReadFile(p)
		b, _ := os.ReadFile(v.Source)
		sa, _ := os.Stat(p)
		sb, _ := os.Stat(v.Source)
		if v.Link != LinkCopy || string(a) != string(b) || os.SameFile(sa, sb) {
			t.Errorf("%s: link %s, content %q vs %q", v.File, v.Link, a, b)
		}
	}
	link = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EACCES} }
	if _, err := Export(ExportOptions{Runs: []string{r}, Out: filepath.Join(root, "denied")}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("a link error other than a file-system limit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "denied")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed export left its folder")
	}
	res, err = Export(ExportOptions{Runs: []string{r}, Out: filepath.Join(root, "sym"), Link: LinkSymlink})
	if err != nil {
		t.Fatal(err)
	}
	v := res.Manifest.Folders[0].Videos[0]
	if target, err := os.Readlink(filepath.Join(root, "sym", res.Manifest.Folders[0].Dir, v.File)); err != nil || target != v.Source || v.Link != LinkSymlink {
		t.Errorf("symlink: %q %v", target, err)
	}
}

// TestExportFaults: a write failing half-way (disk full) leaves no export
// and an earlier export unchanged.
func TestExportFaults(t *testing.T) {
	root := t.TempDir()
	r := writeList(t, filepath.Join(root, "r"), fakeList{Backbone: "longlive", Policy: "native", Horizons: []float64{30, 60, 120}, Prompts: []string{"a", "b"}})
	out := filepath.Join(root, "x")
	first, err := Export(ExportOptions{Runs: []string{r}, Out: out, Horizons: []float64{30}})
	if err != nil {
		t.Fatal(err)
	}
	before := listTree(t, out)
	for k := 1; ; k++ {
		f := &atomicfile.Faulty{FailAt: k, Err: syscall.ENOSPC, Sticky: true}
		restore := atomicfile.Use(f)
		_, err := Export(ExportOptions{Runs: []string{r}, Out: out, Force: true})
		restore()
		if err == nil {
			if k < 3 {
				t.Fatalf("only %d writes", k)
			}
			break
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write %d: %v", k, err)
		}
		if after := listTree(t, out); !slices.Equal(after, before) {
			t.Fatalf("write %d failed and the earlier export changed:\n%q\nwas\n%q", k, after, before)
		}
		if tmp, _ := filepath.Glob(filepath.Join(root, ".x.*")); len(tmp) > 0 {
			t.Fatalf("write %d failed and left %v", k, tmp)
		}
	}
	if len(first.Manifest.Folders) != 1 || len(listTree(t, out)) == len(before) {
		t.Errorf("the export after the faults did not replace the first")
	}
}

// listTree lists the files under dir with their contents.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out = append(out, p+" "+string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExportMethodsAndWarnings: variants of one policy are told apart by
// the settings that differ from the majority; runs of one prompt set and
// backbone that differ elsewhere are warned about, as is a method missing
// on a backbone.
func TestExportMethodsAndWarnings(t *testing.T) {
	root := t.TempDir()
	p := []string{"a", "b"}
	runs := []string{
		writeList(t, filepath.Join(root, "d"), fakeList{Backbone: "longlive", Policy: "densitykv", Seconds: 60, Prompts: p}),
		writeList(t, filepath.Join(root, "tau"), fakeList{Backbone: "longlive", Policy: "densitykv", Seconds: 60, Prompts: p, Bank: map[string]string{"tau": "1.5"}}),
		writeList(t, filepath.Join(root, "cap"), fakeList{Backbone: "longlive", Policy: "densitykv", Seconds: 60, Prompts: p, Capacity: 6240}),
		writeList(t, filepath.Join(root, "src"), fakeList{Backbone: "longlive", Policy: "densitykv", Seconds: 60, Prompts: p, Bank: map[string]string{"ordering": "source"}}),
		writeList(t, filepath.Join(root, "n"), fakeList{Backbone: "longlive", Policy: "native", Seconds: 60, Prompts: p, Precision: "bf16", Bank: map[string]string{"tau": "3"}}),
		writeList(t, filepath.Join(root, "sf"), fakeList{Backbone: "self-forcing", Policy: "native", Seconds: 60, Prompts: p}),
	}
	res, err := Export(ExportOptions{Runs: runs, Out: filepath.Join(root, "x")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range res.Manifest.Methods {
		got = append(got, x.ID+" = "+x.Label)
	}
	want := []string{"native = Native", "densitykv = DensityKV", "densitykv-capacity-6240 = DensityKV (M 6,240)",
		"densitykv-ordering-source = DensityKV (ordering source)", "densitykv-tau-1.5 = DensityKV (τ 1.5)"}
	if !slices.Equal(got, want) {
		t.Errorf("methods\n%q, want\n%q (native's bank keys are not its settings)", got, want)
	}
	if x := res.Manifest.method("densitykv"); x.Values["memory.bank.tau"] != "2" || x.Values["memory.capacity"] != "9360" || len(x.Settings) != 0 {
		t.Errorf("reference values %v, settings %v", x.Values, x.Settings)
	}
	w := strings.Join(res.Manifest.Warnings, "\n")
	for _, s := range []string{
		"self-forcing has no run of DensityKV, DensityKV (M 6,240), DensityKV (ordering source), DensityKV (τ 1.5)",
		`the runs differ in generate.precision ("bf16": Native; "fp32": DensityKV, DensityKV (τ 1.5), DensityKV (M 6,240), DensityKV (ordering source))`,
	} {
		if !strings.Contains(w, s) {
			t.Errorf("warnings\n%s\nlack %q", w, s)
		}
	}
}

// TestExportSingleRun: a generate run folder is a one-prompt run: its
// video.mp4 under its prompt's name, prompt index 0; without prompt text
// (made from --text embeddings) it is refused.
func TestExportSingleRun(t *testing.T) {
	root := t.TempDir()
	r := vbenchtest.WriteSingle(t, filepath.Join(root, "one"), "longlive", "densitykv", "A panda eats bamboo.", 30)
	res, err := Export(ExportOptions{Runs: []string{r}, Out: filepath.Join(root, "x")})
	if err != nil {
		t.Fatal(err)
	}
	f := res.Manifest.Folders[0]
	v := f.Videos[0]
	if f.Dir != "prompts-1/longlive/densitykv/30s" || v.File != "A panda eats bamboo.-0.mp4" || v.Index != 0 || v.Source != filepath.Join(r, "video.mp4") || res.Manifest.Runs[0].Kind != "generate" {
		t.Errorf("folder %s, video %+v", f.Dir, v)
	}
	e := vbenchtest.WriteSingle(t, filepath.Join(root, "emb"), "longlive", "densitykv", "", 30)
	if _, err := Export(ExportOptions{Runs: []string{e}, Out: filepath.Join(root, "y")}); err == nil || !strings.Contains(err.Error(), "has no prompt text") {
		t.Errorf("a run without prompt text: %v", err)
	}
}
