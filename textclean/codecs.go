package textclean

import (
	"fmt"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// singleByte is one of the single-byte encodings ftfy tries when it looks for
// UTF-8 that was decoded in the wrong encoding (chardata.CHARMAP_ENCODINGS),
// with the decoding table Python's codec of that name has.
type singleByte struct {
	name   string
	sloppy bool // ftfy's "sloppy-" codec: holes decode as Latin-1, byte 0x1A as U+FFFD
	decode [256]rune
	encode map[rune]byte // the inverse of decode, ASCII included
}

// charmapEncodings are ftfy's CHARMAP_ENCODINGS, in the order it tries them.
var charmapEncodings = []*singleByte{
	newSingleByte("latin-1", nil, false),
	newSingleByte("sloppy-windows-1252", charmap.Windows1252, true),
	newSingleByte("sloppy-windows-1251", charmap.Windows1251, true),
	newSingleByte("sloppy-windows-1250", charmap.Windows1250, true),
	newSingleByte("sloppy-windows-1253", charmap.Windows1253, true),
	newSingleByte("sloppy-windows-1254", charmap.Windows1254, true),
	newSingleByte("sloppy-windows-1257", charmap.Windows1257, true),
	newSingleByte("iso-8859-2", charmap.ISO8859_2, false),
	newSingleByte("macroman", charmap.Macintosh, false),
	newSingleByte("cp437", charmap.CodePage437, false),
}

// Indices into charmapEncodings that the fixer names.
const (
	encWindows1252 = 1
	encMacRoman    = 8
)

// newSingleByte builds Python's table for an encoding from x/text's. The two
// agree on every byte the encoding defines; where x/text answers U+FFFD (a
// byte the encoding leaves undefined, and ISO-8859-2's C1 range) Python's
// iso8859_2 and ftfy's sloppy codecs both give the code point of the same
// number, the Latin-1 reading. The sloppy codecs also read byte 0x1A as U+FFFD.
func newSingleByte(name string, cm *charmap.Charmap, sloppy bool) *singleByte {
	e := &singleByte{name: name, sloppy: sloppy, encode: make(map[rune]byte, 256)}
	for b := 0; b < 256; b++ {
		r := rune(b)
		if cm != nil {
			if d := cm.DecodeByte(byte(b)); d != utf8.RuneError {
				r = d
			}
		}
		e.decode[b] = r
	}
	if sloppy {
		e.decode[0x1A] = utf8.RuneError
	}
	for b, r := range e.decode {
		if prev, dup := e.encode[r]; dup {
			panic(fmt.Sprintf("textclean: %s decodes bytes %#x and %#x to the same character", name, prev, b))
		}
		e.encode[r] = byte(b)
	}
	return e
}

// possible reports whether every character of text can be encoded, which is
// ftfy's possible_encoding (a character class of the characters the encoding
// decodes to).
func (e *singleByte) possible(text []rune) bool {
	for _, r := range text {
		if _, ok := e.encode[r]; !ok {
			return false
		}
	}
	return true
}

// encodeRunes encodes text, which possible accepted.
func (e *singleByte) encodeRunes(text []rune) []byte {
	out := make([]byte, len(text))
	for i, r := range text {
		out[i] = e.encode[r]
	}
	return out
}

// isASCII is possible_encoding(text, "ascii").
func isASCII(text []rune) bool {
	for _, r := range text {
		if r >= 0x80 {
			return false
		}
	}
	return true
}

// decodeUTF8Strict is Python's bytes.decode("utf-8"): it fails on any
// ill-formed sequence (overlong forms, surrogates, values past U+10FFFF,
// truncation), exactly where Go's decoder reports an error.
func decodeUTF8Strict(b []byte) ([]rune, bool) {
	out := make([]rune, 0, len(b))
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return nil, false
		}
		out = append(out, r)
		i += n
	}
	return out, true
}

// decodeUTF8Variants is ftfy's "utf-8-variants" codec: standard UTF-8, plus
// CESU-8 (a UTF-16 surrogate pair written as two 3-byte sequences,
// ED A0–AF 80–BF ED B0–BF 80–BF, decodes to the character the pair encodes)
// and Java's C0 80 for U+0000. Anything else ill-formed fails, as it does in
// the Python codec.
func decodeUTF8Variants(b []byte) ([]rune, bool) {
	out := make([]rune, 0, len(b))
	for i := 0; i < len(b); {
		switch {
		case b[i] == 0xC0 && i+1 < len(b) && b[i+1] == 0x80:
			out = append(out, 0)
			i += 2
			continue
		case b[i] == 0xED && i+5 < len(b) &&
			b[i+1] >= 0xA0 && b[i+1] <= 0xAF && isCont(b[i+2]) &&
			b[i+3] == 0xED && b[i+4] >= 0xB0 && b[i+4] <= 0xBF && isCont(b[i+5]):
			r := rune(b[i+1]&0x0F)<<16 | rune(b[i+2]&0x3F)<<10 | rune(b[i+4]&0x0F)<<6 | rune(b[i+5]&0x3F)
			out = append(out, r+0x10000)
			i += 6
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return nil, false
		}
		out = append(out, r)
		i += n
	}
	return out, true
}

func isCont(c byte) bool { return c >= 0x80 && c <= 0xBF }
