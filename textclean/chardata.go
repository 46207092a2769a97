package textclean

// Character classes of ftfy 6.3.1: the mojibake categories of ftfy/badness.py
// (MOJIBAKE_CATEGORIES) and the UTF-8 clues of ftfy/chardata.py (UTF8_CLUES).
// Each class is a list of code points and inclusive ranges; a character's
// classes are bits of one mask (charClasses), looked up once per character.

// Class bits.
const (
	clCommon        uint32 = 1 << iota // "common"
	clC1                               // "c1": U+0080–U+009F
	clBad                              // "bad"
	clLaw                              // "law"
	clCurrency                         // "currency"
	clStartPunct                       // "start_punctuation"
	clEndPunct                         // "end_punctuation"
	clNumeric                          // "numeric"
	clKaomoji                          // "kaomoji"
	clUpperAccented                    // "upper_accented"
	clLowerAccented                    // "lower_accented"
	clUpperCommon                      // "upper_common"
	clLowerCommon                      // "lower_common"
	clBox                              // "box"
	clFirstOf2                         // UTF8_CLUES "utf8_first_of_2"
	clFirstOf3                         // "utf8_first_of_3"
	clFirstOf4                         // "utf8_first_of_4"
	clCont                             // "utf8_continuation" (a space stands in for U+00A0)
	clContStrict                       // "utf8_continuation_strict"
)

// span is an inclusive code point range; a single character has lo == hi.
type span struct{ lo, hi rune }

func one(r rune) span { return span{r, r} }

