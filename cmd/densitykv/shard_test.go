//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/densitykv/densitykv/generate"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runfolder/runfoldertest"
	"github.com/densitykv/densitykv/video"
)

// shardPrompts is the prompt list of the sharding tests: 4 lines, one
// blank (index 1 keeps its place and makes no video).
const shardPrompts = "a heron lands on a lake\n\n  a red panda walks through snow  \na kangaroo in the desert\n"

// listArgs is generate over a prompt list on the tiny golden models.
func listArgs(t *testing.T, out, name, prompts string, extra ...string) []string {
	args := pipelineArgs(t, out, name, append([]string{"--blocks", "2", "--quiet", "--snapshot-every", "1", "--horizons", "0.75,1.5"}, extra...)...)
	for i := range args {
		if args[i] == "--prompt" {
			args[i], args[i+1] = "--prompts", prompts
		}
	}
	return args
}

// promptFiles reads every file of a list's prompt folder (but state/) with
// wall-clock fields blanked and the list folder's path replaced by LIST.
func promptFiles(t *testing.T, list string, i int) map[string][]byte {
	t.Helper()
	return runfoldertest.Files(t, runfolder.BatchDir(list, i), func(_ string, b []byte) ([]byte, error) {
		b = timingLog.ReplaceAll(b, []byte(`"$1":0`))
		b = timingManifest.ReplaceAll(b, []byte(`"$1": 0`))
		b = timingSummary.ReplaceAll(b, []byte(`"$1": 0`))
		return bytes.ReplaceAll(b, []byte(list), []byte("LIST")), nil
	})
}

// sameRun fails unless prompt i of two lists holds the same files, bytes
// and decoded video frames (the full video and its horizons).
func sameRun(t *testing.T, ff, a, b string, i int) {
	t.Helper()
	fa, fb := promptFiles(t, a, i), promptFiles(t, b, i)
	var names []string
	for k := range fa {
		names = append(names, k)
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			t.Errorf("prompt %d: %s only in %s", i, k, b)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		if !bytes.Equal(fa[k], fb[k]) {
			t.Errorf("prompt %d: %s differs between %s and %s", i, k, a, b)
		}
	}
	for _, v := range []string{video.FileVideo, "video_0.75s.mp4", "video_1.5s.mp4"} {
		x, nx, err := video.ReadFrames(ff, filepath.Join(runfolder.BatchDir(a, i), v), 64, 48)
		if err != nil {
			t.Fatal(err)
		}
		y, ny, err := video.ReadFrames(ff, filepath.Join(runfolder.BatchDir(b, i), v), 64, 48)
		if err != nil || nx != ny || !bytes.Equal(x, y) {
			t.Fatalf("prompt %d %s: %d and %d frames, equal %v (%v)", i, v, nx, ny, bytes.Equal(x, y), err)
		}
	}
}

// childGenerate starts the densitykv main in a child process.
func childGenerate(t *testing.T, env []string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	c := exec.Command(os.Args[0], args...)
	c.Env = append(append(os.Environ(), envTestMain+"=1"), env...)
	var out syncBuffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c, &out
}

