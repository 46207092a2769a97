package textclean

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
	"golang.org/x/text/unicode/norm"
)

// The individual fixers of ftfy/fixes.py, on code point slices (Python
// strings are sequences of code points; lengths and regular expressions
// count them).

// ftfyEntities is ftfy's HTML_ENTITIES: "&name;" for every HTML5 name that
// ends in ";", plus the all-caps spelling of each all-lowercase name when that
// spelling is not itself an entity (by Python's html.unescape, which also
// tries prefixes), mapped to the uppercased replacement ("&EACUTE;" → "É",
// "&SZLIG;" → "SS": Python's str.upper is the full case mapping).
var ftfyEntities = buildFTFYEntities()

func buildFTFYEntities() map[string]string {
	upper := cases.Upper(language.Und)
	ents := make(map[string]string, 4096)
	for name, val := range html5Entities {
		if !strings.HasSuffix(name, ";") {
			continue
		}
		ents["&"+name] = val
		if name == strings.ToLower(name) { // entity names are ASCII
			ref := "&" + strings.ToUpper(name)
			if HTMLUnescape(ref) == ref {
				ents[ref] = upper.String(val)
			}
		}
	}
	return ents
}

// unescapeHTML is ftfy's unescape_html: HTML_ENTITY_RE, "&#?[0-9A-Za-z]{1,24};",
// replaced by the entity it names (ftfyEntities), or for "&#…;" by
// html.unescape when that consumes the whole reference; anything else stays.
func unescapeHTML(text []rune) []rune {
	var out []rune
	last, changed := 0, false
	for i := 0; i < len(text); i++ {
		if text[i] != '&' {
			continue
		}
		j := i + 1
		if j < len(text) && text[j] == '#' {
			j++
		}
		k := j
		for k < len(text) && k-j < 25 && isASCIIAlnum(text[k]) {
			k++
		}
		n := k - j
		if n < 1 || n > 24 || k >= len(text) || text[k] != ';' {
			continue
		}
		ref := string(text[i : k+1])
		repl, ok := ftfyEntities[ref]
		if !ok && strings.HasPrefix(ref, "&#") {
			if u := HTMLUnescape(ref); !strings.Contains(u, ";") {
				repl, ok = u, true
			}
		}
		if !ok {
			continue
		}
		out = append(out, text[last:i]...)
		out = append(out, []rune(repl)...)
		last, changed = k+1, true
		i = k
	}
	if !changed {
		return text
	}
	return append(out, text[last:]...)
}

func isASCIIAlnum(r rune) bool { return r >= '0' && r <= '9' || isASCIILetter(r) }

// removeTerminalEscapes is ftfy's remove_terminal_escapes: ANSI_RE,
// "\x1b\[((?:\d|;)*)([a-zA-Z])", deleted (\d is any decimal digit, as in
// Python's re on str).
func removeTerminalEscapes(text []rune) []rune {
	var out []rune
	last, changed := 0, false
	for i := 0; i+1 < len(text); i++ {
		if text[i] != 0x1B || text[i+1] != '[' {
			continue
		}
		j := i + 2
		for j < len(text) && (text[j] == ';' || unicode.IsDigit(text[j])) {
			j++
		}
		if j >= len(text) || !isASCIILetter(text[j]) {
			continue
		}
		out = append(out, text[last:i]...)
		last, changed = j+1, true
		i = j
	}
	if !changed {
		return text
	}
	return append(out, text[last:]...)
}

// uncurlQuotes is ftfy's uncurl_quotes: U+201C–U+201F become '"', U+02BC and
// U+2018–U+201B become an apostrophe.
func uncurlQuotes(text []rune) []rune {
	return mapRunes(text, func(r rune) (rune, bool) {
		switch {
		case r >= 0x201C && r <= 0x201F:
			return '"', true
		case r == 0x02BC || r >= 0x2018 && r <= 0x201B:
			return '\'', true
		}
		return r, false
	})
}

// fixLatinLigatures is ftfy's fix_latin_ligatures.
func fixLatinLigatures(text []rune) []rune {
	return translate(text, func(r rune) (string, bool) {
		if r < 0x0132 || r > 0x01F3 && r < 0xFB00 || r > 0xFB06 {
			return "", false
		}
		s, ok := ligatures[r]
		return s, ok
	})
}

// widthMap is ftfy's WIDTH_MAP: U+3000 to a space, and every character of
// U+FF01–U+FFEF whose NFKC form differs, to that form.
var widthMap = buildWidthMap()

