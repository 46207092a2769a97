package runfolder

import (
	"strings"
	"testing"
	"unicode"
)

// FuzzParsePrompts: a prompts file gives its non-blank lines, trimmed, in
// order, or an error; never an empty or untrimmed prompt, or one holding a
// line break.
func FuzzParsePrompts(f *testing.F) {
	for _, s := range []string{"a\nb\n", "\n\n  x  \r\ny", "", "   \n\t\n", "only one", "a\r\n\r\nb"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := parsePrompts("f", b)
		if err != nil {
			return
		}
		var want []string
		for _, line := range strings.Split(string(b), "\n") {
			if s := strings.TrimSpace(line); s != "" {
				want = append(want, s)
			}
		}
		if strings.Join(ps, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("%q: %q, want %q", b, ps, want)
		}
		for _, p := range ps {
			if p == "" || strings.ContainsAny(p, "\n") || unicode.IsSpace([]rune(p)[0]) {
				t.Fatalf("%q: prompt %q", b, p)
			}
		}
	})
}

func TestParsePrompts(t *testing.T) {
	ps, err := parsePrompts("f", []byte("a heron\n\n  a red panda  \r\nlast"))
	if err != nil || len(ps) != 3 || ps[1] != "a red panda" || ps[2] != "last" {
		t.Fatalf("%q %v", ps, err)
	}
	if _, err := parsePrompts("f", []byte(" \n\t\n")); err == nil || !strings.Contains(err.Error(), "no prompt") {
		t.Fatalf("blank file: %v", err)
	}
	if _, err := parsePrompts("f", []byte(strings.Repeat("x", 1<<19))); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("long line: %v", err)
	}
}
