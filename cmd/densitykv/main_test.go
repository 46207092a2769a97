package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/bench"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/record"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runinput"
	"github.com/densitykv/densitykv/storage"
	"github.com/densitykv/densitykv/synth"
)

// run executes the command line in-process and returns exit code, stdout
// and stderr.
func run(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// tiny is a small simulate configuration that runs in well under a second.
func tiny(out, name string, extra ...string) []string {
	a := []string{"simulate", "--out", out, "--name", name, "--height", "4", "--width", "6", "--layers", "2",
		"--heads", "2", "--head-dim", "8", "--seconds", "9", "--policy", "densitykv,fifo,native", "--quiet", "--sigma", "2"}
	return append(a, extra...)
}

func TestSimulateWritesRunFolder(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := run(t, context.Background(), tiny(dir, "a")...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	rd := filepath.Join(dir, "a")
	for _, f := range []string{runfolder.FileConfig, runfolder.FileLog, runfolder.FileSummary, runfolder.FileProvenance, runfolder.FileAdmissions, runfolder.FileStorage,
		"plots/policies.png", "plots/policies.svg", "plots/admission_montage.png", "plots/admission_montage.svg",
		"plots/occupancy_admissions_densitykv.png", "plots/storage_vs_horizon.png"} {
		if st, err := os.Stat(filepath.Join(rd, f)); err != nil || st.Size() == 0 {
			t.Errorf("run folder lacks %s (%v)", f, err)
		}
	}
	// 9 s at 4 frames/s = 36 frames = 12 blocks; 3 policies × 2 layers.
	lines, err := runfolder.ReadLog(filepath.Join(rd, runfolder.FileLog))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 12*3*2 {
		t.Fatalf("memory_log has %d lines, want 12 blocks × 3 policies × 2 layers = 72", len(lines))
	}
	var sum runfolder.Summary
	if err := runfolder.ReadJSON(filepath.Join(rd, runfolder.FileSummary), &sum); err != nil {
		t.Fatal(err)
	}
	if !sum.Complete || sum.CompletedBlocks != 12 || len(sum.Policies) != 3 {
		t.Fatalf("summary: complete %v, blocks %d, %d policies", sum.Complete, sum.CompletedBlocks, len(sum.Policies))
	}
	cap := 6 * 24 // (12 − 1 − 5) frames × 24 tokens
	for _, ln := range lines {
		if ln.OccMax > cap || ln.OccMin < 0 {
			t.Fatalf("%s block %d layer %d: occupancy %v outside [0, %d]", ln.Policy, ln.Block, ln.Layer, ln.Occupancy, cap)
		}
		if len(ln.Occupancy) != 2 {
			t.Fatalf("occupancy has %d heads, want 2", len(ln.Occupancy))
		}
		if ln.Policy == "densitykv" {
			// BF16 K and V of d = 8, FP32 density and baseline, int64 + int32 provenance.
			const perState = 2*8*2 + 4 + 4 + 8 + 4
			if want := int64(ln.Occupancy[0]+ln.Occupancy[1]) * perState; ln.BankBytes != want {
				t.Fatalf("block %d layer %d: bank_bytes %d, want %d for occupancy %v", ln.Block, ln.Layer, ln.BankBytes, want, ln.Occupancy)
			}
		} else if ln.BankBytes != 0 {
			t.Fatalf("%s has bank_bytes %d", ln.Policy, ln.BankBytes)
		}
	}
	// DensityKV admitted something, and provenance lists its final banks.
	var dkv *runfolder.PolicyTotals
	for _, p := range sum.Policies {
		if p.Policy == "densitykv" {
			dkv = p
		}
	}
	if dkv == nil || dkv.Admitted == 0 {
		t.Fatalf("densitykv admitted nothing: %+v", dkv)
	}
	// The admission aggregates agree with the log.
	var adm runfolder.Admissions
	if err := runfolder.ReadJSON(filepath.Join(rd, runfolder.FileAdmissions), &adm); err != nil {
		t.Fatal(err)
	}
	var sumTok, sumLF int64
	for _, v := range adm.TokenBanks {
		sumTok += int64(v)
	}
	for _, v := range adm.LayerFrame {
		sumLF += v
	}
	if sumTok != dkv.Admitted || sumLF != dkv.Admitted || adm.InitFrames < 1 {
		t.Fatalf("admissions.json: %d token-bank and %d layer-frame admissions, init frames %d; the log says %d admitted", sumTok, sumLF, adm.InitFrames, dkv.Admitted)
	}
	updBlock := map[int]int{}
	for _, ln := range lines {
		if ln.Policy == "densitykv" && ln.Update >= 0 {
			updBlock[ln.Update] = ln.Block
		}
	}
	for u, b := range adm.UpdateBlock {
		if updBlock[u] != b {
			t.Fatalf("admissions.json maps update %d to block %d, the log to block %d", u, b, updBlock[u])
		}
	}
	prov, _ := os.ReadFile(filepath.Join(rd, runfolder.FileProvenance))
	rows := strings.Count(string(prov), "\n") - 1
	if want := 2 * 2 * dkv.OccMax; dkv.OccMin == dkv.OccMax && rows != want {
		t.Fatalf("provenance has %d rows, want layers × heads × occupancy = %d", rows, want)
	}
	// The resolved config loads back and is complete.
	c, err := loadRunConfig(rd)
	if err != nil {
		t.Fatal(err)
	}
	if c.Memory.Capacity != cap || c.Memory.Bank.Tau != 2 || c.Memory.Bank.Ordering != bank.OrderMean || c.Memory.Bank.Sigma != 2 {
		t.Fatalf("resolved config: capacity %d tau %v ordering %q sigma %v", c.Memory.Capacity, c.Memory.Bank.Tau, c.Memory.Bank.Ordering, c.Memory.Bank.Sigma)
	}
	if !strings.Contains(out, "densitykv") || !strings.Contains(out, "admitted") || !strings.Contains(out, filepath.Join(rd, "plots")) {
		t.Fatalf("stdout lacks per-update lines or plot paths:\n%s", out)
	}
	// Same folder again: refused without --force, accepted with it.
	code, _, errs = run(t, context.Background(), tiny(dir, "a")...)
	if code != exitUsage || !strings.Contains(errs, "already exists") {
		t.Fatalf("rerun: exit %d, stderr %q", code, errs)
	}
	if code, _, errs = run(t, context.Background(), tiny(dir, "a", "--force", "--plots=false")...); code != 0 {
		t.Fatalf("--force: exit %d: %s", code, errs)
	}
}

func TestSimulateJSON(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := run(t, context.Background(), tiny(dir, "j", "--json", "--plots=false")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s runfolder.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v\n%s", err, out)
	}
	if s.Blocks != 12 || len(s.Policies) != 3 || s.Policies[0].Policy != "densitykv" {
		t.Fatalf("JSON summary: %+v", s)
	}
}

// stripTimings removes wall-clock fields so that two runs compare equal.
func stripTimings(t *testing.T, path string) []runfolder.LogLine {
	t.Helper()
	ls, err := runfolder.ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ls {
		ls[i].UpdateSeconds, ls[i].AttendSeconds = 0, 0
	}
	return ls
}

func TestResumeIsIdentical(t *testing.T) {
	dir := t.TempDir()
	// Every kind of state: a bank, a bounded store, a cache and the two
	// archived policies (their frames in state/ files).
	pols := []string{"--policy", "longlive-rag,full-history"} // after tiny's densitykv,fifo,native
	if code, _, errs := run(t, context.Background(), tiny(dir, "full", append(pols, "--plots=false")...)...); code != 0 {
		t.Fatalf("full run: %s", errs)
	}
	for _, every := range []string{"0", "4"} {
		t.Run("snapshot-every="+every, func(t *testing.T) {
			name := "stopped" + every
			ctx, cancel := context.WithCancel(context.Background())
			afterBlockHook = func(b int) {
				if b == 6 {
					cancel() // Ctrl-C during block 6: stop after it
				}
			}
			code, _, errs := run(t, ctx, tiny(dir, name, append(pols, "--plots=false", "--snapshot-every", every)...)...)
			afterBlockHook = nil
			if code != exitInterrupted || !strings.Contains(errs, "--resume") {
				t.Fatalf("interrupted run: exit %d, stderr %q", code, errs)
			}
			var s runfolder.Summary
			if err := runfolder.ReadJSON(filepath.Join(dir, name, runfolder.FileSummary), &s); err != nil {
				t.Fatal(err)
			}
			if s.Complete || s.CompletedBlocks != 7 {
				t.Fatalf("interrupted summary: complete %v, %d blocks, want 7", s.Complete, s.CompletedBlocks)
			}
			// A stopped run folder renders.
			if code, _, errs := run(t, context.Background(), "trace", filepath.Join(dir, name)); code != 0 {
				t.Fatalf("trace of the stopped run: %s", errs)
			}
			cp, err := runfolder.ReadSimulateCheckpoint(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			cpPath := filepath.Join(dir, name, runfolder.DirState, runfolder.FileCheckpoint)
			if cp.NextBlock != 7 || !cp.Snapshots {
				t.Fatalf("checkpoint at block %d, snapshots %v; want 7 and policy snapshots", cp.NextBlock, cp.Snapshots)
			}
			// A checkpoint whose state no longer matches its checksum, or one
			// written by generate, is refused by --resume (and left alone).
			good, err := os.ReadFile(cpPath)
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []struct{ old, new, want string }{
				{`"next_block": 7`, `"next_block": 6`, "damaged"},
				{runfolder.SimulateCheckpoint, runfolder.GenerateCheckpoint, "not a " + runfolder.SimulateCheckpoint},
			} {
				if !bytes.Contains(good, []byte(bad.old)) {
					t.Fatalf("checkpoint has no %s: %s", bad.old, good)
				}
				if err := os.WriteFile(cpPath, bytes.Replace(good, []byte(bad.old), []byte(bad.new), 1), 0o644); err != nil {
					t.Fatal(err)
				}
				if code, _, errs := run(t, context.Background(), "simulate", "--out", dir, "--name", name, "--resume"); code == 0 || !strings.Contains(errs, bad.want) {
					t.Fatalf("resume from a checkpoint with %s: exit %d, stderr %q", bad.new, code, errs)
				}
			}
			if err := os.WriteFile(cpPath, good, 0o644); err != nil {
				t.Fatal(err)
			}
			// A crash after the checkpoint leaves lines the checkpoint does
			// not cover: resume must drop them.
			lf, err := os.OpenFile(filepath.Join(dir, name, runfolder.FileLog), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			lf.WriteString(`{"policy":"densitykv","block":7,"layer":0}` + "\n")
			lf.Close()
			snaps, _ := filepath.Glob(filepath.Join(dir, name, runfolder.DirState, "policy-*-b000007.snap"))
			if len(snaps) != 5 {
				t.Fatalf("state holds %v, want the 5 policies' snapshots at block 7", snaps)
			}
			// ... and frames its archives hold beyond the checkpoint: resume
			// must cut them back.
			for i, p := range []string{"longlive-rag", "full-history"} {
				af, err := os.OpenFile(filepath.Join(dir, name, runfolder.DirState, runfolder.ArchiveName(3+i, p)), os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatalf("archive of %s: %v", p, err)
				}
				af.Write(bytes.Repeat([]byte{0x5a}, 4096))
				af.Close()
			}
			// Flags that change the run are refused with --resume.
			code, _, errs = run(t, context.Background(), "simulate", "--out", dir, "--name", name, "--resume", "--tau", "3")
			if code != exitUsage || !strings.Contains(errs, "--tau") {
				t.Fatalf("resume with --tau: exit %d, %q", code, errs)
			}
			code, _, errs = run(t, context.Background(), "simulate", "--out", dir, "--name", name, "--resume", "--quiet", "--plots=false")
			if code != 0 {
				t.Fatalf("resume: exit %d: %s", code, errs)
			}
			a := stripTimings(t, filepath.Join(dir, "full", runfolder.FileLog))
			b := stripTimings(t, filepath.Join(dir, name, runfolder.FileLog))
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("resumed memory_log differs from the uninterrupted run (%d vs %d lines)", len(a), len(b))
			}
			for _, f := range []string{runfolder.FileProvenance, runfolder.FileAdmissions, runfolder.FileStorage} {
				x, _ := os.ReadFile(filepath.Join(dir, "full", f))
				y, _ := os.ReadFile(filepath.Join(dir, name, f))
				if !bytes.Equal(x, y) {
					t.Errorf("%s differs after resume", f)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(dir, name, runfolder.DirState, "archive-*")); len(left) > 0 {
				t.Errorf("the complete run left its archives: %v", left)
			}
		})
	}
}

func TestErrorsNameTheFault(t *testing.T) {
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badYAML, []byte("run:\n  seed: 1\n  colour: red\n"), 0o644)
	okYAML := filepath.Join(dir, "ok.yaml")
	os.WriteFile(okYAML, []byte("memory:\n  bank:\n    tau: 3\n"), 0o644)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"negative tau", tiny(dir, "x", "--tau", "-1"), exitUsage, "memory.bank.tau (--tau) is -1, want a finite number > 1"},
		{"unknown policy", tiny(dir, "x", "--policy", "lru"), exitUsage, `policies[3] (--policy) is "lru"`}, // --policy repeats append
		{"duplicate policy", tiny(dir, "x", "--policy", "fifo,fifo"), exitUsage, "each policy once"},
		{"bad ordering", tiny(dir, "x", "--ordering", "median"), exitUsage, `bank ordering "median" unknown`},
		{"zero seconds", tiny(dir, "x", "--seconds", "0"), exitUsage, "stream.seconds (--seconds) is 0"},
		{"odd head dim", tiny(dir, "x", "--head-dim", "7"), exitUsage, "head dim 7"},
		{"unknown yaml key", tiny(dir, "x", "--config", badYAML), exitUsage, "bad.yaml: yaml: unmarshal errors:\n  line 3: field colour not found"},
		{"missing yaml", tiny(dir, "x", "--config", filepath.Join(dir, "nope.yaml")), exitUsage, "nope.yaml"},
		{"bad flag value", tiny(dir, "x", "--layers", "two"), exitUsage, `invalid argument "two" for "--layers"`},
		{"unknown flag", []string{"simulate", "--colour", "red"}, exitUsage, "unknown flag: --colour"},
		{"unknown command", []string{"simulat"}, exitUsage, `unknown command "simulat"`},
		{"resume nothing", []string{"simulate", "--out", dir, "--name", "never", "--resume"}, exitUsage, "never"},
		{"bad updates", tiny(dir, "x", "--updates", "some"), exitUsage, `--updates is "some"`},
		{"trace missing", []string{"trace", filepath.Join(dir, "none")}, exitUsage, "does not exist"},
		{"trace args", []string{"trace"}, exitUsage, "accepts 1 arg"},
		{"bench heads", []string{"bench", "--heads", "0"}, exitUsage, "--heads is 0"},
		{"storage horizons", []string{"storage", "--horizons", "-5", "--no-plot"}, exitUsage, "--horizons has -5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := run(t, context.Background(), c.args...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d (want %d), stderr:\n%s\nwant it to contain %q", code, c.code, errs, c.want)
			}
			if !strings.HasPrefix(errs, "densitykv: ") {
				t.Fatalf("stderr %q does not start with densitykv:", errs)
			}
		})
	}
	// A valid YAML file is applied and flags override it.
	code, _, errs := run(t, context.Background(), tiny(dir, "y", "--config", okYAML, "--sigma", "3", "--plots=false")...)
	if code != 0 {
		t.Fatalf("ok.yaml: %s", errs)
	}
	c, err := loadRunConfig(filepath.Join(dir, "y"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Memory.Bank.Tau != 3 || c.Memory.Bank.Sigma != 3 {
		t.Fatalf("tau %v (want 3 from YAML), sigma %v (want 3 from flag)", c.Memory.Bank.Tau, c.Memory.Bank.Sigma)
	}
}

func TestHelpOnEveryCommand(t *testing.T) {
	root := newRootCmd()
	var cmds [][]string
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		cmds = append(cmds, []string{c.Name()})
		for _, sub := range c.Commands() {
			cmds = append(cmds, []string{c.Name(), sub.Name()})
		}
	}
	if len(cmds) < 6 {
		t.Fatalf("only %d commands registered", len(cmds))
	}
	for _, c := range cmds {
		code, out, errs := run(t, context.Background(), append(c, "--help")...)
		if code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, "densitykv "+strings.Join(c, " ")) {
			t.Errorf("%v --help: exit %d, stdout %q, stderr %q", c, code, out, errs)
		}
	}
}

