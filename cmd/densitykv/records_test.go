package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/generate"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
)

// readTree reads every file under dir (nil when there is none).
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			out[p] = b
		}
		return nil
	})
	return out
}

// sameTree reports the first file of want that got lacks or holds other
// bytes ("" when none).
func sameTree(want, got map[string][]byte) string {
	for p, b := range want {
		if g, ok := got[p]; !ok || !bytes.Equal(g, b) {
			return p
		}
	}
	if len(got) != len(want) {
		return "the file count"
	}
	return ""
}

// TestDecodeChecksRecords (issue #26): decode checks the latent shards
// and the configuration against what the run folder recorded before it
// reads or replaces anything. One byte flipped in
// latents/block_00005.safetensors made decode exit 0 with another video;
// now it exits non-zero naming the shard and leaves video.mp4 and the
// segments as they were. A shard edited together with the manifest's
// record is refused by the checkpoint's, an edited configuration by its
// SHA-256; the intact folder decodes to the same video.
func TestDecodeChecksRecords(t *testing.T) {
	ffTools(t)
	dir := t.TempDir()
	if code, _, errs := run(t, context.Background(), pipelineArgs(t, dir, "r", "--quiet", "--blocks", "6")...); code != 0 {
		t.Fatalf("generate: %s", errs)
	}
	rd := filepath.Join(dir, "r")
	shard := filepath.Join(rd, "latents", "block_00005.safetensors")
	manPath := filepath.Join(rd, rollout.ManifestFile)
	cfgPath := filepath.Join(rd, runfolder.FileConfig)
	pristine := map[string][]byte{}
	for _, p := range []string{shard, manPath, cfgPath} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pristine[p] = b
	}
	videos := func() map[string][]byte {
		v := readTree(t, filepath.Join(rd, "segments"))
		b, err := os.ReadFile(filepath.Join(rd, "video.mp4"))
		if err != nil {
			t.Fatal(err)
		}
		v["video.mp4"] = b
		return v
	}
	before := videos()
	flipped := bytes.Clone(pristine[shard])
	flipped[len(flipped)-7] ^= 0x01
	for _, c := range []struct {
		name   string
		damage func()
		want   []string
	}{
		{"one byte of a shard", func() { os.WriteFile(shard, flipped, 0o644) },
			[]string{"latent shard " + shard + " (block 5)", "SHA-256", "changed or damaged", "nothing was decoded"}},
		{"a shard and the manifest's record", func() {
			os.WriteFile(shard, flipped, 0o644)
			var man rollout.Manifest
			if err := json.Unmarshal(pristine[manPath], &man); err != nil {
				t.Fatal(err)
			}
			man.Shards[5].SHA256 = sha256Hex(flipped)
			b, _ := json.MarshalIndent(man, "", "  ")
			os.WriteFile(manPath, b, 0o644)
		}, []string{"latent shard " + shard + " (block 5)", "checkpoint"}},
		{"the configuration", func() {
			os.WriteFile(cfgPath, bytes.Replace(pristine[cfgPath], []byte("tau: 2"), []byte("tau: 3"), 1), 0o644)
		}, []string{cfgPath, "SHA-256", "changed"}},
	} {
		for p, b := range pristine {
			os.WriteFile(p, b, 0o644)
		}
		c.damage()
		code, _, errs := run(t, context.Background(), "decode", rd, "--quiet")
		if code == 0 {
			t.Errorf("%s: decode accepted the damage", c.name)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: exit %d, error %q lacks %q", c.name, code, strings.TrimSpace(errs), w)
			}
		}
		if p := sameTree(before, videos()); p != "" {
			t.Errorf("%s: the refused decode changed %s", c.name, p)
		}
	}
	for p, b := range pristine {
		os.WriteFile(p, b, 0o644)
	}
	if code, _, errs := run(t, context.Background(), "decode", rd, "--quiet"); code != 0 {
		t.Fatalf("decode of the intact folder: exit %d: %s", code, errs)
	}
	if p := sameTree(before, videos()); p != "" {
		t.Errorf("decode of the intact folder made another %s", p)
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestTraceChecksRecords: trace checks a complete run folder's records
// before drawing: lines added to its memory log and an edited
// configuration are refused by name, and its figures are left as they
// were.
func TestTraceChecksRecords(t *testing.T) {
	ffTools(t)
	dir := t.TempDir()
	if code, _, errs := run(t, context.Background(), pipelineArgs(t, dir, "r", "--quiet")...); code != 0 {
		t.Fatalf("generate: %s", errs)
	}
	rd := filepath.Join(dir, "r")
	log := filepath.Join(rd, runfolder.FileLog)
	cfgPath := filepath.Join(rd, runfolder.FileConfig)
	logBytes, _ := os.ReadFile(log)
	cfgBytes, _ := os.ReadFile(cfgPath)
	plots := readTree(t, filepath.Join(rd, runfolder.DirPlots))
	if len(plots) == 0 {
		t.Fatal("the run drew no figure")
	}
	first := logBytes[:bytes.IndexByte(logBytes, '\n')+1]
	for _, c := range []struct {
		name   string
		damage func()
		want   []string
	}{
		{"a line added to the log", func() { os.WriteFile(log, append(bytes.Clone(logBytes), first...), 0o644) }, []string{log + " has", "lines were added"}},
		{"the log cut", func() { os.WriteFile(log, logBytes[:len(logBytes)-len(first)], 0o644) }, []string{log + " has", "fewer than"}},
		{"the configuration", func() { os.WriteFile(cfgPath, bytes.Replace(cfgBytes, []byte("tau: 2"), []byte("tau: 3"), 1), 0o644) }, []string{cfgPath, "changed"}},
	} {
		os.WriteFile(log, logBytes, 0o644)
		os.WriteFile(cfgPath, cfgBytes, 0o644)
		c.damage()
		code, _, errs := run(t, context.Background(), "trace", rd)
		if code == 0 {
			t.Errorf("%s: trace accepted the damage", c.name)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: exit %d, error %q lacks %q", c.name, code, strings.TrimSpace(errs), w)
			}
		}
		if p := sameTree(plots, readTree(t, filepath.Join(rd, runfolder.DirPlots))); p != "" {
			t.Errorf("%s: the refused trace changed %s", c.name, p)
		}
	}
	os.WriteFile(log, logBytes, 0o644)
	os.WriteFile(cfgPath, cfgBytes, 0o644)
	if code, _, errs := run(t, context.Background(), "trace", rd); code != 0 {
		t.Fatalf("trace of the intact folder: exit %d: %s", code, errs)
	}
}

