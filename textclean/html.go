package textclean

import (
	"strings"
	"unicode/utf8"
)

// HTMLUnescape is Python's html.unescape (3.11): every character reference
// the HTML5 rules accept is replaced, in one left-to-right pass.
//
//   - "&#" decimal digits, or "&#x"/"&#X" hex digits, with an optional ";":
//     a code point. 0 becomes U+FFFD, 13 becomes CR, 0x80–0x9F are read as
//     Windows-1252, surrogates and values above U+10FFFF become U+FFFD, and the
//     non-characters and C0/C1 controls of Python's list are deleted.
//   - "&" then 1 to 32 characters other than TAB, LF, FF, space, "<", "&", "#"
//     and ";", with an optional ";": a named reference. An exact name wins;
//     otherwise the longest name of at least two characters that prefixes it
//     (the legacy names without ";", so "&notit;" is "¬it;"); otherwise the
//     text stays as it is.
//
// Python raises ValueError for a decimal reference of more than 4300 digits
// (its int conversion limit); here such a reference is simply out of range
// and becomes U+FFFD.
func HTMLUnescape(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	i := 0
	for {
		j := strings.IndexByte(s[i:], '&')
		if j < 0 {
			b.WriteString(s[i:])
			return b.String()
		}
		b.WriteString(s[i : i+j])
		i += j
		repl, n := charref(s[i:])
		if n == 0 {
			b.WriteByte('&')
			i++
			continue
		}
		b.WriteString(repl)
		i += n
	}
}

// charref matches Python's html._charref at the "&" that starts s and returns
// the replacement and the number of bytes matched (0: no match).
func charref(s string) (string, int) {
	if len(s) < 2 {
		return "", 0
	}
	if s[1] == '#' {
		return numericCharref(s)
	}
	// [^\t\n\f <&#;]{1,32};?
	n, chars := 1, 0
	for n < len(s) && chars < 32 {
		r, size := utf8.DecodeRuneInString(s[n:])
		if r == '\t' || r == '\n' || r == '\f' || r == ' ' || r == '<' || r == '&' || r == '#' || r == ';' {
			break
		}
		n += size
		chars++
	}
	if chars == 0 {
		return "", 0
	}
	if n < len(s) && s[n] == ';' {
		n++
	}
	name := s[1:n]
	if v, ok := html5Entities[name]; ok {
		return v, n
	}
	// The longest prefix of 2 to len-1 characters that is a name.
	ends := runeEnds(name)
	for k := len(ends) - 2; k >= 1; k-- {
		if v, ok := html5Entities[name[:ends[k]]]; ok {
			return v + name[ends[k]:], n
		}
	}
	return s[:n], n
}

// runeEnds returns the byte offset after each character of s.
func runeEnds(s string) []int {
	ends := make([]int, 0, len(s))
	for i := range s {
		if i > 0 {
			ends = append(ends, i)
		}
	}
	return append(ends, len(s))
}

// numericCharref handles "&#[0-9]+;?" and "&#[xX][0-9a-fA-F]+;?".
func numericCharref(s string) (string, int) {
	n := 2
	hex := false
	if n < len(s) && (s[n] == 'x' || s[n] == 'X') {
		hex = true
		n++
	}
	start := n
	num := 0
	big := false
	for n < len(s) {
		d := digitValue(s[n], hex)
		if d < 0 {
			break
		}
		if !big {
			if hex {
				num = num*16 + d
			} else {
				num = num*10 + d
			}
			if num > 0x10FFFF {
				big = true
			}
		}
		n++
	}
	if n == start {
		return "", 0 // neither alternative matches; the name alternative cannot start with '#'
	}
	if n < len(s) && s[n] == ';' {
		n++
	}
	if big {
		return "\uFFFD", n
	}
	if r, ok := invalidCharrefs[num]; ok {
		return string(r), n
	}
	if num >= 0xD800 && num <= 0xDFFF {
		return "\uFFFD", n
	}
	if invalidCodepoint(num) {
		return "", n
	}
	return string(rune(num)), n
}

func digitValue(c byte, hex bool) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case hex && c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case hex && c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// invalidCharrefs is Python's html._invalid_charrefs: NUL, CR and the
// Windows-1252 reading of 0x80–0x9F.
var invalidCharrefs = map[int]rune{
	0x00: '\uFFFD', 0x0D: '\r',
	0x80: '\u20AC', 0x81: '\u0081', 0x82: '\u201A', 0x83: '\u0192',
	0x84: '\u201E', 0x85: '\u2026', 0x86: '\u2020', 0x87: '\u2021',
	0x88: '\u02C6', 0x89: '\u2030', 0x8A: '\u0160', 0x8B: '\u2039',
	0x8C: '\u0152', 0x8D: '\u008D', 0x8E: '\u017D', 0x8F: '\u008F',
	0x90: '\u0090', 0x91: '\u2018', 0x92: '\u2019', 0x93: '\u201C',
	0x94: '\u201D', 0x95: '\u2022', 0x96: '\u2013', 0x97: '\u2014',
	0x98: '\u02DC', 0x99: '\u2122', 0x9A: '\u0161', 0x9B: '\u203A',
	0x9C: '\u0153', 0x9D: '\u009D', 0x9E: '\u017E', 0x9F: '\u0178',
}

// invalidCodepoint is Python's html._invalid_codepoints: U+0001–U+0008,
// U+000B, U+000E–U+001F, U+007F–U+009F, U+FDD0–U+FDEF and the two last code
// points of every plane.
func invalidCodepoint(c int) bool {
	switch {
	case c >= 0x01 && c <= 0x08, c == 0x0B, c >= 0x0E && c <= 0x1F, c >= 0x7F && c <= 0x9F:
		return true
	case c >= 0xFDD0 && c <= 0xFDEF:
		return true
	case c&0xFFFE == 0xFFFE && c <= 0x10FFFF:
		return true
	}
	return false
}