func TestTraceRerendersRunFolder(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := run(t, context.Background(), tiny(dir, "r", "--plots=false")...); code != 0 {
		t.Fatal(errs)
	}
	code, out, errs := run(t, context.Background(), "trace", filepath.Join(dir, "r"), "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var res struct{ Plots []string }
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Plots) != 4 {
		t.Fatalf("trace --json: %v %q", err, out)
	}
	for _, p := range res.Plots {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
}

func TestStorageJSONMatchesPaper(t *testing.T) {
	code, out, errs := run(t, context.Background(), "storage", "--json", "--no-plot")
	if code != 0 {
		t.Fatal(errs)
	}
	var res storageJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	// The paper prints two or three significant digits.
	want := map[string]float64{"densitykv@60": 3.28, "longlive-rag@30": 32.1, "longlive-rag@120": 128.5, "deep-forcing@60": 3.76, "densitykv-bank@60": 1.67}
	tol := map[string]float64{"longlive-rag@30": 0.05, "longlive-rag@120": 0.05}
	got := map[string]float64{}
	for _, r := range res.Rows {
		got[r.Policy+"@"+strings.TrimSuffix(strings.TrimSuffix(jsonNum(r.Seconds), ".0"), ".")] = r.GiB
	}
	for k, v := range want {
		g, ok := got[k]
		d := 0.006
		if x, ok := tol[k]; ok {
			d = x
		}
		if !ok || g < v-d || g > v+d {
			t.Errorf("%s = %.3f GiB, want %.2f (paper)", k, g, v)
		}
	}
}

func jsonNum(f float64) string { b, _ := json.Marshal(f); return string(b) }

// TestStoragePlot runs the storage command with its figure (the other
// storage tests pass --no-plot) and checks that storage_vs_horizon.png
// decodes as a PNG and storage_vs_horizon.svg parses as an <svg> XML
// document, both named in the output.
func TestStoragePlot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots") // created by the command
	code, out, errs := run(t, context.Background(), "storage", "--out", dir)
	if code != 0 {
		t.Fatal(errs)
	}
	png1, svg1 := filepath.Join(dir, "storage_vs_horizon.png"), filepath.Join(dir, "storage_vs_horizon.svg")
	for _, p := range []string{png1, svg1} {
		if !strings.Contains(out, "plot: "+p+"\n") {
			t.Errorf("output does not name %s:\n%s", p, out)
		}
	}
	f, err := os.Open(png1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", png1, err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 50 {
		t.Fatalf("%s: %v image", png1, b)
	}
	sf, err := os.Open(svg1)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	dec := xml.NewDecoder(sf)
	root, depth, elems := "", 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not XML: %v", svg1, err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				if root != "" {
					t.Fatalf("%s: second root element <%s>", svg1, e.Name.Local)
				}
				root = e.Name.Local
			}
			depth++
			elems++
		case xml.EndElement:
			depth--
		}
	}
	if root != "svg" || depth != 0 || elems < 10 {
		t.Fatalf("%s: root <%s>, %d elements, depth %d at EOF", svg1, root, elems, depth)
	}
}