var classSpans = map[uint32][]span{
	clCommon: {
		one(0x00A0), // NO-BREAK SPACE
		one(0x00AD), // SOFT HYPHEN
		one(0x00B7), // MIDDLE DOT
		one(0x00B4), // ACUTE ACCENT
		one(0x2013), // EN DASH
		one(0x2014), // EM DASH
		one(0x2015), // HORIZONTAL BAR
		one(0x2026), // HORIZONTAL ELLIPSIS
		one(0x2019), // RIGHT SINGLE QUOTATION MARK
	},
	clC1: {{0x0080, 0x009F}},
	clBad: {
		one(0x00A6), // BROKEN BAR
		one(0x00A4), // CURRENCY SIGN
		one(0x00A8), // DIAERESIS
		one(0x00AC), // NOT SIGN
		one(0x00AF), // MACRON
		one(0x00B8), // CEDILLA
		one(0x0192), // LATIN SMALL LETTER F WITH HOOK
		one(0x02C6), // MODIFIER LETTER CIRCUMFLEX ACCENT
		one(0x02C7), // CARON
		one(0x02D8), // BREVE
		one(0x02DB), // OGONEK
		one(0x02DC), // SMALL TILDE
		one(0x2020), // DAGGER
		one(0x2021), // DOUBLE DAGGER
		one(0x2030), // PER MILLE SIGN
		one(0x2310), // REVERSED NOT SIGN
		one(0x25CA), // LOZENGE
		one(0xFFFD), // REPLACEMENT CHARACTER
		one(0x00AA), // FEMININE ORDINAL INDICATOR
		one(0x00BA), // MASCULINE ORDINAL INDICATOR
	},
	clLaw: {
		one(0x00B6), // PILCROW SIGN
		one(0x00A7), // SECTION SIGN
	},
	clCurrency: {
		one(0x00A2), // CENT SIGN
		one(0x00A3), // POUND SIGN
		one(0x00A5), // YEN SIGN
		one(0x20A7), // PESETA SIGN
		one(0x20AC), // EURO SIGN
	},
	clStartPunct: {
		one(0x00A1), // INVERTED EXCLAMATION MARK
		one(0x00AB), // LEFT-POINTING DOUBLE ANGLE QUOTATION MARK
		one(0x00BF), // INVERTED QUESTION MARK
		one(0x00A9), // COPYRIGHT SIGN
		one(0x0384), // GREEK TONOS
		one(0x0385), // GREEK DIALYTIKA TONOS
		one(0x2018), // LEFT SINGLE QUOTATION MARK
		one(0x201A), // SINGLE LOW-9 QUOTATION MARK
		one(0x201C), // LEFT DOUBLE QUOTATION MARK
		one(0x201E), // DOUBLE LOW-9 QUOTATION MARK
		one(0x2022), // BULLET
		one(0x2039), // SINGLE LEFT-POINTING ANGLE QUOTATION MARK
		one(0xF8FF), // private use: the Apple logo in MacRoman
	},
	clEndPunct: {
		one(0x00AE), // REGISTERED SIGN
		one(0x00BB), // RIGHT-POINTING DOUBLE ANGLE QUOTATION MARK
		one(0x02DD), // DOUBLE ACUTE ACCENT
		one(0x201D), // RIGHT DOUBLE QUOTATION MARK
		one(0x203A), // SINGLE RIGHT-POINTING ANGLE QUOTATION MARK
		one(0x2122), // TRADE MARK SIGN
	},
	clNumeric: {
		one(0x00B2), // SUPERSCRIPT TWO
		one(0x00B3), // SUPERSCRIPT THREE
		one(0x00B9), // SUPERSCRIPT ONE
		one(0x00B1), // PLUS-MINUS SIGN
		one(0x00BC), // VULGAR FRACTION ONE QUARTER
		one(0x00BD), // VULGAR FRACTION ONE HALF
		one(0x00BE), // VULGAR FRACTION THREE QUARTERS
		one(0x00D7), // MULTIPLICATION SIGN
		one(0x00B5), // MICRO SIGN
		one(0x00F7), // DIVISION SIGN
		one(0x2044), // FRACTION SLASH
		one(0x2202), // PARTIAL DIFFERENTIAL
		one(0x2206), // INCREMENT
		one(0x220F), // N-ARY PRODUCT
		one(0x2211), // N-ARY SUMMATION
		one(0x221A), // SQUARE ROOT
		one(0x221E), // INFINITY
		one(0x2229), // INTERSECTION
		one(0x222B), // INTEGRAL
		one(0x2248), // ALMOST EQUAL TO
		one(0x2260), // NOT EQUAL TO
		one(0x2261), // IDENTICAL TO
		one(0x2264), // LESS-THAN OR EQUAL TO
		one(0x2265), // GREATER-THAN OR EQUAL TO
		one(0x2116), // NUMERO SIGN
	},
	clKaomoji: {
		{0x00D2, 0x00D6}, // Ò-Ö
		{0x00D9, 0x00DC}, // Ù-Ü
		{0x00F2, 0x00F6}, // ò-ö
		{0x00F8, 0x00FC}, // ø-ü
		one(0x0150),      // LATIN CAPITAL LETTER O WITH DOUBLE ACUTE
		one(0x014C),      // LATIN CAPITAL LETTER O WITH MACRON
		one(0x016A),      // LATIN CAPITAL LETTER U WITH MACRON
		one(0x0172),      // LATIN CAPITAL LETTER U WITH OGONEK
		one(0x00B0),      // DEGREE SIGN
	},
	clUpperAccented: {
		{0x00C0, 0x00D1}, // À-Ñ
		one(0x00D8), one(0x00DC), one(0x00DD), one(0x0102), one(0x0100), one(0x0104),
		one(0x0106), one(0x010C), one(0x010E), one(0x0110), one(0x0118), one(0x011A),
		one(0x0112), one(0x0116), one(0x011E), one(0x0122), one(0x0130), one(0x012A),
		one(0x0136), one(0x0139), one(0x013D), one(0x0141), one(0x013B), one(0x0143),
		one(0x0147), one(0x0145), one(0x0152), one(0x0158), one(0x015A), one(0x015E),
		one(0x0160), one(0x0162), one(0x0164), one(0x016E), one(0x0170), one(0x0178),
		one(0x0179), one(0x017B), one(0x017D), one(0x0490),
	},
	clLowerAccented: {
		one(0x00DF),      // ß
		{0x00E0, 0x00F1}, // à-ñ
		one(0x0103), one(0x0105), one(0x0101), one(0x0107), one(0x010D), one(0x010F),
		one(0x0111), one(0x0119), one(0x011B), one(0x0113), one(0x0117), one(0x011F),
		one(0x0123), one(0x012F), one(0x012B), one(0x0137), one(0x013A), one(0x013E),
		one(0x0142), one(0x013C), one(0x0153), one(0x0155), one(0x015B), one(0x015F),
		one(0x0161), one(0x0165), one(0x00FC), one(0x017A), one(0x017C), one(0x017E),
		one(0x0491), one(0xFB01), one(0xFB02),
	},
	clUpperCommon: {
		one(0x00DE),      // Þ
		{0x0391, 0x03A9}, // Α-Ω
		one(0x0386), one(0x0388), one(0x0389), one(0x038A), one(0x038C), one(0x038E),
		one(0x038F), one(0x03AA), one(0x03AB),
		{0x0401, 0x042F}, // Ё-Я
	},
	clLowerCommon: {
		{0x03B1, 0x03C9}, // α-ω
		one(0x03AC), one(0x03AD), one(0x03AE), one(0x03AF), one(0x03B0),
		{0x0430, 0x045F}, // а-џ
	},
	clBox: {
		one(0x2502), one(0x250C), one(0x2510), one(0x2518), one(0x251C), one(0x2524),
		one(0x252C), one(0x253C),
		{0x2550, 0x256C}, // ═-╬
		one(0x2580), one(0x2584), one(0x2588), one(0x258C), one(0x2590), one(0x2591),
		one(0x2592), one(0x2593),
	},
	// UTF8_CLUES: characters that a Latin-1-like encoding gives for a UTF-8
	// lead byte C2–DF, E0–EF, F0/F3, and for a continuation byte 80–BF.
	clFirstOf2: {
		one(0x0102), one(0x00C2), one(0x00C4), one(0x0100), one(0x00C5), one(0x00C3),
		one(0x00C6), one(0x0106), one(0x010C), one(0x00C7), one(0x010E), one(0x0110),
		one(0x00C9), one(0x011A), one(0x00CA), one(0x00CB), one(0x0116), one(0x00C8),
		one(0x0112), one(0x0118), one(0x00D0), one(0x011E), one(0x0122), one(0x00CD),
		one(0x00CE), one(0x00CF), one(0x0130), one(0x00CC), one(0x012A), one(0x0136),
		one(0x0139), one(0x013B), one(0x0141), one(0x0143), one(0x0147), one(0x0145),
		one(0x00D1), one(0x00D3), one(0x00D4), one(0x00D6), one(0x0150), one(0x00D2),
		one(0x014C), one(0x00D8), one(0x00D5), one(0x0158), one(0x015A), one(0x0160),
		one(0x015E), one(0x0162), one(0x00DE), one(0x00DA), one(0x00DB), one(0x00DC),
		one(0x0170), one(0x00D9), one(0x016A), one(0x0172), one(0x016E), one(0x00DD),
		one(0x0179), one(0x017D), one(0x017B), one(0x00DF), one(0x00D7),
		{0x0392, 0x03A1}, // Greek capitals Β-Ρ (windows-1253 C2–D1)
		{0x03A3, 0x03AF}, // Σ-ί (windows-1253 D3–DF)
		{0x0412, 0x042F}, // Cyrillic capitals В-Я (windows-1251 C2–DF)
	},
	clFirstOf3: {
		one(0x00E1), one(0x0103), one(0x00E2), one(0x00E4), one(0x00E0), one(0x0101),
		one(0x0105), one(0x00E5), one(0x00E3), one(0x00E6), one(0x0107), one(0x010D),
		one(0x00E7), one(0x010F), one(0x00E9), one(0x011B), one(0x00EA), one(0x00EB),
		one(0x0117), one(0x00E8), one(0x0113), one(0x0119), one(0x0123), one(0x00ED),
		one(0x00EE), one(0x00EF), one(0x00EC), one(0x012B), one(0x012F), one(0x0137),
		one(0x013A), one(0x013C), one(0x0155), one(0x017A),
		{0x03B0, 0x03BF}, // ΰ, α-ο (windows-1253 E0–EF)
		{0x0430, 0x043F}, // а-п (windows-1251 E0–EF)
	},
	clFirstOf4: {
		one(0x0111), one(0x00F0), one(0x011F), one(0x00F3), one(0x0161), one(0x03C0),
		one(0x03C3), one(0x0440), one(0x0443),
	},
	clCont: append([]span{one(0x0020)}, append(contStrictSpans(),
		one(0x2013), one(0x2014), one(0x2015), one(0x2018), one(0x2019), one(0x201A),
		one(0x201C), one(0x201D), one(0x201E), one(0x2022), one(0x2026))...),
	clContStrict: contStrictSpans(),
}

