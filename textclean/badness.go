package textclean

import "unicode"

// isBad is ftfy's badness.is_bad: whether BADNESS_RE matches anywhere in
// text, that is whether some juxtaposition of characters that occurs in
// mojibake far more often than in real text is present. Each alternative of
// the regular expression is one case of badAt, in the expression's order.
func isBad(text []rune) bool {
	for i := range text {
		if badAt(text, i) {
			return true
		}
	}
	return false
}

// Unions of classes that the alternatives use.
const (
	grpBadness  = clCommon | clC1 | clBad | clLaw | clCurrency | clStartPunct | clEndPunct | clNumeric | clKaomoji | clUpperAccented | clLowerAccented | clUpperCommon | clLowerCommon | clBox
	grpAfterBad = clLowerAccented | clUpperAccented | clBox | clStartPunct | clEndPunct | clCurrency | clNumeric | clLaw
	grpCyrGreek = clC1 | clBad | clStartPunct | clEndPunct | clCurrency
	grpArabic   = clCommon | clCurrency | clBad | clNumeric | clStartPunct
)

// badAt reports whether one of BADNESS_RE's alternatives matches at text[i].
func badAt(t []rune, i int) bool {
	c := t[i]
	k := classes(c)
	at := func(j int) rune { // the character at i+j, or -1 past the end
		if i+j < len(t) {
			return t[i+j]
		}
		return -1
	}
	n1, n2 := at(1), at(2)
	k1 := classes(n1)

	// Every alternative starts with a character of some badness class, an
	// ASCII character or whitespace; and those that start with an ASCII
	// character or whitespace go on with a classed character or whitespace.
	// This rejects most positions (all of CJK text, say) at once.
	if k&grpBadness == 0 {
		if c >= 0x80 && !isPySpace(c) {
			return false
		}
		if n1 < 0 || k1&grpBadness == 0 && !isPySpace(n1) {
			return false
		}
	}

	return badByClass(c, k, n1, k1, n2) || badByCharacter(i, at)
}

// badByClass reports whether one of BADNESS_RE's alternatives made of
// character classes (and \s, \w, [a-z]) matches at c, followed by n1 (of
// classes k1) and n2.
func badByClass(c rune, k uint32, n1 rune, k1 uint32, n2 rune) bool {
	// [c1]
	if k&clC1 != 0 {
		return true
	}
	// [bad lower_accented upper_accented box start_punctuation end_punctuation currency numeric law] [bad]
	if k&(clBad|grpAfterBad) != 0 && k1&clBad != 0 {
		return true
	}
	// [a-zA-Z] [lower_common upper_common] [bad]
	if isASCIILetter(c) && k1&(clLowerCommon|clUpperCommon) != 0 && in(n2, clBad) {
		return true
	}
	// [bad] [lower_accented upper_accented box start_punctuation end_punctuation currency numeric law]
	if k&clBad != 0 && k1&grpAfterBad != 0 {
		return true
	}
	// [lower_accented lower_common box end_punctuation currency numeric] [upper_accented]
	if k&(clLowerAccented|clLowerCommon|clBox|clEndPunct|clCurrency|clNumeric) != 0 && k1&clUpperAccented != 0 {
		return true
	}
	// [box end_punctuation currency numeric] [lower_accented]
	if k&(clBox|clEndPunct|clCurrency|clNumeric) != 0 && k1&clLowerAccented != 0 {
		return true
	}
	// [lower_accented box end_punctuation] [currency]
	if k&(clLowerAccented|clBox|clEndPunct) != 0 && k1&clCurrency != 0 {
		return true
	}
	// \s [upper_accented] [currency]
	if isPySpace(c) && k1&clUpperAccented != 0 && in(n2, clCurrency) {
		return true
	}
	// [upper_accented box] [numeric law]
	if k&(clUpperAccented|clBox) != 0 && k1&(clNumeric|clLaw) != 0 {
		return true
	}
	// [lower_accented upper_accented box currency end_punctuation] [start_punctuation] [numeric]
	if k&(clLowerAccented|clUpperAccented|clBox|clCurrency|clEndPunct) != 0 && k1&clStartPunct != 0 && in(n2, clNumeric) {
		return true
	}
	// [lower_accented upper_accented currency numeric box law] [end_punctuation] [start_punctuation]
	if k&(clLowerAccented|clUpperAccented|clCurrency|clNumeric|clBox|clLaw) != 0 && k1&clEndPunct != 0 && in(n2, clStartPunct) {
		return true
	}
	// [currency numeric box] [start_punctuation]
	if k&(clCurrency|clNumeric|clBox) != 0 && k1&clStartPunct != 0 {
		return true
	}
	// [a-z] [upper_accented] [start_punctuation currency]
	if c >= 'a' && c <= 'z' && k1&clUpperAccented != 0 && in(n2, clStartPunct|clCurrency) {
		return true
	}
	// [box] [kaomoji]
	if k&clBox != 0 && k1&clKaomoji != 0 {
		return true
	}
	// [lower_accented upper_accented currency numeric start_punctuation end_punctuation law] [box]
	if k&(clLowerAccented|clUpperAccented|clCurrency|clNumeric|clStartPunct|clEndPunct|clLaw) != 0 && k1&clBox != 0 {
		return true
	}
	// [box] [end_punctuation]
	if k&clBox != 0 && k1&clEndPunct != 0 {
		return true
	}
	// [lower_accented upper_accented] [start_punctuation end_punctuation] \w
	if k&(clLowerAccented|clUpperAccented) != 0 && k1&(clStartPunct|clEndPunct) != 0 && n2 >= 0 && isPyWord(n2) {
		return true
	}
	return false
}