// TestStorageTablePrintsPaperFigures checks the printed table cell by cell
// against the strings the paper prints (GiB with one decimal from 10 GiB up,
// two below; reductions with one decimal), and that the JSON keeps full
// precision.
func TestStorageTablePrintsPaperFigures(t *testing.T) {
	code, out, errs := run(t, context.Background(), "storage", "--no-plot")
	if code != 0 {
		t.Fatal(errs)
	}
	type cell struct{ gib, red string }
	got := map[string]cell{}
	for _, ln := range strings.Split(out, "\n") {
		f := strings.Fields(ln)
		if len(f) == 5 && strings.HasSuffix(f[4], "×") {
			got[f[2]+"@"+f[0]] = cell{f[3], f[4]}
		}
	}
	if len(got) != 24 {
		t.Fatalf("%d table rows, want 24:\n%s", len(got), out)
	}
	want := map[string]cell{
		"densitykv-bank-payload@30": {gib: "1.61"},
		"densitykv-bank@30":         {gib: "1.67"},
		"densitykv@30":              {"3.28", "9.8×"},
		"densitykv@60":              {"3.28", "19.6×"},
		"densitykv@120":             {"3.28", "39.2×"},
		"longlive-rag@30":           {"32.1", "1.0×"},
		"longlive-rag@60":           {"64.3", "1.0×"},
		"longlive-rag@120":          {"128.5", "1.0×"},
		"deep-forcing@120":          {gib: "3.76"},
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || g.gib != w.gib || (w.red != "" && g.red != w.red) {
			t.Errorf("%s: printed %q %q, paper prints %q %q", k, g.gib, g.red, w.gib, w.red)
		}
	}
	for _, p := range []string{"1.61", "1.67", "3.28", "32.1", "64.3", "128.5", "3.76", "9.8×", "19.6×", "39.2×"} {
		if !strings.Contains(out, p) {
			t.Errorf("table lacks the paper's %q", p)
		}
	}
	if strings.Contains(out, "32.14") {
		t.Errorf("table prints LongLive-RAG beyond the paper's precision:\n%s", out)
	}
	code, out, errs = run(t, context.Background(), "storage", "--no-plot", "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var res storageJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows {
		if r.GiB != float64(r.Bytes)/storage.GiB {
			t.Fatalf("%s@%g: JSON GiB %v is not the full-precision %v", r.Policy, r.Seconds, r.GiB, float64(r.Bytes)/storage.GiB)
		}
	}
}

