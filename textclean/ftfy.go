package textclean

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// maxDecodeLength is ftfy's TextFixerConfig.max_decode_length: a line longer
// than this many code points is fixed in pieces of this length.
const maxDecodeLength = 1_000_000

// maxFixPasses bounds the fixed-point loops of fix_and_explain and
// fix_encoding. ftfy loops until nothing changes; every fixer either
// shortens the text or maps it to a fixed point, so real text settles in a
// few passes. The bound only turns a hypothetical endless loop into a stop.
const maxFixPasses = 64

// FixText is ftfy 6.3.1's fix_text with its default configuration:
//
//   - the text is cut after every "\n" (and every maxDecodeLength code points)
//     and each segment is fixed on its own;
//   - HTML entities are decoded ("auto") until a segment containing "<" is
//     met; from that segment on, for the rest of the text, they are not
//     (ftfy keeps the switched-off configuration for later segments);
//   - each segment goes through, until nothing changes: unescape_html,
//     fix_encoding (mojibake repair, see fixEncoding), fix_c1_controls,
//     fix_latin_ligatures, fix_character_width, uncurl_quotes,
//     fix_line_breaks, fix_surrogates, remove_terminal_escapes,
//     remove_control_chars, NFC.
//
// Invalid UTF-8 in s is read as Python would read the same bytes with
// "surrogatepass" where that is meaningful: a UTF-8-encoded surrogate
// (ED A0–BF 80–BF) becomes that surrogate, which fix_surrogates then pairs or
// replaces; every other ill-formed byte becomes U+FFFD. The result is valid
// UTF-8.
func FixText(s string) string {
	text := decodeInput(s)
	out := make([]rune, 0, len(text))
	unescape := true
	for pos := 0; pos < len(text); {
		end := len(text)
		if nl := slices.Index(text[pos:], '\n'); nl >= 0 {
			end = pos + nl + 1
		}
		if end-pos > maxDecodeLength {
			end = pos + maxDecodeLength
		}
		seg := text[pos:end]
		if unescape && slices.Contains(seg, '<') {
			unescape = false
		}
		out = append(out, fixSegment(seg, unescape)...)
		pos = end
	}
	return string(out)
}

// decodeInput turns s into code points (see FixText for ill-formed input).
func decodeInput(s string) []rune {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 && i+2 < len(s) && s[i] == 0xED &&
			s[i+1] >= 0xA0 && s[i+1] <= 0xBF && isCont(s[i+2]) {
			r = rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F) | 0xD000
			n = 3
		}
		out = append(out, r)
		i += n
	}
	return out
}

// fixSegment is ftfy's fix_and_explain on one segment.
func fixSegment(text []rune, unescape bool) []rune {
	for pass := 0; pass < maxFixPasses; pass++ {
		orig := text
		if unescape {
			text = unescapeHTML(text)
		}
		text = fixEncoding(text)
		text = fixC1Controls(text)
		text = fixLatinLigatures(text)
		text = fixCharacterWidth(text)
		text = uncurlQuotes(text)
		text = fixLineBreaks(text)
		text = fixSurrogates(text)
		text = removeTerminalEscapes(text)
		text = removeControlChars(text)
		text = nfc(text)
		if slices.Equal(text, orig) {
			break
		}
	}
	return text
}

// fixEncoding is ftfy's fix_encoding: fixEncodingStep until nothing changes.
func fixEncoding(text []rune) []rune {
	for pass := 0; pass < maxFixPasses; pass++ {
		next := fixEncodingStep(text)
		if slices.Equal(next, text) {
			break
		}
		text = next
	}
	return text
}

