package generate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runinput"
	"github.com/densitykv/densitykv/tokenizer"
)

// TestLockPrompt: a prompt's lock is exclusive (a second holder, here
// another open file of this process, is told the prompt is busy) until
// released.
func TestLockPrompt(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockPrompt(dir, 7)
	if err != nil || unlock == nil {
		t.Fatal(err)
	}
	if again, err := lockPrompt(dir, 7); err != nil || again != nil {
		t.Fatalf("a held lock was taken again (%v)", err)
	}
	if other, err := lockPrompt(dir, 8); err != nil || other == nil {
		t.Fatalf("another prompt's lock: %v", err)
	} else {
		other()
	}
	unlock()
	if again, err := lockPrompt(dir, 7); err != nil || again == nil {
		t.Fatalf("a released lock: %v", err)
	} else {
		again()
	}
}

// TestCreateOnce: the first writer's bytes stay; a second writer leaves
// them (checkList compares them).
func TestCreateOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "list.json")
	if err := createOnce(p, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := createOnce(p, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "first" {
		t.Fatalf("%q", b)
	}
	if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

// TestGenerateListExtended: with extended prompts a list encodes line i of
// the extended file for prompt i (generation.json records that text),
// reports the prompt itself, and keeps a copy of both files; a dry run of
// another selection in the same folder is refused, one of the same shard
// plan lists the prompt as done.
func TestGenerateListExtended(t *testing.T) {
	mustFF(t)
	dir := t.TempDir()
	p, e := filepath.Join(dir, "p.txt"), filepath.Join(dir, "e.txt")
	os.WriteFile(p, []byte("a cat\n"), 0o644)
	os.WriteFile(e, []byte("a grey cat sleeps on a sofa\n"), 0o644)
	gc := tinyPipeline(t, dir, "x", config.PromptSpec{Text: "x"})
	gc.Generate.Prompts, gc.Generate.PromptsFile, gc.Generate.ExtendedPromptsFile, gc.Generate.Blocks = nil, p, e, 1
	if err := runinput.ResolveGenerate(&gc, config.NewKeys(), "test"); err != nil {
		t.Fatal(err)
	}
	res, err := GenerateList(context.Background(), gc, ListOptions{}, runfolder.Hooks{})
	if err != nil || len(res.Batch) != 1 || res.Batch[0].Prompt != "a cat" || res.Batch[0].State != "generated" {
		t.Fatalf("%+v %v", res, err)
	}
	var prov Provenance
	if err := runfolder.ReadJSON(filepath.Join(runfolder.BatchDir(filepath.Join(dir, "x"), 0), runfolder.FileGeneration), &prov); err != nil || prov.Prompts[0].Text != "a grey cat sleeps on a sofa" {
		t.Fatalf("generation.json %+v %v", prov, err)
	}
	for _, f := range []string{runfolder.FileBatchPrompts, runfolder.FileBatchExtended, runfolder.FileList, runfolder.FileBatch} {
		if _, err := os.Stat(filepath.Join(dir, "x", f)); err != nil {
			t.Fatal(err)
		}
	}
	res, err = GenerateList(context.Background(), gc, ListOptions{DryRun: true}, runfolder.Hooks{})
	if err != nil || res.Batch[0].State != "done" {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	gc.Generate.PromptIndices = []int{0}
	if _, err := GenerateList(context.Background(), gc, ListOptions{DryRun: true}, runfolder.Hooks{}); err == nil || !strings.Contains(err.Error(), "another configuration") {
		t.Fatalf("another selection: %v", err)
	}
}

// TestPromptBoundIsTokenizers: a prompts file refuses a line the
// tokenizer would refuse, and no line the tokenizer accepts.
func TestPromptBoundIsTokenizers(t *testing.T) {
	if runfolder.MaxPromptBytes != tokenizer.MaxTextBytes {
		t.Fatalf("runfolder.MaxPromptBytes = %d, tokenizer.MaxTextBytes = %d", runfolder.MaxPromptBytes, tokenizer.MaxTextBytes)
	}
}