func TestBenchJSON(t *testing.T) {
	code, out, errs := run(t, context.Background(), "bench", "bank", "--heads", "2", "--candidates", "64", "--capacity", "128", "--dim", "16", "--repeats", "2", "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if v, ok := m["update_seconds_median"].(float64); !ok || !(v > 0) {
		t.Fatalf("update_seconds_median = %v", m["update_seconds_median"])
	}
	if bf, _ := m["bf16"].(bool); bf != gemm.HardwareBF16() {
		t.Fatalf("bf16 = %v, gemm.HardwareBF16() = %v", m["bf16"], gemm.HardwareBF16())
	}
	if sp, _ := m["bf16_speedup"].(float64); (sp > 0) != gemm.HardwareBF16() {
		t.Fatalf("bf16_speedup = %v with gemm.HardwareBF16() = %v", m["bf16_speedup"], gemm.HardwareBF16())
	}
}

// The text report names the dot-product kernel; --float32-kernel turns the
// bfloat16 one off (and with it the float32 comparison passes).
func TestBenchKernelLine(t *testing.T) {
	args := []string{"bench", "bank", "--heads", "2", "--candidates", "64", "--capacity", "128", "--dim", "16", "--repeats", "1", "--quiet"}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{nil, map[bool]string{true: "bfloat16 dot products (AVX512_BF16, bit-identical to float32): float32 kernel", false: "float32 dot products (no AVX512_BF16 kernel"}[gemm.HardwareBF16()]},
		{[]string{"--float32-kernel"}, "float32 dot products (--float32-kernel)"},
	} {
		code, out, errs := run(t, context.Background(), append(args, c.extra...)...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Fatalf("%v: exit %d, output lacks %q:\n%s%s", c.extra, code, c.want, out, errs)
		}
	}
}