// badByCharacter reports whether one of BADNESS_RE's alternatives that
// name characters (the mojibake of particular code pages) matches at text
// position i; at(j) is the character at i+j, or -1 past the end.
func badByCharacter(i int, at func(j int) rune) bool {
	c, n1, n2 := at(0), at(1), at(2)
	k, k1 := classes(c), classes(n1)
	// [Œœ][^A-Za-z]: the ligature œ not followed by an unaccented Latin letter
	if (c == 'Œ' || c == 'œ') && n1 >= 0 && !isASCIILetter(n1) {
		return true
	}
	// [upper_accented]°
	if k&clUpperAccented != 0 && n1 == '°' {
		return true
	}
	// [ÂÃÎÐ][€œŠš¢£Ÿž\xa0\xad®©°·»{start_punctuation}{end_punctuation}–—´]
	if (c == 'Â' || c == 'Ã' || c == 'Î' || c == 'Ð') && n1 >= 0 &&
		(isAnyOf(n1, "€œŠš¢£Ÿž\u00a0\u00ad®©°·»–—´") || k1&(clStartPunct|clEndPunct) != 0) {
		return true
	}
	// × [²³]
	if c == '×' && (n1 == '²' || n1 == '³') {
		return true
	}
	// [ØÙ] [common currency bad numeric start_punctuation ŸŠ®°µ»] twice: Windows-1252 mojibake of Arabic
	if isArabicMojibakePair(c, n1) && isArabicMojibakePair(n2, at(3)) {
		return true
	}
	// à[²µ¹¼½¾]: Windows-1252 mojibake that starts some South Asian scripts
	if c == 'à' && n1 >= 0 && isAnyOf(n1, "²µ¹¼½¾") {
		return true
	}
	// MacRoman mojibake: √[±∂†≠®™´≤≥¥µø], ≈[°¢], ‚Ä[ìîïòôúùû†°¢π], ‚[âó][àä°ê]
	if c == '√' && n1 >= 0 && isAnyOf(n1, "±∂†≠®™´≤≥¥µø") {
		return true
	}
	if c == '≈' && (n1 == '°' || n1 == '¢') {
		return true
	}
	if c == '‚' && n1 == 'Ä' && n2 >= 0 && isAnyOf(n2, "ìîïòôúùû†°¢π") {
		return true
	}
	if c == '‚' && (n1 == 'â' || n1 == 'ó') && n2 >= 0 && isAnyOf(n2, "àä°ê") {
		return true
	}
	// вЂ: Windows-1251 mojibake of the U+2000 range
	if c == 'в' && n1 == 'Ђ' {
		return true
	}
	// [ВГРС][{c1}{bad}{start_punctuation}{end_punctuation}{currency}°µ][ВГРС]
	if isAnyOf(c, "ВГРС") && n1 >= 0 && (k1&grpCyrGreek != 0 || n1 == '°' || n1 == 'µ') && n2 >= 0 && isAnyOf(n2, "ВГРС") {
		return true
	}
	// ГўВЂВ.[A-Za-z ]
	if c == 'Г' && n1 == 'ў' && n2 == 'В' && at(3) == 'Ђ' && at(4) == 'В' && at(5) >= 0 && at(5) != '\n' {
		if n6 := at(6); isASCIILetter(n6) || n6 == ' ' {
			return true
		}
	}
	// Ã[\xa0¡]
	if c == 'Ã' && (n1 == 0xA0 || n1 == '¡') {
		return true
	}
	// [a-z]\s?[ÃÂ][ ]
	if c >= 'a' && c <= 'z' {
		if (n1 == 'Ã' || n1 == 'Â') && n2 == ' ' {
			return true
		}
		if n1 >= 0 && isPySpace(n1) && (n2 == 'Ã' || n2 == 'Â') && at(3) == ' ' {
			return true
		}
	}
	// ^[ÃÂ][ ]
	if i == 0 && (c == 'Ã' || c == 'Â') && n1 == ' ' {
		return true
	}
	// [a-z.,?!{end_punctuation}] Â [ {start_punctuation}{end_punctuation}]
	if (c >= 'a' && c <= 'z' || c == '.' || c == ',' || c == '?' || c == '!' || k&clEndPunct != 0) &&
		n1 == 'Â' && (n2 == ' ' || in(n2, clStartPunct|clEndPunct)) {
		return true
	}
	// β€[™\xa0Ά\xad®°]: Windows-1253 mojibake of the U+2000 range
	if c == 'β' && n1 == '€' && n2 >= 0 && isAnyOf(n2, "™\u00a0Ά\u00ad®°") {
		return true
	}
	// [ΒΓΞΟ][{c1}{bad}{start_punctuation}{end_punctuation}{currency}°][ΒΓΞΟ]
	if isAnyOf(c, "ΒΓΞΟ") && n1 >= 0 && (k1&grpCyrGreek != 0 || n1 == '°') && n2 >= 0 && isAnyOf(n2, "ΒΓΞΟ") {
		return true
	}
	// ā€: Windows-1257 mojibake of the U+2000 range
	if c == 'ā' && n1 == '€' {
		return true
	}
	return false
}

func isArabicMojibakePair(a, b rune) bool {
	return (a == 'Ø' || a == 'Ù') && b >= 0 && (in(b, grpArabic) || isAnyOf(b, "ŸŠ®°µ»"))
}

func isAnyOf(r rune, set string) bool {
	for _, s := range set {
		if r == s {
			return true
		}
	}
	return false
}

func isASCIILetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// isPySpace is Python's str.isspace, which is also what the re module's \s
// matches in a str pattern: Unicode White_Space plus U+001C–U+001F.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || r >= 0x1C && r <= 0x1F
}

// isPyWord is the re module's \w for str patterns: letters, numbers (str.isalnum)
// and the underscore.
func isPyWord(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
}