func buildWidthMap() map[rune]string {
	m := map[rune]string{0x3000: " "}
	for r := rune(0xFF01); r < 0xFFF0; r++ {
		if s := norm.NFKC.String(string(r)); s != string(r) {
			m[r] = s
		}
	}
	return m
}

// fixCharacterWidth is ftfy's fix_character_width.
func fixCharacterWidth(text []rune) []rune {
	return translate(text, func(r rune) (string, bool) {
		if r != 0x3000 && (r < 0xFF01 || r > 0xFFEF) {
			return "", false
		}
		s, ok := widthMap[r]
		return s, ok
	})
}

// fixLineBreaks is ftfy's fix_line_breaks: CRLF, then CR, U+2028, U+2029 and
// U+0085, become LF.
func fixLineBreaks(text []rune) []rune {
	changed := false
	for _, r := range text {
		if r == '\r' || r == 0x2028 || r == 0x2029 || r == 0x85 {
			changed = true
			break
		}
	}
	if !changed {
		return text
	}
	out := make([]rune, 0, len(text))
	for i := 0; i < len(text); i++ {
		r := text[i]
		switch r {
		case '\r':
			if i+1 < len(text) && text[i+1] == '\n' {
				i++
			}
			r = '\n'
		case 0x2028, 0x2029, 0x85:
			r = '\n'
		}
		out = append(out, r)
	}
	return out
}

// fixSurrogates is ftfy's fix_surrogates: a high surrogate followed by a low
// one becomes the character the pair encodes; any other surrogate becomes
// U+FFFD. Surrogates reach the fixer only from input that held them
// (see decodeInput).
func fixSurrogates(text []rune) []rune {
	has := false
	for _, r := range text {
		if isSurrogate(r) {
			has = true
			break
		}
	}
	if !has {
		return text
	}
	out := make([]rune, 0, len(text))
	for i := 0; i < len(text); i++ {
		r := text[i]
		if r >= 0xD800 && r <= 0xDBFF && i+1 < len(text) && text[i+1] >= 0xDC00 && text[i+1] <= 0xDFFF {
			out = append(out, 0x10000+(r-0xD800)*0x400+(text[i+1]-0xDC00))
			i++
			continue
		}
		if isSurrogate(r) {
			r = 0xFFFD
		}
		out = append(out, r)
	}
	return out
}

func isSurrogate(r rune) bool { return r >= 0xD800 && r <= 0xDFFF }

// removeControlChars is ftfy's remove_control_chars.
func removeControlChars(text []rune) []rune {
	return translate(text, func(r rune) (string, bool) {
		return "", isControlToRemove(r)
	})
}

// fixC1Controls is ftfy's fix_c1_controls: each of U+0080–U+009F is read as
// its byte in Windows-1252 (sloppily: the five holes stay as they are).
func fixC1Controls(text []rune) []rune {
	w := charmapEncodings[encWindows1252]
	return mapRunes(text, func(r rune) (rune, bool) {
		if r >= 0x80 && r <= 0x9F {
			return w.decode[r], true
		}
		return r, false
	})
}

// nfc is unicodedata.normalize("NFC", text).
func nfc(text []rune) []rune {
	for _, r := range text {
		if r >= 0x300 { // below U+0300 every character is NFC and starts no composition
			s := string(text)
			if norm.NFC.IsNormalString(s) {
				return text
			}
			return []rune(norm.NFC.String(s))
		}
	}
	return text
}

// mapRunes replaces characters one for one; it returns text itself when f
// changes nothing.
func mapRunes(text []rune, f func(rune) (rune, bool)) []rune {
	var out []rune
	for i, r := range text {
		if m, ok := f(r); ok && m != r {
			if out == nil {
				out = append(make([]rune, 0, len(text)), text[:i]...)
			}
			out = append(out, m)
		} else if out != nil {
			out = append(out, r)
		}
	}
	if out == nil {
		return text
	}
	return out
}

// translate is str.translate: characters for which f answers true are
// replaced by its string (possibly empty); it returns text itself when f
// changes nothing.
func translate(text []rune, f func(rune) (string, bool)) []rune {
	var out []rune
	for i, r := range text {
		if s, ok := f(r); ok {
			if out == nil {
				out = append(make([]rune, 0, len(text)), text[:i]...)
			}
			for _, c := range s {
				out = append(out, c)
			}
		} else if out != nil {
			out = append(out, r)
		}
	}
	if out == nil {
		return text
	}
	return out
}