func TestBenchWanTinyJSON(t *testing.T) {
	code, out, errs := run(t, context.Background(), "bench", "wan", "--tiny", "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var rs []bench.WanResult
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 2 {
		t.Fatalf("bench wan --json: %v %q", err, out)
	}
	// The wire names, as scripts read them.
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "precision", "kernel", "flops_per_call", "gflops", "gflops_per_cpu_second", "kernel_peak_gflops_per_core", "peak_fraction",
		"cpu_peak_fraction", "call_cpu_seconds", "params", "layers", "layers_run", "tokens_per_call", "keys_per_call", "calls_per_block", "call_seconds",
		"block_seconds", "call_seconds_median", "block_seconds_median", "seconds_per_block_full_model", "extrapolated", "param_bytes", "peak_heap_bytes",
		"peak_heap_bytes_full_model", "param_bytes_per_layer", "kv_cache_bytes_per_layer", "text_kv_bytes_per_layer", "threads", "elapsed_seconds"} {
		if _, ok := raw[0][k]; !ok {
			t.Errorf("bench wan --json: no %q in %s", k, out)
		}
	}
	for i, p := range []gemm.Precision{gemm.F32, gemm.BF16} {
		if r := rs[i]; !(r.MedianCall > 0) || !(r.PerBlock > 0) || r.Params != 161536 || r.Extrapolated || r.Precision != p ||
			r.Kernel != gemm.KernelName(p) || !(r.GFLOPS > 0) || !(r.PeakGFLOPS > 0) || !(r.PeakFraction > 0) {
			t.Fatalf("tiny bench at %v: %+v", p, r)
		}
	}
	// --precision picks one; --kernel forces a kernel and is restored.
	before := gemm.KernelName(gemm.BF16)
	code, out, errs = run(t, context.Background(), "bench", "wan", "--tiny", "--json", "--precision", "bf16", "--kernel", "bf16:go")
	if code != 0 {
		t.Fatal(errs)
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 1 || rs[0].Precision != gemm.BF16 || rs[0].Kernel != "go" {
		t.Fatalf("bench wan --precision bf16 --kernel bf16:go: %v %q", err, out)
	}
	if gemm.KernelName(gemm.BF16) != before {
		t.Fatalf("--kernel not restored: %s, was %s", gemm.KernelName(gemm.BF16), before)
	}
	for _, c := range []struct{ args, want []string }{
		{[]string{"bench", "wan", "--tiny", "--kernel", "nope"}, []string{"--kernel", `"nope"`, "fp32: ", "bf16: ", "go"}},
		{[]string{"bench", "bank", "--kernel", "f32:go"}, []string{"--kernel", "fp32 or bf16"}},
		{[]string{"bench", "wan", "--tiny", "--precision", "half"}, []string{"--precision", `"half"`, "fp32, bf16 or bf16-fast"}},
	} {
		code, _, errs := run(t, context.Background(), c.args...)
		for _, w := range c.want {
			if code != exitUsage || !strings.Contains(errs, w) {
				t.Errorf("%v: exit %d, stderr %q lacks %q", c.args, code, errs, w)
			}
		}
	}
	// The text reports name the kernels.
	code, out, _ = run(t, context.Background(), "bench", "wan", "--tiny", "--quiet", "--precision", "fp32")
	if code != 0 || !strings.Contains(out, "kernel fp32: "+gemm.KernelName(gemm.F32)) || !strings.Contains(out, "kernel bf16: ") || !strings.Contains(out, "% of its peak") {
		t.Fatalf("bench wan text: exit %d:\n%s", code, out)
	}
}

func TestConfigRoundTrip(t *testing.T) {
	for _, base := range []config.Config{config.DefaultConfig(), config.DemoConfig()} {
		c, err := base.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		y, err := config.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back config.Config
		if err := yaml.Unmarshal(y, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c, back) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, back)
		}
		r2, err := back.Resolve()
		if err != nil || !reflect.DeepEqual(r2, c) {
			t.Fatalf("resolving a resolved config changed it (%v)", err)
		}
	}
	// The paper defaults.
	c, _ := config.DefaultConfig().Resolve()
	if c.Memory.Capacity != 9360 || c.Blocks() != 80 || c.Memory.Bank.Sigma != 8 || c.Memory.Bank.Delta != 1e-6 {
		t.Fatalf("paper defaults: capacity %d blocks %d sigma %v delta %v", c.Memory.Capacity, c.Blocks(), c.Memory.Bank.Sigma, c.Memory.Bank.Delta)
	}
}

