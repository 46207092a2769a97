package vbench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDisplay(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0.9719 * 100, "97.19"}, {0.975 * 100, "97.50"}, {51.944999, "51.94"}, {51.945001, "51.95"},
		{0, "0.00"}, {100, "100.00"}, {0.125, "0.12"}, // 0.125 is exact: half to even, as Python's "%.2f"
		{0.375, "0.38"}, {-1.005, "-1.00"}, // -1.005 is below -1.005 in binary
	} {
		got, err := display(c.v)
		if err != nil || got.String() != c.want {
			t.Errorf("display(%v) = %v, %v; want %s", c.v, got, err, c.want)
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), 1e13} {
		if _, err := display(bad); err == nil {
			t.Errorf("display(%v) accepted", bad)
		}
	}
}

func TestRanks(t *testing.T) {
	vals := []cents{9719, 9719, 9706, 9800, 9706, 9706}
	// Higher first: 98.00 → 1; 97.19 ×2 → ranks 2, 3 (midrank 2.5,
	// competition 2); 97.06 ×3 → ranks 4, 5, 6 (midrank 5, competition 4).
	if got, want := midRanks2(vals), []int{5, 5, 10, 2, 10, 10}; !slices.Equal(got, want) {
		t.Errorf("midRanks2 = %v, want %v", got, want)
	}
	if got, want := competitionRanks(vals), []int{2, 2, 4, 1, 4, 4}; !slices.Equal(got, want) {
		t.Errorf("competitionRanks = %v, want %v", got, want)
	}
	// Best and second-best distinct values.
	if got, want := marks(vals, false), []int{2, 2, 0, 1, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("marks = %v, want %v", got, want)
	}
	if got, want := marks(vals, true), []int{2, 2, 1, 0, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("marks (lower better) = %v, want %v", got, want)
	}
	if got, want := marks([]cents{5, 5}, false), []int{1, 1}; !slices.Equal(got, want) {
		t.Errorf("marks of a full tie = %v, want %v", got, want)
	}
}

func TestRound2(t *testing.T) {
	for _, c := range []struct {
		r    ratio
		want string
	}{
		{ratio{11, 6}, "1.83"}, {ratio{13, 6}, "2.17"}, {ratio{7, 6}, "1.17"}, {ratio{12, 6}, "2.00"},
		{ratio{23, 12}, "1.92"}, {ratio{25, 12}, "2.08"}, {ratio{102, 54}, "1.89"},
		{ratio{1, 8}, "0.13"}, {ratio{1, 200}, "0.01"}, {ratio{0, 5}, "0.00"}, // exact halves round up
	} {
		if got := c.r.round2().String(); got != c.want {
			t.Errorf("%d/%d rounds to %s, want %s", c.r.num, c.r.den, got, c.want)
		}
	}
}

func TestPromptName(t *testing.T) {
	long := strings.Repeat("abcdefghij", 30)
	wide := strings.Repeat("猫", 200) // 3 bytes each
	for _, c := range []struct{ prompt, want string }{
		{"  A cat on a mat.  ", "A cat on a mat."},
		{"a_b/c\\d\te", "a b c d e"},
		{"clip.mp4 of a dog", "clip mp4 of a dog"},
		{long, long[:MaxPromptChars]},
		{"///", "prompt"},
	} {
		if got := promptName(c.prompt, 6); got != c.want {
			t.Errorf("promptName(%q) = %q, want %q", c.prompt, got, c.want)
		}
	}
	w := promptName(wide, 6)
	if len(w)+len("-999999_000.mp4") > 255 || !utf8.ValidString(w) || !strings.HasPrefix(wide, w) || len(w) < 200 {
		t.Errorf("a 600-byte prompt became %d bytes (%d characters): want the longest prefix whose clip names fit 255 bytes", len(w), utf8.RuneCountInString(w))
	}
	var n namer
	got := []string{n.name("A cat."), n.name("a CAT."), n.name("A dog"), n.name(" A cat. ")}
	if want := []string{"A cat.-0.mp4", "a CAT.-1.mp4", "A dog-0.mp4", "A cat.-2.mp4"}; !slices.Equal(got, want) {
		t.Errorf("names %q, want %q", got, want)
	}
	for _, c := range [][2]string{{"A cat.-0.mp4", "A cat."}, {"x-12.mp4", "x"}, {"a-b.mp4", "a-b"}, {"plain.mp4", "plain"}, {"-3.mp4", ""}} {
		if got := PromptFromName(c[0]); got != c[1] {
			t.Errorf("PromptFromName(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}