// contStrictSpans is "utf8_continuation_strict"; "utf8_continuation" adds the
// space, dashes, quotation marks, bullet and ellipsis to it.
func contStrictSpans() []span {
	return []span{
		{0x0080, 0x00BF},
		one(0x0104), one(0x00C6), one(0x013D), one(0x0141), one(0x00D8), one(0x0156),
		one(0x015A), one(0x0160), one(0x015E), one(0x0164), one(0x0178), one(0x0179),
		one(0x017D), one(0x017B), one(0x0152), one(0x0105), one(0x00E6), one(0x0192),
		one(0x013E), one(0x0142), one(0x00F8), one(0x0157), one(0x015B), one(0x0161),
		one(0x015F), one(0x0165), one(0x017A), one(0x017E), one(0x017C), one(0x0153),
		one(0x02C6), one(0x02C7), one(0x02D8), one(0x02DB), one(0x02DC), one(0x02DD),
		one(0x0384), one(0x0385), one(0x0386), one(0x0388), one(0x0389), one(0x038A),
		one(0x038C), one(0x038E), one(0x038F),
		{0x0401, 0x040C}, one(0x040E), one(0x040F), // Ё-Ќ, Ў, Џ
		{0x0451, 0x045C}, one(0x045E), one(0x045F), // ё-ќ, ў, џ
		one(0x0490), one(0x0491),
		one(0x2020), one(0x2021), one(0x2030), one(0x2039), one(0x203A), one(0x20AC),
		one(0x2116), one(0x2122),
	}
}

