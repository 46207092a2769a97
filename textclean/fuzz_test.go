package textclean

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	"", "plain", "cafÃ©", "âœ” No problems", "Ã la mode", "voilÃ le travail", "â€œ like this â€\ufffd",
	"&amp;amp;amp;", "<b>&amp;</b>\n&lt;", "&notin &SZLIG; &#x110000; &#0;", "\x1b[31mred\x1b[0m",
	"ＬＯＵＤ　ＮＯＩＳＥＳ", "ﬂuﬃeﬆ", "a\r\nb\u2028c\u0085", "\xed\xa0\xbd\xed\xb8\x80", "\xff",
	"ГўВЂВљ Ã\u00a0", "Ø§Ù„Ø¹Ø±Ø¨ÙŠØ©", "Ð¿Ñ€Ð¸Ð²ÐµÑ‚", "e\u0301\u0301", "\u3000 x \u200b \ufeff \x1c",
}

// FuzzFixText: FixText never panics, always returns valid UTF-8, and on one
// line of text (no line break in or out) it is idempotent, as ftfy's
// fix_text is: each segment is fixed to a fixed point of all its fixers.
func FuzzFixText(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		out := FixText(s)
		if !utf8.ValidString(out) {
			t.Fatalf("FixText(%+q) = %+q is not valid UTF-8", s, out)
		}
		if strings.ContainsRune(s, '\n') || strings.ContainsRune(out, '\n') {
			return
		}
		if again := FixText(out); again != out {
			t.Fatalf("FixText not idempotent on %+q:\n once  %+q\n twice %+q", s, out, again)
		}
	})
}

// FuzzWan: the clean never panics and its result is stripped and collapsed:
// valid UTF-8, no leading or trailing Python whitespace, and no whitespace
// but single spaces. (Wan's clean is not idempotent in general, in Python
// either: the two html.unescape calls can make new entities.)
func FuzzWan(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		out := Wan(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Wan(%+q) = %+q is not valid UTF-8", s, out)
		}
		if out != PyStrip(out) {
			t.Fatalf("Wan(%+q) = %+q is not stripped", s, out)
		}
		prevSpace := false
		for _, r := range out {
			if unicode.IsSpace(r) {
				if r != ' ' || prevSpace {
					t.Fatalf("Wan(%+q) = %+q keeps whitespace %U", s, out, r)
				}
				prevSpace = true
			} else {
				prevSpace = false
			}
		}
	})
}

// FuzzHTMLUnescape: no panic, valid UTF-8 in gives valid UTF-8 out, text
// without "&" is returned as it is, and the output is never longer than
// the input by more than a reference can grow ("&nGt;" is 5 bytes for 6).
func FuzzHTMLUnescape(f *testing.F) {
	for _, s := range []string{"&amp;", "&amp", "&#x41;", "&#0;", "&notit;", "&nGt;", "&&#;&#x;", "&ampé;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := HTMLUnescape(s)
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("HTMLUnescape(%+q) = %+q is not valid UTF-8", s, out)
		}
		if !strings.Contains(s, "&") && out != s {
			t.Fatalf("HTMLUnescape changed %+q without '&'", s)
		}
		if len(out) > 2*len(s) {
			t.Fatalf("HTMLUnescape(%+q) grew to %d bytes", s, len(out))
		}
	})
}