// TestCollectChecksRecords: collect checks each complete prompt's memory
// log against its checkpoint's record; a log that lost its last line
// (before: reported without it) is refused by name and no report is
// written.
func TestCollectChecksRecords(t *testing.T) {
	ffTools(t)
	dir := t.TempDir()
	pf := filepath.Join(dir, "prompts.txt")
	os.WriteFile(pf, []byte("a heron lands on a lake\na red panda walks through snow\n"), 0o644)
	args := pipelineArgs(t, dir, "list", "--quiet", "--blocks", "2")
	for i := range args {
		if args[i] == "--prompt" {
			args[i], args[i+1] = "--prompts", pf
		}
	}
	if code, _, errs := run(t, context.Background(), args...); code != 0 {
		t.Fatalf("list: %s", errs)
	}
	ld := filepath.Join(dir, "list")
	log := filepath.Join(ld, "00001", runfolder.FileLog)
	b, _ := os.ReadFile(log)
	os.WriteFile(log, b[:bytes.LastIndexByte(b[:len(b)-1], '\n')+1], 0o644) // its last line gone
	report := filepath.Join(dir, "report")
	code, _, errs := run(t, context.Background(), "collect", "--out", report, ld)
	if code == 0 || !strings.Contains(errs, "prompt 1") || !strings.Contains(errs, log+" has") || !strings.Contains(errs, "fewer than") {
		t.Fatalf("collect of a cut log: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(report, generate.FileReport)); err == nil {
		t.Fatal("collect refused the list but wrote its report")
	}
	os.WriteFile(log, b, 0o644)
	if code, _, errs := run(t, context.Background(), "collect", "--out", report, ld); code != 0 {
		t.Fatalf("collect of the intact list: exit %d: %s", code, errs)
	}
}
