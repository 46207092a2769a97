package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
)

// The user documentation: the README, DEVELOPING.md and the pages of docs/,
// relative to this package's folder.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md pages (%v)", err)
	}
	return append([]string{"../../README.md", "../../DEVELOPING.md"}, pages...)
}

// mdDoc is a Markdown file split into prose lines (fenced code blanked,
// inline code kept) and its fenced code blocks.
type mdDoc struct {
	path   string
	prose  []string   // every line, "" inside fences
	blocks [][]string // fenced blocks' lines
	starts []int      // the line number of each block's first line
	infos  []string   // each block's info string (sh, yaml, …)
}

func readMD(t *testing.T, path string) mdDoc {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := mdDoc{path: path}
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if !in {
				d.blocks = append(d.blocks, nil)
				d.starts = append(d.starts, n+1)
				d.infos = append(d.infos, strings.TrimPrefix(strings.TrimSpace(l), "```"))
			}
			in = !in
			d.prose = append(d.prose, "")
			continue
		}
		if in {
			d.blocks[len(d.blocks)-1] = append(d.blocks[len(d.blocks)-1], l)
			d.prose = append(d.prose, "")
			continue
		}
		d.prose = append(d.prose, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if in {
		t.Errorf("%s: a code fence is not closed", path)
	}
	return d
}

var (
	inlineCode = regexp.MustCompile("`[^`]*`")
	mdLink     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// anchors are the heading anchors GitHub makes for a Markdown file:
// lower case, punctuation other than '-' and '_' dropped, spaces as '-',
// a repeated anchor suffixed -1, -2, ….
func (d mdDoc) anchors() map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range d.prose {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if k := seen[a]; k > 0 {
			out[fmt.Sprintf("%s-%d", a, k)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestDocsLinks: every relative link and image of the documentation names
// a file or folder of the repository, and every #anchor a heading of the
// page it points into.
func TestDocsLinks(t *testing.T) {
	docs := map[string]mdDoc{}
	load := func(p string) mdDoc {
		p = filepath.Clean(p)
		if d, ok := docs[p]; ok {
			return d
		}
		d := readMD(t, p)
		docs[p] = d
		return d
	}
	links := 0
	for _, path := range docFiles(t) {
		d := load(path)
		for n, l := range d.prose {
			for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(l, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, anchor, _ := strings.Cut(target, "#")
				dest := path
				if file != "" {
					dest = filepath.Join(filepath.Dir(path), file)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: %v", path, n+1, target, err)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", path, n+1, target)
					continue
				}
				if !load(dest).anchors()[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", path, n+1, target, dest, anchor)
				}
			}
		}
	}
	if links < 20 {
		t.Fatalf("only %d relative links found: the link pattern is broken", links)
	}
}

// TestDocsReadme: the README stays short (at most 300 lines) and its first
// section after the title and description gets a fresh clone to the demo
// with the two set-up commands.
func TestDocsReadme(t *testing.T) {
	d := readMD(t, "../../README.md")
	if len(d.prose) > 300 {
		t.Errorf("README.md has %d lines; keep it at most 300 and move the details into docs/", len(d.prose))
	}
	first := -1
	for n, l := range d.prose {
		if strings.HasPrefix(l, "## ") {
			first = n
			break
		}
	}
	if first < 0 || d.prose[first] != "## Set up on a fresh machine" || first > 25 {
		t.Fatalf("README.md's first section is not \"## Set up on a fresh machine\" within its first 25 lines")
	}
	if len(d.blocks) == 0 || d.starts[0] < first+1 || strings.Join(d.blocks[0], "\n") != "go run ./cmd/densitykv demo\nbash scripts/test.sh" {
		t.Fatalf("README.md's set-up section should open with exactly the two commands `go run ./cmd/densitykv demo` and `bash scripts/test.sh`, got %q", d.blocks)
	}
}

// shellWords splits a command line as sh would for plain words and quotes
// (no expansions).
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

var envAssign = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=\S*$`)

// docCommands are the densitykv command lines of the documentation: the
// lines of its shell code blocks (```sh) that run densitykv (after
// environment assignments; backslash continuations joined, comments cut)
// and its inline code spans that start with "densitykv ".
func docCommands(t *testing.T) (cmds []string, where []string) {
	for _, path := range docFiles(t) {
		d := readMD(t, path)
		for b, block := range d.blocks {
			if d.infos[b] != "sh" && d.infos[b] != "bash" {
				continue
			}
			for i := 0; i < len(block); i++ {
				line, n := block[i], d.starts[b]+i
				for strings.HasSuffix(line, `\`) && i+1 < len(block) {
					i++
					line = strings.TrimSuffix(line, `\`) + " " + block[i]
				}
				if k := strings.Index(line, " #"); k >= 0 {
					line = line[:k]
				}
				f := strings.Fields(line)
				for len(f) > 0 && envAssign.MatchString(f[0]) {
					f = f[1:]
				}
				if len(f) > 0 && (f[0] == "densitykv" || f[0] == "./densitykv") {
					cmds = append(cmds, strings.Join(f, " "))
					where = append(where, fmt.Sprintf("%s:%d", path, n))
				}
			}
		}
		for n, l := range d.prose {
			for _, c := range inlineCode.FindAllString(l, -1) {
				if c = strings.Trim(c, "`"); strings.HasPrefix(c, "densitykv ") {
					cmds = append(cmds, c)
					where = append(where, fmt.Sprintf("%s:%d", path, n+1))
				}
			}
		}
	}
	return cmds, where
}

// TestDocsCommandFlags: every densitykv command line of the documentation
// names a command that exists and only flags that command has.
func TestDocsCommandFlags(t *testing.T) {
	cmds, where := docCommands(t)
	if len(cmds) < 30 {
		t.Fatalf("only %d densitykv command lines found in the documentation: the extraction is broken", len(cmds))
	}
	root := newRootCmd()
	for k, line := range cmds {
		words, err := shellWords(line)
		if err != nil {
			t.Errorf("%s: %q: %v", where[k], line, err)
			continue
		}
		args := words[1:]
		cmd, rest, err := root.Find(args)
		if err != nil {
			t.Errorf("%s: %q: %v", where[k], line, err)
			continue
		}
		if cmd == root && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			t.Errorf("%s: %q: no command %q", where[k], line, args[0])
			continue
		}
		checkFlags(t, where[k], line, cmd, rest)
	}
}

func checkFlags(t *testing.T, where, line string, cmd *cobra.Command, args []string) {
	t.Helper()
	cmd.InitDefaultHelpFlag()
	flags := cmd.Flags()
	for _, a := range args {
		switch {
		case a == "--" || a == "..." || a == "…" || !strings.HasPrefix(a, "-") || a == "-":
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a[2:], "=")
			if flags.Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
				t.Errorf("%s: %q: %s has no flag --%s", where, line, cmd.CommandPath(), name)
			}
		default:
			if len(a) == 2 && flags.ShorthandLookup(a[1:]) == nil {
				t.Errorf("%s: %q: %s has no flag %s", where, line, cmd.CommandPath(), a)
			}
		}
	}
}