// fixEncodingStep is ftfy's _fix_encoding_one_step_and_explain:
//
//  1. ASCII text, and text with no sign of mojibake (isBad), stay as they are.
//  2. For each single-byte encoding that can encode the whole text, in order:
//     encode it, put back bytes A0 that became spaces (restore_byte_a0, not
//     for MacRoman), mark lossy sequences (replace_lossy_sequences, for the
//     sloppy codecs), and decode as UTF-8 (utf-8-variants when bytes ED or C0
//     occur); the first that decodes wins.
//  3. Otherwise decode the UTF-8-looking runs on their own
//     (decode_inconsistent_utf8), if that changes anything.
//  4. Otherwise, text that Latin-1 can encode is re-read as Windows-1252.
//  5. Otherwise remaining C1 controls are read as Windows-1252 one by one.
func fixEncodingStep(text []rune) []rune {
	if len(text) == 0 || isASCII(text) || !isBad(text) {
		return text
	}
	for ei, enc := range charmapEncodings {
		if !enc.possible(text) {
			continue
		}
		b := enc.encodeRunes(text)
		if ei != encMacRoman && matchesAlteredUTF8(b) {
			b = restoreByteA0(b)
		}
		if enc.sloppy {
			b = replaceLossySequences(b)
		}
		var fixed []rune
		var ok bool
		if bytes.IndexByte(b, 0xED) >= 0 || bytes.IndexByte(b, 0xC0) >= 0 {
			fixed, ok = decodeUTF8Variants(b)
		} else {
			fixed, ok = decodeUTF8Strict(b)
		}
		if ok {
			return fixed
		}
	}
	if hasUTF8Run(text) {
		if fixed := decodeInconsistentUTF8(text); !slices.Equal(fixed, text) {
			return fixed
		}
	}
	// Steps 4 and 5. ftfy's step 4 returns early for text that both
	// "latin-1" and "windows-1252" can encode, but its list of possible
	// encodings names "sloppy-windows-1252", so that early return never
	// happens; the strict Windows-1252 re-reading it tries next gives what
	// step 5 gives, or fails on a hole (U+0081, U+008D, U+008F, U+0090,
	// U+009D) and leaves the text to step 5. Either way C1 controls are read
	// as Windows-1252 and the holes stay.
	for _, r := range text {
		if r >= 0x80 && r <= 0x9F {
			return fixC1Controls(text)
		}
	}
	return text
}

// matchesAlteredUTF8 reports whether ALTERED_UTF8_RE matches anywhere in b.
func matchesAlteredUTF8(b []byte) bool {
	for i := range b {
		if alteredUTF8At(b, i) > 0 {
			return true
		}
	}
	return false
}

// alteredUTF8At is ALTERED_UTF8_RE at b[i]: a UTF-8 sequence (of the likely
// lead bytes) that would be valid if one space were byte A0. It returns the
// length of the first alternative that matches, or 0.
func alteredUTF8At(b []byte, i int) int {
	at := func(j int) int {
		if i+j < len(b) {
			return int(b[i+j])
		}
		return -1
	}
	cont := func(c int) bool { return c >= 0x80 && c <= 0xBF }
	contNot85A0 := func(c int) bool { return cont(c) && c != 0x85 && c != 0xA0 }
	c0, c1, c2, c3 := at(0), at(1), at(2), at(3)
	switch {
	case (c0 == 0xC2 || c0 == 0xC3 || c0 == 0xC5 || c0 == 0xCE || c0 == 0xD0 || c0 == 0xD9) && c1 == ' ':
		return 2
	case (c0 == 0xE2 || c0 == 0xE3) && c1 == ' ' && contNot85A0(c2):
		return 3
	case c0 >= 0xE0 && c0 <= 0xE3 && contNot85A0(c1) && c2 == ' ':
		return 3
	case c0 == 0xF0 && c1 == ' ' && cont(c2) && cont(c3):
		return 4
	case c0 == 0xF0 && cont(c1) && c2 == ' ' && cont(c3):
		return 4
	case c0 == 0xF0 && cont(c1) && cont(c2) && c3 == ' ':
		return 4
	}
	return 0
}

// restoreByteA0 is ftfy's restore_byte_a0. First "\xc3 " becomes
// "\xc3\xa0 " unless followed by a space, "quele", "quela", "quilo" or "s "
// (A_GRAVE_WORD_RE: "à" as a word, not Portuguese "às"/"àquele"…); then in
// every ALTERED_UTF8_RE match the spaces become A0.
func restoreByteA0(b []byte) []byte {
	var a []byte
	for i := 0; i < len(b); i++ {
		if b[i] == 0xC3 && i+1 < len(b) && b[i+1] == ' ' {
			rest := b[i+2:]
			if !(bytes.HasPrefix(rest, []byte(" ")) || bytes.HasPrefix(rest, []byte("quele")) ||
				bytes.HasPrefix(rest, []byte("quela")) || bytes.HasPrefix(rest, []byte("quilo")) ||
				bytes.HasPrefix(rest, []byte("s "))) {
				a = append(a, 0xC3, 0xA0, ' ')
				i++
				continue
			}
		}
		a = append(a, b[i])
	}
	out := make([]byte, 0, len(a))
	for i := 0; i < len(a); {
		if n := alteredUTF8At(a, i); n > 0 {
			for _, c := range a[i : i+n] {
				if c == ' ' {
					c = 0xA0
				}
				out = append(out, c)
			}
			i += n
			continue
		}
		out = append(out, a[i])
		i++
	}
	return out
}