func TestGenerateTinyGolden(t *testing.T) {
	g := golden.Wan(t)
	dir := t.TempDir()
	args := []string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"),
		"--text", filepath.Join(g, "rollout_native.safetensors"), "--text-tensor", "context",
		"--latent-height", "6", "--latent-width", "8", "--blocks", "6", "--policy", "densitykv",
		"--capacity", "24", "--sigma", "4", "--ordering", "max", "--out", dir, "--quiet"}
	code, out, errs := run(t, context.Background(), append(args, "--name", "full")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	rd := filepath.Join(dir, "full")
	for _, f := range []string{runfolder.FileConfig, runfolder.FileLog, runfolder.FileSummary, "manifest.json", "latents/block_00005.safetensors",
		"attention_trace.json", "plots/attention_trace.png", "latent_preview/frame_00017.png", runfolder.FileProvenance} {
		if _, err := os.Stat(filepath.Join(rd, f)); err != nil {
			t.Errorf("generate run folder lacks %s", f)
		}
	}
	var tr record.TraceFile
	if err := runfolder.ReadJSON(filepath.Join(rd, "attention_trace.json"), &tr); err != nil {
		t.Fatal(err)
	}
	for q, row := range tr.Mass {
		s := 0.0
		for sf, v := range row {
			s += v
			if sf < len(row)-1 && sf > q+2 && v != 0 {
				t.Fatalf("query frame %d attends future frame %d", q, sf)
			}
		}
		if math.Abs(s-1) > 1e-9 {
			t.Fatalf("attention of query frame %d sums to %v, want 1", q, s)
		}
	}
	// Interrupt after block 2, resume: latents and log identical.
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	stopArgs := append(append([]string(nil), args...), "--name", "stop")
	genHook = func() {
		n++
		if n == 3 {
			cancel()
		}
	}
	code, _, errs = run(t, ctx, stopArgs...)
	genHook = nil
	if code != exitInterrupted {
		t.Fatalf("interrupted generate: exit %d: %s", code, errs)
	}
	code, _, errs = run(t, context.Background(), "generate", "--out", dir, "--name", "stop", "--resume", "--quiet")
	if code != 0 {
		t.Fatalf("resume: %s", errs)
	}
	a := stripTimings(t, filepath.Join(rd, runfolder.FileLog))
	b := stripTimings(t, filepath.Join(dir, "stop", runfolder.FileLog))
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("resumed generate log differs (%d vs %d lines)", len(a), len(b))
	}
	for i := 0; i < 6; i++ {
		f := fmt.Sprintf("latents/block_%05d.safetensors", i)
		x, _ := os.ReadFile(filepath.Join(rd, f))
		y, _ := os.ReadFile(filepath.Join(dir, "stop", f))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Fatalf("%s differs after resume", f)
		}
	}
	// Errors name the flag.
	code, _, errs = run(t, context.Background(), "generate", "--arch", "tiny", "--checkpoint", filepath.Join(dir, "none.pt"), "--text", "x")
	if code != exitUsage || !strings.Contains(errs, "--checkpoint") {
		t.Fatalf("missing checkpoint: exit %d %q", code, errs)
	}
}

