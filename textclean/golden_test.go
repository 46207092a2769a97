package textclean

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/golden"
)

// goldenCase is the part of a tokenize.json case the clean is checked against.
type goldenCase struct {
	Index         int    `json:"index"`
	Category      string `json:"category"`
	Raw           string `json:"raw"`
	Cleaned       string `json:"cleaned"`
	CleanedNoFTFY string `json:"cleaned_no_ftfy"`
}

func loadGoldenCases(t *testing.T) []goldenCase {
	t.Helper()
	dir := golden.T5(t)
	data, err := os.ReadFile(filepath.Join(dir, "tokenize.json"))
	if err != nil {
		t.Fatalf("reading tokenize.json: %v", err)
	}
	var file struct {
		NCases int          `json:"n_cases"`
		Cases  []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("parsing tokenize.json: %v", err)
	}
	if len(file.Cases) == 0 || len(file.Cases) != file.NCases {
		t.Fatalf("tokenize.json holds %d cases, n_cases says %d", len(file.Cases), file.NCases)
	}
	return file.Cases
}

// TestGoldenClean checks Wan's clean of every golden string, and the same
// pipeline without ftfy, exactly.
func TestGoldenClean(t *testing.T) {
	cases := loadGoldenCases(t)
	failed := 0
	for _, c := range cases {
		if got := Wan(c.Raw); got != c.Cleaned {
			failed++
			t.Errorf("case %d (%s): Wan(%+q)\n got %+q\nwant %+q", c.Index, c.Category, c.Raw, got, c.Cleaned)
		}
		noFTFY := PyStrip(CollapseWhitespace(PyStrip(HTMLUnescape(HTMLUnescape(c.Raw)))))
		if noFTFY != c.CleanedNoFTFY {
			failed++
			t.Errorf("case %d (%s): clean without ftfy of %+q\n got %+q\nwant %+q", c.Index, c.Category, c.Raw, noFTFY, c.CleanedNoFTFY)
		}
	}
	t.Logf("%d cases, %d mismatches", len(cases), failed)
}