// TestShardContract: two shard processes running at once over one prompt
// list in one folder (indices from JOB_COMPLETION_INDEX and a Slurm
// array's SLURM_ARRAY_TASK_ID) make exactly the files, logs and decoded
// frames (video.mp4 and the horizons' prefixes) of one unsharded run; the
// shards' status files together list every prompt once; collect reports
// the same of the shared folder, of per-shard folders and of the
// unsharded list. Then shardsDisjointKilled: shards write disjoint files,
// a killed shard resumes, other lists are refused.
func TestShardContract(t *testing.T) {
	ff, _ := ffTools(t)
	dir := t.TempDir()
	pf := filepath.Join(dir, "prompts.txt")
	os.WriteFile(pf, []byte(shardPrompts), 0o644)
	if code, out, errs := run(t, context.Background(), listArgs(t, dir, "whole", pf, "--text-cache", filepath.Join(dir, "cache-whole"))...); code != 0 {
		t.Fatalf("unsharded: exit %d\n%s\n%s", code, out, errs)
	}
	shard := listArgs(t, dir, "sharded", pf, "--text-cache", filepath.Join(dir, "cache-shards"), "--shard", "env/2")
	c0, o0 := childGenerate(t, []string{"JOB_COMPLETION_INDEX=0"}, shard...)
	c1, o1 := childGenerate(t, []string{"SLURM_ARRAY_TASK_ID=1"}, shard...)
	for k, c := range []*exec.Cmd{c0, c1} {
		if ws := waitExitWithin(t, c, 60*time.Second); ws.ExitStatus() != 0 {
			t.Fatalf("shard %d: exit %d\n%s", k, ws.ExitStatus(), []*syncBuffer{o0, o1}[k].String())
		}
	}
	whole, sharded := filepath.Join(dir, "whole"), filepath.Join(dir, "sharded")
	for _, i := range []int{0, 2, 3} {
		sameRun(t, ff, whole, sharded, i)
	}
	seen := map[int]string{}
	for _, s := range []string{"shard-0-of-2", "shard-1-of-2"} {
		var st runfolder.ShardStatus
		if err := runfolder.ReadJSON(filepath.Join(sharded, runfolder.DirShards, s+".json"), &st); err != nil || !st.Complete {
			t.Fatalf("%s: %+v %v", s, st, err)
		}
		for _, e := range st.Entries {
			if prev, ok := seen[e.Index]; ok {
				t.Fatalf("prompt %d in %s and %s", e.Index, prev, s)
			}
			seen[e.Index] = s
		}
	}
	if len(seen) != 4 || seen[1] != "shard-1-of-2" || seen[2] != "shard-0-of-2" {
		t.Fatalf("shards took %v", seen)
	}
	for _, f := range []string{runfolder.FileBatch, runfolder.FileList, runfolder.FileBatchPrompts} {
		a, _ := os.ReadFile(filepath.Join(whole, f))
		b, _ := os.ReadFile(filepath.Join(sharded, f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between the unsharded and the sharded list", f)
		}
	}
	// collect: the shared folder, and the shards' folders as if copied from
	// two machines (each with its own prompts and status), report what the
	// unsharded list reports.
	split := []string{filepath.Join(dir, "node0"), filepath.Join(dir, "node1")}
	for k, d := range split {
		if err := os.CopyFS(d, os.DirFS(sharded)); err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 2, 3} {
			if (i == 3) != (k == 1) {
				os.RemoveAll(runfolder.BatchDir(d, i))
			}
		}
		os.Remove(filepath.Join(d, runfolder.DirShards, fmt.Sprintf("shard-%d-of-2.json", 1-k)))
	}
	reports := map[string]*generate.Report{}
	for name, dirs := range map[string][]string{"whole": {whole}, "shared": {sharded}, "split": split} {
		code, out, errs := run(t, context.Background(), append([]string{"collect", "--json", "--out", filepath.Join(dir, "report-"+name)}, dirs...)...)
		var r generate.Report
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("collect %s: exit %d\n%s\n%s", name, code, out, errs)
		}
		if r.Complete != 3 || r.Blank != 1 || len(r.Missing) != 0 || len(r.Duplicates) != 0 || len(r.MemoryLog) != 1 || len(r.Storage) != 2 {
			t.Fatalf("collect %s: %+v", name, r)
		}
		r.MemoryLog[0].UpdateSeconds = 0
		r.Folders, r.Shards = nil, nil
		for k := range r.Prompts {
			r.Prompts[k].Dir, r.Prompts[k].Video = "", ""
			if p := r.Prompts[k].Policy; p != nil {
				p.UpdateSeconds, p.AttendSeconds = 0, 0
			}
		}
		reports[name] = &r
		if _, err := os.Stat(filepath.Join(dir, "report-"+name, generate.FileReportMD)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"shared", "split"} {
		a, _ := json.Marshal(reports["whole"])
		b, _ := json.Marshal(reports[name])
		if !bytes.Equal(a, b) {
			t.Errorf("collect %s differs from the unsharded list's:\n%s\n%s", name, a, b)
		}
	}
	st := reports["whole"].Storage
	if st[1].Seconds != 1.5 || st[0].Seconds != 0.75 || st[1].Formula < st[1].Max || st[0].Max >= st[1].Max {
		t.Errorf("storage table %+v", st)
	}
	// Half a list is reported with its missing prompts; another list refused.
	code, out, _ := run(t, context.Background(), "collect", "--json", "--out", filepath.Join(dir, "r0"), split[0])
	var half generate.Report
	if code != 0 || json.Unmarshal([]byte(out), &half) != nil || !slices.Equal(half.Missing, []int{3}) || half.Complete != 2 {
		t.Fatalf("collect of shard 0's folder: exit %d %+v", code, half)
	}
	os.WriteFile(filepath.Join(split[1], runfolder.FileList), []byte(`{"version":1,"prompts_sha256":"x","prompts":4,"selected":[0,1,2,3],"config_sha256":"y"}`), 0o644)
	if code, _, errs := run(t, context.Background(), "collect", split[0], split[1]); code != 2 || !strings.Contains(errs, "holds another list") {
		t.Fatalf("collect of two lists: exit %d: %s", code, errs)
	}
	shardsDisjointKilled(t, ff, dir, pf, whole)
}

// fileState identifies a file's content and inode (a rewrite, atomic or
// not, changes one of them).
type fileState struct {
	ino   uint64
	size  int64
	mtime time.Time
}

func snapshotFiles(t *testing.T, roots ...string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	for _, r := range roots {
		filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			st, err := os.Stat(p)
			if err != nil {
				return nil
			}
			out[p] = fileState{st.Sys().(*syscall.Stat_t).Ino, st.Size(), st.ModTime()}
			return nil
		})
	}
	return out
}

