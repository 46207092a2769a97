package generate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runinput"
)

// listConfig is a one-block prompt list of the prompts file pf on the
// tiny models, in <out>/<name>.
func listConfig(t *testing.T, out, name, pf string) config.GenerateConfig {
	t.Helper()
	gc := tinyPipeline(t, out, name, config.PromptSpec{Text: "x"})
	gc.Generate.Prompts, gc.Generate.PromptsFile, gc.Generate.Blocks = nil, pf, 1
	if err := runinput.ResolveGenerate(&gc, config.NewKeys(), "test"); err != nil {
		t.Fatal(err)
	}
	return gc
}

// tree lists the files under dir with their contents.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		}
		return nil
	})
	return out
}

// TestListOwnership: a list folder follows the run-folder ownership rules.
// A folder of another command or a folder that is no run folder is
// refused without writing (and taken with --force, which keeps a user's
// files); a list folder is marked as the list's, its prompt folders as
// generate runs; a single run is refused in a list folder; a shard that
// finds the marker before the list's files passes; a prompt folder of
// another command is refused; a prompt whose final checkpoint is missing
// is not taken as done.
func TestListOwnership(t *testing.T) {
	mustFF(t)
	root := t.TempDir()
	pf := filepath.Join(root, "p.txt")
	os.WriteFile(pf, []byte("a cat\n"), 0o644)
	ctx := context.Background()

	sim := filepath.Join(root, "sim")
	if err := runfolder.Claim(sim, "simulate", false, false); err != nil {
		t.Fatal(err)
	}
	user := filepath.Join(root, "user")
	os.MkdirAll(user, 0o755)
	os.WriteFile(filepath.Join(user, "notes"), []byte("mine"), 0o644)
	for _, c := range []struct{ name, want string }{
		{"sim", "is the run folder of a simulate run, not a prompt list"},
		{"user", "is not a densitykv prompt list (1 entries)"},
	} {
		before := tree(t, filepath.Join(root, c.name))
		for _, dry := range []bool{true, false} {
			_, err := GenerateList(ctx, listConfig(t, root, c.name, pf), ListOptions{DryRun: dry}, runfolder.Hooks{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s (dry run %v): %v, want %q", c.name, dry, err, c.want)
			}
		}
		if after := tree(t, filepath.Join(root, c.name)); len(after) != len(before) {
			t.Fatalf("%s: a refused list wrote files: %v", c.name, after)
		}
	}
	// --force of the whole list takes the user's folder, leaving its files.
	res, err := GenerateList(ctx, listConfig(t, root, "user", pf), ListOptions{Force: true}, runfolder.Hooks{})
	if err != nil || res.Batch[0].State != "generated" {
		t.Fatalf("--force: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(user, "notes")); string(b) != "mine" {
		t.Fatalf("--force removed the user's file: %q", b)
	}
	if o, err := runfolder.ReadOwner(user); o != runfolder.ListCommand || err != nil {
		t.Fatalf("list marker %q %v", o, err)
	}
	if o, err := runfolder.ReadOwner(runfolder.BatchDir(user, 0)); o != "generate" || err != nil {
		t.Fatalf("prompt folder marker %q %v", o, err)
	}
	// A single run, or another command, in the list's folder: refused.
	if err := runfolder.Claim(user, "generate", false, false); err == nil || !strings.Contains(err.Error(), "belongs to a "+runfolder.ListCommand+" run") {
		t.Fatalf("a single run in a list folder: %v", err)
	}
	// The list joined again: done, nothing rewritten.
	before := tree(t, user)
	res, err = GenerateList(ctx, listConfig(t, root, "user", pf), ListOptions{}, runfolder.Hooks{})
	if err != nil || res.Batch[0].State != "done" {
		t.Fatalf("again: %+v %v", res, err)
	}
	for p, s := range before {
		if !strings.Contains(p, runfolder.DirShards) && tree(t, user)[p] != s {
			t.Fatalf("joining the list changed %s", p)
		}
	}
	// Without its final checkpoint (a run that died between summary.json
	// and the checkpoint) the prompt is not done.
	os.Remove(filepath.Join(runfolder.BatchDir(user, 0), runfolder.DirState, runfolder.FileCheckpoint))
	res, err = GenerateList(ctx, listConfig(t, root, "user", pf), ListOptions{DryRun: true}, runfolder.Hooks{})
	if err != nil || res.Batch[0].State != "to generate" {
		t.Fatalf("no final checkpoint: %+v %v", res, err)
	}
	if rep, err := (&CollectJob{Dirs: []string{user}}).Run(); err != nil || rep.Prompts[0].State != "stopped" || rep.Complete != 0 {
		t.Fatalf("collect without the final checkpoint: %+v %v", rep, err)
	}

	// A shard that arrives while another creates the list's files (the
	// marker and batch.yaml, no list.json yet) joins.
	racing := filepath.Join(root, "racing")
	os.MkdirAll(racing, 0o755)
	mark, _ := json.Marshal(runfolder.Owner{Format: runfolder.OwnerFormat, Command: runfolder.ListCommand})
	os.WriteFile(filepath.Join(racing, runfolder.FileOwner), mark, 0o644)
	os.WriteFile(filepath.Join(racing, runfolder.FileBatch), []byte("# half written\n"), 0o644)
	os.WriteFile(filepath.Join(racing, "."+runfolder.FileBatchPrompts+".tmp123"), nil, 0o644)
	if _, err := GenerateList(ctx, listConfig(t, root, "racing", pf), ListOptions{DryRun: true}, runfolder.Hooks{}); err != nil {
		t.Fatalf("a shard joining a list being created: %v", err)
	}
	// Only the temporary file of another shard's marker: an empty folder.
	empty := filepath.Join(root, "empty")
	os.MkdirAll(empty, 0o755)
	os.WriteFile(filepath.Join(empty, "."+runfolder.FileOwner+".tmp4"), nil, 0o644)
	if _, err := GenerateList(ctx, listConfig(t, root, "empty", pf), ListOptions{DryRun: true}, runfolder.Hooks{}); err != nil {
		t.Fatalf("a folder with another shard's temporary marker: %v", err)
	}

	// A prompt folder of another command is refused, and left as it was.
	other := filepath.Join(root, "other")
	if err := runfolder.Claim(runfolder.BatchDir(other, 0), "simulate", false, false); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(other, runfolder.FileOwner), append(mark, '\n'), 0o644)
	_, err = GenerateList(ctx, listConfig(t, root, "other", pf), ListOptions{}, runfolder.Hooks{})
	if err == nil || !strings.Contains(err.Error(), "prompt 0") || !strings.Contains(err.Error(), "belongs to a simulate run") {
		t.Fatalf("a prompt folder of simulate: %v", err)
	}
	if o, _ := runfolder.ReadOwner(runfolder.BatchDir(other, 0)); o != "simulate" {
		t.Fatalf("the simulate folder was taken: %q", o)
	}
}

// TestCheckListOutputs: a list's outputs against its inputs. An input in a
// prompt's folder (as spelled or through a link) is refused, as is the
// list's own prompts copy when --force would replace it (read without
// --force, it is not written); --record-stream is refused.
func TestCheckListOutputs(t *testing.T) {
	root := t.TempDir()
	pf := filepath.Join(root, "p.txt")
	os.WriteFile(pf, []byte("a cat\nA dog\n"), 0o644)
	gc := listConfig(t, root, "list", pf)
	list := filepath.Join(root, "list")
	cfg := filepath.Join(runfolder.BatchDir(list, 1), runfolder.FileConfig)
	os.MkdirAll(filepath.Dir(cfg), 0o755)
	os.WriteFile(cfg, []byte("run: {}\n"), 0o644)
	if err := runfolder.CheckListOutputs(gc, false); err != nil {
		t.Fatal(err)
	}
	if err := runfolder.CheckListOutputs(gc, false, atomicfile.Input{Role: "--config", Path: cfg}); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("--config in a prompt folder: %v", err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(runfolder.BatchDir(list, 1), link); err != nil {
		t.Fatal(err)
	}
	if err := runfolder.CheckListOutputs(gc, false, atomicfile.Input{Role: "--config", Path: filepath.Join(link, runfolder.FileConfig)}); err == nil || !strings.Contains(err.Error(), "overwrite an input") {
		t.Fatalf("--config through a link into a prompt folder: %v", err)
	}
	// A file of a prompt folder that is not a run file is not written.
	notes := filepath.Join(runfolder.BatchDir(list, 1), "notes.yaml")
	os.WriteFile(notes, nil, 0o644)
	if err := runfolder.CheckListOutputs(gc, false, atomicfile.Input{Role: "--config", Path: notes}); err != nil {
		t.Fatalf("a user's file in a prompt folder: %v", err)
	}
	own := filepath.Join(list, runfolder.FileBatchPrompts)
	os.WriteFile(own, []byte("a cat\nA dog\n"), 0o644)
	gc.Generate.PromptsFile = own
	if err := runfolder.CheckListOutputs(gc, false); err != nil {
		t.Fatalf("the list's own prompts copy, read: %v", err)
	}
	if err := runfolder.CheckListOutputs(gc, true); err == nil || !strings.Contains(err.Error(), "--prompts") {
		t.Fatalf("the list's own prompts copy with --force: %v", err)
	}
	gc.Generate.RecordStream = filepath.Join(root, "stream.bin")
	if err := runfolder.CheckListOutputs(gc, false); err == nil || !strings.Contains(err.Error(), "--record-stream") {
		t.Fatalf("--record-stream: %v", err)
	}
}

// TestCheckListFolderMarkerRace: a shard that reads no marker and then
// finds the folder holding one (another shard marked it in between, as in
// a sharded start on two machines) joins the list instead of refusing the
// folder as foreign; a folder that stays foreign is still refused.
func TestCheckListFolderMarkerRace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "list")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l := &runfolder.PromptList{Path: "p.txt"}
	var man runfolder.ListManifest
	marker, _ := json.Marshal(runfolder.Owner{Format: runfolder.OwnerFormat, Command: runfolder.ListCommand})
	defer func() { hookAfterOwnerRead = nil }()
	hookAfterOwnerRead = func(d string) {
		if err := os.WriteFile(filepath.Join(d, runfolder.FileOwner), append(marker, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		hookAfterOwnerRead = nil
	}
	if err := checkListFolder(dir, l, nil, man, false); err != nil {
		t.Fatalf("a shard's marker appearing meanwhile: %v", err)
	}
	other := filepath.Join(t.TempDir(), "other")
	os.MkdirAll(other, 0o755)
	hookAfterOwnerRead = func(d string) {
		os.WriteFile(filepath.Join(d, "notes.txt"), []byte("mine"), 0o644)
		hookAfterOwnerRead = nil
	}
	if err := checkListFolder(other, l, nil, man, false); err == nil || !strings.Contains(err.Error(), "not a densitykv prompt list") {
		t.Fatalf("a user's file appearing meanwhile: %v", err)
	}
}