// classTableSize covers every class member below U+2600 in an array; the few
// above it (U+F8FF, U+FB01, U+FB02, U+FFFD) go in a map.
const classTableSize = 0x2600

var (
	classTable [classTableSize]uint32
	classHigh  = map[rune]uint32{}
)

func init() {
	for bit, spans := range classSpans {
		for _, s := range spans {
			for r := s.lo; r <= s.hi; r++ {
				if r < classTableSize {
					classTable[r] |= bit
				} else {
					classHigh[r] |= bit
				}
			}
		}
	}
}

// classes returns the class bits of r.
func classes(r rune) uint32 {
	if r >= 0 && r < classTableSize {
		return classTable[r]
	}
	if r < 0xF8FF {
		return 0
	}
	return classHigh[r]
}

func in(r rune, mask uint32) bool { return classes(r)&mask != 0 }

// LIGATURES of ftfy/chardata.py: Latin ligatures and legacy digraphs, taken apart.
var ligatures = map[rune]string{
	0x0132: "IJ", 0x0133: "ij", 0x0149: "\u02bcn",
	0x01F1: "DZ", 0x01F2: "Dz", 0x01F3: "dz",
	0x01C4: "D\u017d", 0x01C5: "D\u017e", 0x01C6: "d\u017e",
	0x01C7: "LJ", 0x01C8: "Lj", 0x01C9: "lj",
	0x01CA: "NJ", 0x01CB: "Nj", 0x01CC: "nj",
	0xFB00: "ff", 0xFB01: "fi", 0xFB02: "fl", 0xFB03: "ffi", 0xFB04: "ffl",
	0xFB05: "\u017ft", 0xFB06: "st",
}

// isControlToRemove is ftfy's CONTROL_CHARS: U+0000–U+0008, U+000B,
// U+000E–U+001F, U+007F, U+206A–U+206F, U+FEFF and U+FFF9–U+FFFC.
func isControlToRemove(r rune) bool {
	switch {
	case r <= 0x08, r == 0x0B, r >= 0x0E && r <= 0x1F, r == 0x7F:
		return true
	case r >= 0x206A && r <= 0x206F, r == 0xFEFF, r >= 0xFFF9 && r <= 0xFFFC:
		return true
	}
	return false
}