// replaceLossySequences is ftfy's replace_lossy_sequences: LOSSY_UTF8_RE,
// UTF-8 sequences where byte 1A (the sloppy codecs' stand-in for U+FFFD), or
// once a '?', took the place of some bytes, and any lone 1A, become the UTF-8
// of U+FFFD.
func replaceLossySequences(b []byte) []byte {
	if bytes.IndexByte(b, 0x1A) < 0 && bytes.IndexByte(b, '?') < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		if n := lossyUTF8At(b, i); n > 0 {
			out = append(out, 0xEF, 0xBF, 0xBD)
			i += n
			continue
		}
		out = append(out, b[i])
		i++
	}
	return out
}

// lossyUTF8At is LOSSY_UTF8_RE at b[i]: the length of the first alternative
// that matches, or 0.
func lossyUTF8At(b []byte, i int) int {
	at := func(j int) int {
		if i+j < len(b) {
			return int(b[i+j])
		}
		return -1
	}
	in := func(c, lo, hi int) bool { return c >= lo && c <= hi }
	sub := func(c int) bool { return c == 0x1A }
	subQ := func(c int) bool { return c == 0x1A || c == '?' }
	subC := func(c int) bool { return c == 0x1A || in(c, 0x80, 0xBF) }
	subQC := func(c int) bool { return c == 0x1A || c == '?' || in(c, 0x80, 0xBF) }
	c0, c1, c2, c3, c4, c5 := at(0), at(1), at(2), at(3), at(4), at(5)
	switch {
	case in(c0, 0xC2, 0xDF) && sub(c1):
		return 2
	case in(c0, 0xC2, 0xC3) && c1 == '?':
		return 2
	case c0 == 0xED && in(c1, 0xA0, 0xAF) && subQ(c2) && c3 == 0xED && in(c4, 0xB0, 0xBF) && subQC(c5):
		return 6
	case c0 == 0xED && in(c1, 0xA0, 0xAF) && subQC(c2) && c3 == 0xED && in(c4, 0xB0, 0xBF) && subQ(c5):
		return 6
	case in(c0, 0xE0, 0xEF) && subQ(c1) && subC(c2):
		return 3
	case in(c0, 0xE0, 0xEF) && subC(c1) && subQ(c2):
		return 3
	case in(c0, 0xF0, 0xF4) && subQ(c1) && subC(c2) && subC(c3):
		return 4
	case in(c0, 0xF0, 0xF4) && subC(c1) && subQ(c2) && subC(c3):
		return 4
	case in(c0, 0xF0, 0xF4) && subC(c1) && subC(c2) && subQ(c3):
		return 4
	case sub(c0):
		return 1
	}
	return 0
}

// utf8RunAt is UTF8_DETECTOR_RE at text[i]: not preceded by a strict
// continuation character, one or more of (first-of-2, continuation),
// (first-of-3, 2 continuations), (first-of-4, 3 continuations), each step
// taking the first alternative that matches. It returns the end of the
// match, or i when there is none.
func utf8RunAt(text []rune, i int) int {
	if i > 0 && in(text[i-1], clContStrict) {
		return i
	}
	p := i
	for p < len(text) {
		k := classes(text[p])
		switch {
		case k&clFirstOf2 != 0 && contRun(text, p+1, 1):
			p += 2
		case k&clFirstOf3 != 0 && contRun(text, p+1, 2):
			p += 3
		case k&clFirstOf4 != 0 && contRun(text, p+1, 3):
			p += 4
		default:
			return p
		}
	}
	return p
}

func contRun(text []rune, from, n int) bool {
	if from+n > len(text) {
		return false
	}
	for _, r := range text[from : from+n] {
		if !in(r, clCont) {
			return false
		}
	}
	return true
}

func hasUTF8Run(text []rune) bool {
	for i := range text {
		if utf8RunAt(text, i) > i {
			return true
		}
	}
	return false
}

// decodeInconsistentUTF8 is ftfy's decode_inconsistent_utf8: each
// UTF8_DETECTOR_RE run shorter than the whole text that isBad is fixed on its
// own with fixEncoding.
func decodeInconsistentUTF8(text []rune) []rune {
	out := make([]rune, 0, len(text))
	for i := 0; i < len(text); {
		end := utf8RunAt(text, i)
		if end == i {
			out = append(out, text[i])
			i++
			continue
		}
		run := text[i:end]
		if len(run) < len(text) && isBad(run) {
			out = append(out, fixEncoding(run)...)
		} else {
			out = append(out, run...)
		}
		i = end
	}
	return out
}
