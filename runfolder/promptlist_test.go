package runfolder

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// pyTextDataset is a literal reading of TextDataset's
// `[line.rstrip() for line in open(path, encoding="utf-8")]`: universal
// newlines first (\r\n and \r become \n), then lines split after each \n,
// then Python's rstrip (its isspace: Go's unicode.IsSpace and U+001C–U+001F).
func pyTextDataset(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		line := s
		if i < 0 {
			s = ""
		} else {
			line, s = s[:i+1], s[i+1:]
		}
		out = append(out, strings.TrimRightFunc(line, func(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }))
	}
	return out
}

func TestParsePromptList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"a\nb\n", []string{"a", "b"}},
		{"a\nb", []string{"a", "b"}},
		{"a\n\nb\n", []string{"a", "", "b"}},         // a blank line keeps its index
		{"a\n\n", []string{"a", ""}},                 // a final blank line is a prompt
		{"  lead  \t\r\nx", []string{"  lead", "x"}}, // trailing white space only
		{"a\rb\r\nc", []string{"a", "b", "c"}},       // universal newlines
		{"a\x1f\u3000\n", []string{"a"}},             // Python's isspace, not Go's alone
		{"a\vb\n", []string{"a\vb"}},                 // \v does not end a line in text mode
		{"\ufeffbom\n", []string{"\ufeffbom"}},       // utf-8, not utf-8-sig: the BOM stays
		{"\n", []string{""}},
	} {
		l, err := ParsePromptList("f", []byte(c.in))
		if err != nil || !slices.Equal(l.Prompts, c.want) {
			t.Errorf("%q: %q %v, want %q", c.in, l.Prompts, err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", "is empty"},
		{"ok\n\xff\xfe\n", "not UTF-8 (invalid byte 0xff at offset 3, line 2)"},
		{strings.Repeat("x", 1<<19), "line 1 has 524288 bytes"},
	} {
		if _, err := ParsePromptList("f", []byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.20q: %v, want %q", c.in, err, c.want)
		}
	}
}

// FuzzParsePromptList: the parser equals the literal TextDataset reading on
// every UTF-8 input, and hashes the bytes.
func FuzzParsePromptList(f *testing.F) {
	for _, s := range []string{"a\nb\n", "\n\n  x  \r\ny", "", "   \n\t\n", "only one", "a\r\n\r\nb", "\r\r\n\n", "x\x1c\n\u2028y"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParsePromptList("f", b)
		if err != nil {
			return
		}
		want := pyTextDataset(string(b))
		if !slices.Equal(l.Prompts, want) {
			t.Fatalf("%q: %q, want %q", b, l.Prompts, want)
		}
		if len(l.SHA256) != 64 {
			t.Fatalf("hash %q", l.SHA256)
		}
	})
}

func TestReadPromptListExtended(t *testing.T) {
	dir := t.TempDir()
	p, e := filepath.Join(dir, "p.txt"), filepath.Join(dir, "e.txt")
	os.WriteFile(p, []byte("a cat\na dog\n"), 0o644)
	os.WriteFile(e, []byte("a grey cat sleeps on a sofa\na dog runs\n"), 0o644)
	l, err := ReadPromptList(p, e)
	if err != nil || l.Text(1) != "a dog runs" || l.Prompts[1] != "a dog" || l.ExtendedSHA256 == "" {
		t.Fatalf("%+v %v", l, err)
	}
	os.WriteFile(e, []byte("only one\n"), 0o644)
	if _, err := ReadPromptList(p, e); err == nil || !strings.Contains(err.Error(), "has 1 lines, the prompts file") {
		t.Fatalf("short extended file: %v", err)
	}
	if _, err := ReadPromptList(filepath.Join(dir, "missing.txt"), ""); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestSelect(t *testing.T) {
	l := &PromptList{Path: "p", Prompts: make([]string, 5)}
	if s, err := l.Select(nil); err != nil || !slices.Equal(s, []int{0, 1, 2, 3, 4}) {
		t.Fatal(s, err)
	}
	if s, err := l.Select([]int{4, 0}); err != nil || !slices.Equal(s, []int{4, 0}) {
		t.Fatal(s, err)
	}
	for _, c := range []struct {
		idx  []int
		want string
	}{{[]int{5}, "outside the 5 prompts"}, {[]int{-1}, "outside"}, {[]int{1, 1}, "twice"}} {
		if _, err := l.Select(c.idx); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v", c.idx, err)
		}
	}
}

