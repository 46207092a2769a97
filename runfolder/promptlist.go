package runfolder

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/densitykv/densitykv/internal/limitread"
)

// PromptList is a prompts file read as the authors' TextDataset reads it
// (Self-Forcing's utils/dataset.py, used by DensityKV's inference.py):
// the file is UTF-8 text, split into lines as Python's text mode does
// (universal newlines: "\n", "\r\n" and a lone "\r" end a line, a final
// line end adds no line), and each line loses its trailing whitespace
// (Python's str.rstrip: Unicode white space and the separators
// U+001C..U+001F) but keeps its leading white space. Every line is a
// prompt and its zero-based line number is the prompt's index, blank
// lines included, so that indices match the authors' output names
// (rank{rank}-{idx}-{seed}_{model}.mp4) and the paper's prompt numbers.
//
// Extended prompts (TextDataset's extended_prompt_path, e.g.
// Self-Forcing's MovieGenVideoBench_extended.txt) are a second file of
// the same length whose line i is the text actually encoded for prompt
// i; the DensityKV authors pass the prompts file itself (their refined
// list already is the extended text).
type PromptList struct {
	Path     string
	SHA256   string   // of the file's bytes
	Prompts  []string // one per line
	Extended []string // nil, or the extended prompts (len(Prompts) entries)
	// ExtendedPath and ExtendedSHA256 identify the extended file.
	ExtendedPath, ExtendedSHA256 string
}

// Text is the text encoded for prompt i: the extended prompt when there
// is one, else the prompt.
func (l *PromptList) Text(i int) string {
	if l.Extended != nil {
		return l.Extended[i]
	}
	return l.Prompts[i]
}

// Blank reports whether prompt i (its encoded text) is empty.
func (l *PromptList) Blank(i int) bool { return l.Text(i) == "" }

// ReadPromptList reads a prompts file and, when extended is not empty,
// its extended prompts (same number of lines).
func ReadPromptList(path, extended string) (*PromptList, error) {
	b, err := ReadPromptsFile(path, "prompts file")
	if err != nil {
		return nil, err
	}
	l, err := ParsePromptList(path, b)
	if err != nil {
		return nil, err
	}
	if extended == "" {
		return l, nil
	}
	e, err := ReadPromptsFile(extended, "extended prompts file")
	if err != nil {
		return nil, err
	}
	el, err := ParsePromptList(extended, e)
	if err != nil {
		return nil, err
	}
	if len(el.Prompts) != len(l.Prompts) {
		return nil, fmt.Errorf("runfolder: extended prompts %s has %d lines, the prompts file %s has %d; line i of one extends line i of the other", extended, len(el.Prompts), path, len(l.Prompts))
	}
	l.Extended, l.ExtendedPath, l.ExtendedSHA256 = el.Prompts, extended, el.SHA256
	return l, nil
}

// ReadPromptsFile reads a prompts file (what: prompts file, extended prompts
// file) of at most MaxPromptsFile bytes.
func ReadPromptsFile(path, what string) ([]byte, error) {
	b, err := limitread.File(path, MaxPromptsFile, what+"s")
	if err != nil {
		return nil, fmt.Errorf("runfolder: %s: %w", what, err)
	}
	return b, nil
}

// ParsePromptList parses the bytes of a prompts file named path (for
// messages) with TextDataset's rules. It refuses a file that is not
// UTF-8 (Python raises UnicodeDecodeError), has no line, or has a line
// longer than the tokenizer accepts.
func ParsePromptList(path string, b []byte) (*PromptList, error) {
	if !utf8.Valid(b) {
		off := 0
		for off < len(b) {
			r, n := utf8.DecodeRune(b[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return nil, fmt.Errorf("runfolder: prompts file %s is not UTF-8 (invalid byte %#02x at offset %d, line %d)", path, b[off], off, 1+strings.Count(string(b[:off]), "\n"))
	}
	sum := sha256.Sum256(b)
	l := &PromptList{Path: path, SHA256: hex.EncodeToString(sum[:])}
	s := string(b)
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		line := s
		if i < 0 {
			s = ""
		} else {
			line = s[:i]
			if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			s = s[i+1:]
		}
		line = strings.TrimRightFunc(line, pyIsSpace)
		if len(line) > MaxPromptBytes {
			return nil, fmt.Errorf("runfolder: prompts file %s: line %d has %d bytes, at most %d accepted", path, len(l.Prompts)+1, len(line), MaxPromptBytes)
		}
		l.Prompts = append(l.Prompts, line)
	}
	if len(l.Prompts) == 0 {
		return nil, fmt.Errorf("runfolder: prompts file %s is empty (one prompt per line)", path)
	}
	return l, nil
}

// pyIsSpace is Python's str.isspace for one character: Go's unicode.IsSpace
// and the information separators U+001C..U+001F.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }

// Select returns the indices a run of the list makes: all of them (nil
// indices) or the given ones, which must be distinct and within the list.
func (l *PromptList) Select(indices []int) ([]int, error) {
	if indices == nil {
		out := make([]int, len(l.Prompts))
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	seen := make(map[int]bool, len(indices))
	for _, i := range indices {
		if i < 0 || i >= len(l.Prompts) {
			return nil, fmt.Errorf("runfolder: prompt index %d is outside the %d prompts of %s (indices count from 0)", i, len(l.Prompts), l.Path)
		}
		if seen[i] {
			return nil, fmt.Errorf("runfolder: prompt index %d is listed twice", i)
		}
		seen[i] = true
	}
	return append([]int(nil), indices...), nil
}
