package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/parity"
)

// TestCompareRuns: densitykv compare of a seed-1 run with its replay from
// a seed-2 run's --noise reports zero latent error, full bank-decision
// overlap and zero trace distance in every block; against the seed-2 run
// itself it reports nonzero errors and distances. It writes the report's
// files and prints the JSON with --json.
func TestCompareRuns(t *testing.T) {
	dir := t.TempDir()
	text := tinyText(t, dir)
	n := filepath.Join(dir, "n.safetensors")
	base := func(name, seed string, extra ...string) []string {
		return append([]string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(golden.Wan(t), "weights.safetensors"), "--text", text,
			"--latent-height", "6", "--latent-width", "8", "--blocks", "4", "--policy", "densitykv", "--capacity", "24", "--sigma", "4",
			"--lineage-heads", "all", "--preview=false", "--out", dir, "--name", name, "--quiet", "--seed", seed}, extra...)
	}
	for _, args := range [][]string{base("s1", "1", "--save-noise", n), base("s2", "2"), base("replay", "2", "--noise", n)} {
		if code, _, errs := run(t, context.Background(), args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
	}
	compare := func(b, out string) parity.Report {
		t.Helper()
		code, stdout, errs := run(t, context.Background(), "compare", filepath.Join(dir, "s1"), filepath.Join(dir, b), "--out", filepath.Join(dir, out), "--json")
		if code != 0 {
			t.Fatalf("compare s1 %s: exit %d: %s", b, code, errs)
		}
		var r parity.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("compare --json: %v: %s", err, stdout)
		}
		for _, f := range []string{parity.FileJSON, parity.FileText, parity.FileFigure + ".png", parity.FileFigure + ".svg"} {
			if st, err := os.Stat(filepath.Join(dir, out, f)); err != nil || st.Size() == 0 {
				t.Errorf("compare s1 %s: %s: %v", b, f, err)
			}
		}
		if len(r.Blocks) != 4 || r.Latents == nil || r.Bank == nil || r.Bank.Pairs == 0 || r.Trace == nil || r.Trace.Rows == 0 || r.FinalBank == nil {
			t.Fatalf("compare s1 %s: incomplete report %+v", b, r)
		}
		return r
	}
	same := compare("replay", "same")
	if same.Latents.MaxAbs != 0 || same.Bank.Min != 1 || same.FinalBank.Min != 1 || same.Trace.MaxTV != 0 || len(same.Notes) > 0 {
		t.Errorf("s1 vs its replay: latents %+v, bank %+v, final %+v, trace %+v, notes %v", same.Latents, same.Bank, same.FinalBank, same.Trace, same.Notes)
	}
	diff := compare("s2", "diff")
	if diff.Latents.MaxAbs == 0 || diff.Latents.RelL2 == 0 || diff.Trace.MaxTV == 0 || diff.Bank.Min == 1 {
		t.Errorf("s1 vs s2: latents %+v, bank %+v, trace %+v: no difference seen", diff.Latents, diff.Bank, diff.Trace)
	}
	for _, bl := range diff.Blocks {
		if bl.Latents == nil || bl.Latents.MaxAbs == 0 {
			t.Errorf("s1 vs s2: block %d latents %+v", bl.Block, bl.Latents)
		}
	}
	// Text output, and refusals.
	code, stdout, errs := run(t, context.Background(), "compare", filepath.Join(dir, "s1"), filepath.Join(dir, "s2"), "--out", filepath.Join(dir, "txt"))
	if code != 0 || !strings.Contains(stdout, "bank decisions") || !strings.Contains(stdout, "compare.png") {
		t.Errorf("compare text: exit %d: %s%s", code, stdout, errs)
	}
	if code, _, errs := run(t, context.Background(), "compare", filepath.Join(dir, "s1"), filepath.Join(dir, "nowhere")); code != exitUsage || !strings.Contains(errs, "nowhere") {
		t.Errorf("compare with a missing folder: exit %d: %s", code, errs)
	}
}