// shardsDisjointKilled: in the list folder seq, shard 1 of 2 runs first;
// then shard 0 runs as a process that is killed (SIGKILL) during its first
// video and is run again with the same command: the stopped video resumes
// from its checkpoint, the others are made, and the videos and logs equal
// the unsharded list's (whole). Shard 0 creates, rewrites or removes none of
// the files shard 1 wrote (the list's shared files included) and writes
// only its prompts' folders, locks, status and text-cache entries. A
// shard of another list, of another configuration, or with --force is
// refused before it writes anything; run again, a shard skips its finished
// prompts, and with --skip-existing=false makes them again.
func shardsDisjointKilled(t *testing.T, ff, dir, pf, whole string) {
	list, cache := filepath.Join(dir, "seq"), filepath.Join(dir, "cache-seq")
	args := func(shard string, extra ...string) []string {
		return listArgs(t, dir, "seq", pf, append([]string{"--text-cache", cache, "--shard", shard}, extra...)...)
	}
	if code, _, errs := run(t, context.Background(), args("1/2")...); code != 0 {
		t.Fatalf("shard 1: exit %d: %s", code, errs)
	}
	time.Sleep(20 * time.Millisecond) // later writes get later mtimes
	before := snapshotFiles(t, list, cache)
	c, out := childGenerate(t, nil, args("0/2")...)
	cp := filepath.Join(runfolder.BatchDir(list, 0), runfolder.DirState, runfolder.FileCheckpoint)
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(cp); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of prompt 0: %s", out.String())
		}
	}
	c.Process.Signal(syscall.SIGKILL)
	if ws := waitExitWithin(t, c, 30*time.Second); !ws.Signaled() {
		t.Fatalf("shard 0 ended before it was killed (%v): make its videos longer", c.ProcessState)
	}
	code, o, errs := run(t, context.Background(), args("0/2")...)
	if code != 0 || !strings.Contains(o, "    0  resumed") || !strings.Contains(o, "    2  generated") {
		t.Fatalf("shard 0 again: exit %d\n%s\n%s", code, o, errs)
	}
	for _, i := range []int{0, 2, 3} {
		sameRun(t, ff, whole, list, i)
	}
	after := snapshotFiles(t, list, cache)
	for p, s := range before {
		if a, ok := after[p]; !ok || a != s {
			t.Errorf("shard 0 changed %s, written by shard 1", p)
		}
	}
	var mine []string
	for p := range after {
		if _, ok := before[p]; !ok {
			rel, _ := filepath.Rel(list, p)
			mine = append(mine, rel)
		}
	}
	for _, rel := range mine {
		ok := strings.HasPrefix(rel, "00000/") || strings.HasPrefix(rel, "00002/") || rel == "locks/00000.lock" || rel == "locks/00002.lock" ||
			rel == "shards/shard-0-of-2.json" || strings.HasPrefix(rel, "../cache-seq/")
		if !ok {
			t.Errorf("shard 0 wrote %s, outside its prompts (0 and 2)", rel)
		}
	}
	if len(mine) < 20 {
		t.Fatalf("shard 0 wrote only %v", mine)
	}
	var st runfolder.ShardStatus
	if err := runfolder.ReadJSON(filepath.Join(list, runfolder.DirShards, "shard-0-of-2.json"), &st); err != nil || !st.Complete || len(st.Entries) != 2 {
		t.Fatalf("status: %+v %v", st, err)
	}
	// Another prompts file, another configuration, --force: refused,
	// nothing written.
	other := filepath.Join(dir, "other.txt")
	os.WriteFile(other, []byte("something else\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{listArgs(t, dir, "seq", other, "--text-cache", cache, "--shard", "1/2"), "another prompts file"},
		{args("1/2", "--tau", "3"), "another configuration (batch.yaml, line"},
		{args("1/2", "--prompt-indices", "0,1"), "another configuration"},
		{args("1/2", "--force"), "--force starts the whole list"},
	} {
		code, _, errs := run(t, context.Background(), c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d: %s, want %q", c.args[len(c.args)-4:], code, errs, c.want)
		}
	}
	if now := snapshotFiles(t, list, cache); len(now) != len(after) {
		t.Errorf("a refused shard wrote files: %d, was %d", len(now), len(after))
	}
	// Run again: the finished prompts are skipped; with
	// --skip-existing=false they are made again.
	code, o, errs = run(t, context.Background(), args("0/2")...)
	if code != 0 || strings.Count(o, " done ") != 2 || !strings.Contains(o, "    2  done") {
		t.Fatalf("again: exit %d\n%s\n%s", code, o, errs)
	}
	code, o, errs = run(t, context.Background(), args("1/2", "--skip-existing=false")...)
	if code != 0 || !strings.Contains(o, "    3  generated") || !strings.Contains(o, "    1  blank") {
		t.Fatalf("--skip-existing=false: exit %d\n%s\n%s", code, o, errs)
	}
	sameRun(t, ff, whole, list, 3)
}

// waitExitWithin waits for c to end (failing after d).
func waitExitWithin(t *testing.T, c *exec.Cmd, d time.Duration) syscall.WaitStatus {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
		return c.ProcessState.Sys().(syscall.WaitStatus)
	case <-time.After(d):
		t.Fatalf("the process did not end within %v", d)
	}
	return 0
}