// TestShardTake: the shards of a selection partition it, each prompt in
// exactly one shard, in run order, sizes within one of each other.
func TestShardTake(t *testing.T) {
	sel := []int{0, 8, 17, 25, 34, 42, 51, 65, 68, 76, 85, 93, 102, 110, 119, 127}
	if got := (Shard{Index: 1, Count: 3}).Take(sel); !slices.Equal(got, []int{8, 34, 65, 85, 110}) {
		t.Fatalf("shard 1/3: %v", got)
	}
	for n := 1; n <= 20; n++ {
		seen := map[int]int{}
		lo, hi := len(sel), 0
		for i := 0; i < n; i++ {
			got := Shard{Index: i, Count: n}.Take(sel)
			lo, hi = min(lo, len(got)), max(hi, len(got))
			for k, x := range got {
				seen[x]++
				if k > 0 && slices.Index(sel, x) < slices.Index(sel, got[k-1]) {
					t.Fatalf("%d/%d: %v out of run order", i, n, got)
				}
			}
		}
		if len(seen) != len(sel) || hi-lo > 1 {
			t.Fatalf("n=%d: %d prompts covered, sizes %d..%d", n, len(seen), lo, hi)
		}
		for x, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d: prompt %d in %d shards", n, x, c)
			}
		}
	}
	if !slices.Equal((Shard{}).Take(sel), sel) {
		t.Fatal("the zero shard is the whole list")
	}
}

func TestParseShard(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		v    string
		env  func(string) string
		want string // I/N, or an error's text
	}{
		{"", env(), "0/1"},
		{"2/5", env(), "2/5"},
		{"0/1", env(), "0/1"},
		{"5/5", env(), "index 5 must be 0..4"},
		{"-1/5", env(), "index -1"},
		{"1/0", env(), "count 0 must be"},
		{"1", env(), "want I/N"},
		{"a/b", env(), "integers"},
		{"env", env(EnvJobIndex, "3", EnvShards, "8"), "3/8"},
		{"env/4", env(EnvJobIndex, "3"), "3/4"},
		{"env/4", env(EnvJobIndex, "4"), "index 4 must be 0..3"},
		{"env", env(EnvJobIndex, "3"), "shard count is not known"},
		{"env", env(EnvSlurmID, "7", EnvSlurmCount, "8"), "7/8"},
		{"env", env(EnvSlurmID, "8", EnvSlurmMin, "1", EnvSlurmCount, "8"), "7/8"}, // --array=1-8
		{"env", env(EnvSlurmID, "6", EnvSlurmMin, "0", EnvSlurmStep, "2", EnvSlurmCount, "4"), "3/4"},
		{"env", env(EnvSlurmID, "5", EnvSlurmStep, "2", EnvSlurmCount, "4"), "not in the array"},
		{"env", env(EnvSlurmID, "x"), "not an integer"},
		{"env", env(EnvSlurmID, "1", EnvJobIndex, "1"), "both"},
		{"env", env(), "neither"},
	} {
		s, err := ParseShard(c.v, c.env)
		got := s.String()
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("--shard %q: %s, want %s", c.v, got, c.want)
		}
	}
	if n := (Shard{Index: 2, Count: 7}).Name(); n != "shard-2-of-7" {
		t.Fatal(n)
	}
}

// FuzzParseShard: any --shard value and environment gives a shard within
// its count, or an error; never a panic.
func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"0/1", "3/8", "env", "env/4", "9/3", "/", "env/x", "-0/-0"} {
		f.Add(s, "2", "5", "0", "1", "8")
	}
	f.Fuzz(func(t *testing.T, v, job, id, lo, step, count string) {
		env := map[string]string{EnvJobIndex: job, EnvSlurmID: id, EnvSlurmMin: lo, EnvSlurmStep: step, EnvSlurmCount: count}
		s, err := ParseShard(v, func(k string) string { return env[k] })
		if err != nil {
			return
		}
		if v != "" && (s.Count < 1 || s.Count > MaxShards || s.Index < 0 || s.Index >= s.Count) {
			t.Fatalf("%q: %+v", v, s)
		}
	})
}
