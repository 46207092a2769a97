package textclean

import (
	"strings"
	"unicode"
)

// Wan is Wan2.1's prompt clean, HuggingfaceTokenizer(clean='whitespace') in
// wan/modules/tokenizers.py, in its order:
//
//	basic_clean:      ftfy.fix_text, html.unescape twice, strip
//	whitespace_clean: every run of whitespace to one space, strip
//
// FixText is the ftfy step and HTMLUnescape Python's html.unescape. The
// strips are Python's str.strip (Unicode White_Space and U+001C–U+001F); the
// collapse is the regex module's \s+, Unicode White_Space only (25 code
// points, not U+001C–U+001F, U+200B or U+FEFF).
func Wan(text string) string {
	text = FixText(text)
	text = HTMLUnescape(HTMLUnescape(text))
	text = PyStrip(text)
	text = CollapseWhitespace(text)
	return PyStrip(text)
}

// PyStrip is Python's str.strip() with no argument: it removes leading and
// trailing characters for which str.isspace is true.
func PyStrip(s string) string {
	return strings.TrimFunc(s, isPySpace)
}

// CollapseWhitespace is re.sub(r'\s+', ' ', s) with the regex module: each
// run of Unicode White_Space characters becomes one space.
func CollapseWhitespace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	inRun := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			if !inRun {
				b.WriteByte(' ')
			}
			inRun = true
			continue
		}
		inRun = false
		b.WriteRune(r)
	}
	return b.String()
}