func TestStreamFileReplaysSynthetic(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := run(t, context.Background(), tiny(dir, "synthetic", "--plots=false")...); code != 0 {
		t.Fatal(errs)
	}
	c, err := loadRunConfig(filepath.Join(dir, "synthetic"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := synth.NewGenerator(runinput.SynthConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "stream.dkvs")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := record.NewWriter(f, record.Header{Layout: c.Memory.Layout, DType: record.Float32, Blocks: c.Blocks()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.Copy(w, g); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// The layout comes from the file; --height etc. are overridden by it.
	code, _, errs := run(t, context.Background(), "simulate", "--out", dir, "--name", "file", "--stream", "file", "--stream-file", path,
		"--seconds", "9", "--policy", "densitykv,fifo,native", "--quiet", "--sigma", "2", "--plots=false")
	if code != 0 {
		t.Fatal(errs)
	}
	a := stripTimings(t, filepath.Join(dir, "synthetic", runfolder.FileLog))
	b := stripTimings(t, filepath.Join(dir, "file", runfolder.FileLog))
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("replaying the recorded stream gave a different log (%d vs %d lines)", len(a), len(b))
	}
	code, _, errs = run(t, context.Background(), "simulate", "--stream", "file", "--stream-file", filepath.Join(dir, "missing.dkvs"))
	if code != exitUsage || !strings.Contains(errs, "stream.path (--stream-file)") {
		t.Fatalf("missing stream file: exit %d %q", code, errs)
	}
}

func TestNoArgumentsRunsDemo(t *testing.T) {
	// Only the dispatch is checked here (the demo itself is exercised by
	// simulate's tests): "densitykv --help" lists demo, and no arguments
	// announce the demo before running it.
	dir := t.TempDir()
	t.Chdir(dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stop before the first block
	code, _, errs := run(t, ctx)
	if !strings.Contains(errs, "running the demo") || code != exitInterrupted {
		t.Fatalf("no arguments: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs", "demo", runfolder.FileConfig)); err != nil {
		t.Fatalf("the demo did not start in runs/demo: %v", err)
	}
}

func TestGeneratePreviewVideoWithFFmpeg(t *testing.T) {
	g := golden.Wan(t)
	dir := t.TempDir()
	// A stand-in ffmpeg that records its arguments and writes the output.
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	script := "#!/bin/sh\necho \"$@\" > \"" + filepath.Join(dir, "ffmpeg.args") + "\"\nfor a; do last=$a; done\necho fake > \"$last\"\n"
	if err := os.WriteFile(filepath.Join(bin, "ffmpeg"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	code, out, errs := run(t, context.Background(), "generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"),
		"--text", filepath.Join(g, "rollout_native.safetensors"), "--latent-height", "6", "--latent-width", "8", "--blocks", "2",
		"--policy", "native", "--out", dir, "--name", "v", "--quiet", "--trace-step", "-1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "v", "latent_preview.mp4")); err != nil {
		t.Fatal("no latent_preview.mp4 with ffmpeg on PATH")
	}
	args, _ := os.ReadFile(filepath.Join(dir, "ffmpeg.args"))
	if !strings.Contains(string(args), "frame_%05d.png") || !strings.Contains(out, "latent preview video") || !strings.Contains(out, "not decoded video") {
		t.Fatalf("ffmpeg args %q; stdout:\n%s", args, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "v", "attention_trace.json")); err == nil {
		t.Fatal("--trace-step -1 still wrote an attention trace")
	}
}

// A rollout recorded by generate replays through simulate with the same
// DensityKV decisions, occupancy, attention parts and bytes, at the
// recorded run's attention budget (--capacity 24, not given again), and
// eval of the stream starts from that budget too unless told otherwise.
func TestGenerateRecordReplaysInSimulate(t *testing.T) {
	g := golden.Wan(t)
	dir := t.TempDir()
	stream := filepath.Join(dir, "rollout.dkvs")
	mem := []string{"--policy", "densitykv", "--capacity", "24", "--sigma", "4", "--ordering", "max"}
	args := append([]string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"),
		"--text", filepath.Join(g, "rollout_native.safetensors"), "--latent-height", "6", "--latent-width", "8", "--blocks", "6",
		"--out", dir, "--name", "gen", "--quiet", "--record-stream", stream, "--preview=false"}, mem...)
	if code, _, errs := run(t, context.Background(), args...); code != 0 {
		t.Fatal(errs)
	}
	sim := append([]string{"simulate", "--stream", "file", "--stream-file", stream, "--seconds", "4.5", "--out", dir, "--name", "sim",
		"--quiet", "--plots=false"}, slices.DeleteFunc(slices.Clone(mem), func(a string) bool { return a == "--capacity" || a == "24" })...)
	if code, _, errs := run(t, context.Background(), sim...); code != 0 {
		t.Fatal(errs)
	}
	a := stripTimings(t, filepath.Join(dir, "gen", runfolder.FileLog))
	b := stripTimings(t, filepath.Join(dir, "sim", runfolder.FileLog))
	if len(a) != len(b) || len(a) != 6*2 {
		t.Fatalf("%d generate lines, %d simulate lines, want 12 each", len(a), len(b))
	}
	admitted := 0
	for i := range a {
		x, y := a[i], b[i]
		if x.Block != y.Block || x.Layer != y.Layer || x.AdmittedTotal != y.AdmittedTotal || x.EvictedMandatory != y.EvictedMandatory ||
			x.EvictedCapacity != y.EvictedCapacity || !reflect.DeepEqual(x.Occupancy, y.Occupancy) || x.Tokens != y.Tokens ||
			x.Bytes != y.Bytes || x.BankBytes != y.BankBytes || x.Update != y.Update {
			t.Fatalf("line %d differs:\ngenerate %+v\nsimulate %+v", i, x, y)
		}
		admitted += x.AdmittedTotal
	}
	if admitted == 0 {
		t.Fatal("the bank admitted nothing")
	}
	p1, _ := os.ReadFile(filepath.Join(dir, "gen", runfolder.FileProvenance))
	p2, _ := os.ReadFile(filepath.Join(dir, "sim", runfolder.FileProvenance))
	if !bytes.Equal(p1, p2) {
		t.Fatal("final banks differ between the rollout and its replay")
	}
	for _, c := range []struct {
		extra []string
		want  int
	}{{nil, 24}, {[]string{"--capacity", "36"}, 36}} {
		name := fmt.Sprintf("eval%d", c.want)
		ev := append([]string{"eval", "--stream", "file", "--stream-file", stream, "--out", dir, "--name", name, "--groups", "baselines",
			"--queries", "4", "--coverage-sample", "8", "--rag-descriptor", "key-mean", "--quiet", "--plots=false"}, c.extra...)
		if code, _, errs := run(t, context.Background(), ev...); code != 0 {
			t.Fatalf("eval %v: exit %d: %s", c.extra, code, errs)
		}
		var ec config.Config
		if err := runfolder.LoadConfig(filepath.Join(dir, name), &ec); err != nil {
			t.Fatal(err)
		}
		if m := ec.Memory; m.Capacity != c.want || m.SinkFrames != 1 || m.WindowFrames != 5 || m.CacheFrames != 12 {
			t.Errorf("eval %v of a stream recorded at --capacity 24: memory budget sink %d cache %d window %d capacity %d, want capacity %d",
				c.extra, m.SinkFrames, m.CacheFrames, m.WindowFrames, m.Capacity, c.want)
		}
	}
}

// Layers are independent: simulating only layer 1 of the stream gives the
// same lines as layer 1 of a two-layer run.
func TestFirstLayerMatchesFullRun(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := run(t, context.Background(), tiny(dir, "both", "--plots=false")...); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := run(t, context.Background(), tiny(dir, "one", "--layers", "1", "--first-layer", "1")...); code != 0 {
		t.Fatal(errs)
	}
	full := stripTimings(t, filepath.Join(dir, "both", runfolder.FileLog))
	one := stripTimings(t, filepath.Join(dir, "one", runfolder.FileLog))
	var want []runfolder.LogLine
	for _, ln := range full {
		if ln.Layer == 1 {
			ln.Bytes = 0
			want = append(want, ln)
		}
	}
	for i := range one {
		one[i].Bytes = 0 // whole-policy bytes differ: one layer instead of two
	}
	if !reflect.DeepEqual(want, one) {
		t.Fatalf("layer 1 alone differs from layer 1 of the full run (%d vs %d lines)", len(one), len(want))
	}
	p, _ := os.ReadFile(filepath.Join(dir, "one", runfolder.FileProvenance))
	if !strings.Contains(string(p), "\ndensitykv,1,") || strings.Contains(string(p), "\ndensitykv,0,") {
		t.Fatal("provenance of the layer-1 run does not name layer 1")
	}
	code, _, errs := run(t, context.Background(), tiny(dir, "bad", "--first-layer", "-1")...)
	if code != exitUsage || !strings.Contains(errs, "stream.first_layer (--first-layer) is -1") {
		t.Fatalf("--first-layer -1: exit %d %q", code, errs)
	}
}

// The storage figure's legends sit right of the axes on both panels, where
// they hide no curve (the LongLive-RAG line crossed the old inside legend),
// and every policy of the table has its line.
func TestStorageFigureLegends(t *testing.T) {
	title, panels := storagePanels(storage.Paper(), []float64{30, 60, 120})
	if !strings.Contains(title, "M = 9360") || len(panels) != 2 {
		t.Fatalf("title %q, %d panels", title, len(panels))
	}
	for _, p := range panels {
		if p.Legend != "right" || len(p.Series) != 7 {
			t.Fatalf("panel %q: legend %q, %d series", p.Title, p.Legend, len(p.Series))
		}
		for _, s := range p.Series {
			if s.Name == "" {
				t.Fatalf("panel %q has an unnamed series", p.Title)
			}
		}
	}
}
