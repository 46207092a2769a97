package textclean

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestFTFYCases compares FixText and Wan with ftfy 6.3.1 and Wan's clean on
// testdata/ftfy_cases.json: 2000 strings, half of them mojibake made by
// decoding UTF-8 with each single-byte codec ftfy knows (with spaces for
// U+00A0, U+FFFD for lost bytes, '?' for a byte), the rest random runs of
// the characters the heuristics look at, control characters and entities.
func TestFTFYCases(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "ftfy_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Changed int `json:"changed_by_fix_text"`
		Cases   []struct {
			Raw     string `json:"raw"`
			FixText string `json:"fix_text"`
			Wan     string `json:"wan"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) != 2000 {
		t.Fatalf("%d cases, want 2000", len(file.Cases))
	}
	changed, failed := 0, 0
	for _, c := range file.Cases {
		got := FixText(c.Raw)
		if got != c.FixText {
			failed++
			t.Errorf("FixText(%+q)\n got %+q\nwant %+q", c.Raw, got, c.FixText)
		}
		if got != c.Raw {
			changed++
		}
		if w := Wan(c.Raw); w != c.Wan {
			failed++
			t.Errorf("Wan(%+q)\n got %+q\nwant %+q", c.Raw, w, c.Wan)
		}
		if failed > 20 {
			t.Fatal("too many failures")
		}
	}
	if changed != file.Changed {
		t.Errorf("FixText changed %d strings, ftfy %d", changed, file.Changed)
	}
}

// TestFixTextExamples: ftfy's documented behaviour, one fixer at a time.
func TestFixTextExamples(t *testing.T) {
	cases := []struct{ in, want string }{
		{"âœ” No problems", "✔ No problems"},                      // UTF-8 read as Windows-1252
		{"&macr;\\_(ã\u0083\u0084)_/&macr;", "¯\\_(ツ)_/¯"},        // entities, then Latin-1 mojibake
		{"ＬＯＵＤ　ＮＯＩＳＥＳ", "LOUD NOISES"},                            // character width
		{"Ｕﾀｰﾝ", "Uターン"},                                          // halfwidth katakana
		{"sÃ³", "só"},                                             // encode latin-1, decode utf-8
		{"voilÃ le travail", "voilà le travail"},                  // restore_byte_a0
		{"Ã la mode", "à la mode"},                                // "à" as a word keeps its space
		{"â€œ like this â€\ufffd", "\" like this \ufffd"},         // replace_lossy_sequences, then quotes
		{"P&EACUTE;REZ", "PÉREZ"},                                 // all-caps entities
		{"BUNDESSTRA&SZLIG;E", "BUNDESSTRASSE"},                   // full case mapping
		{"&ntilde; &Ntilde; &NTILDE; &nTILDE;", "ñ Ñ Ñ &nTILDE;"}, // only exact or all-caps names
		{"this&not that", "this&not that"},                        // no semicolon: left alone
		{"<b>&amp;</b>", "<b>&amp;</b>"},                          // "<": HTML left alone
		{"a &amp; b\n<p>\n&amp;", "a & b\n<p>\n&amp;"},            // ...from that line on
		{"\x1b[36;44mI'm blue\x1b[0m", "I'm blue"},                // terminal escapes
		{"\u201chere\u2019s a test\u201d", "\"here's a test\""},   // quotes
		{"ﬂuﬃeﬆ", "fluffiest"},                                    // ligatures
		{"a\r\nb\rc\u2028d\u2029e", "a\nb\nc\nd\ne"},              // line breaks
		{"a\x00b\x0bc\x7fd\ufeffe\ufffcf", "abcdef"},              // control characters
		{"next\u0085line", "next…line"},                           // lone C1 read as Windows-1252
		{"e\u0301", "é"},                                          // NFC
		{"caf\xed\xa0\xbd\xed\xb8\x80", "caf😀"},                   // surrogate pair (WTF-8 input)
		{"a\xed\xa0\xbdb", "a\ufffdb"},                            // lone surrogate
		{"\xff\xfe", "\ufffd\ufffd"},                              // other ill-formed bytes
		{"", ""},
	}
	for _, c := range cases {
		if got := FixText(c.in); got != c.want {
			t.Errorf("FixText(%+q) = %+q, want %+q", c.in, got, c.want)
		}
	}
}

// TestHTMLUnescape: Python's html.unescape, edge by edge.
func TestHTMLUnescape(t *testing.T) {
	cases := []struct{ in, want string }{
		{"no entities", "no entities"},
		{"&amp; &lt; &gt; &quot; &#39;", "& < > \" '"},
		{"&amp chips", "& chips"},               // legacy name without ";"
		{"&copy 2024", "© 2024"},                //
		{"&notanentity;", "¬anentity;"},         // longest prefix that is a name
		{"&notin;", "∉"},                        // exact name wins over the prefix
		{"&AMP; &QUOT;", "& \""},                //
		{"&#0;", "\ufffd"},                      // NUL
		{"&#13;", "\r"},                         //
		{"&#128;&#x81;&#x9F;", "€\u0081Ÿ"},      // C1 as Windows-1252
		{"&#xD800;", "\ufffd"},                  // surrogate
		{"&#x110000;", "\ufffd"},                // past U+10FFFF
		{"&#99999999999999999999;", "\ufffd"},   // far past
		{"&#1;&#11;&#x7F;&#xFDD0;&#xFFFE;", ""}, // invalid code points vanish
		{"&#65&#x42;C", "ABC"},                  // ";" optional
		{"&#;&#x;&#xg;", "&#;&#x;&#xg;"},        // no digits: no reference
		{"&#X41;", "A"},                         //
		{"& amp;", "& amp;"},                    // space ends a name
		{"&;", "&;"},                            //
		{"&abcdefghijklmnopqrstuvwxyzabcdefgh;", "&abcdefghijklmnopqrstuvwxyzabcdefgh;"}, // 32-character limit
		{"&ampé;", "&é;"},      // a prefix match keeps the rest
		{"&nGt;", "≫⃒"},        // two code points
		{"&&amp;", "&&"},       //
		{"&amp;amp;", "&amp;"}, // one pass
		{"&zz", "&zz"},
		{"&", "&"},
	}
	for _, c := range cases {
		if got := HTMLUnescape(c.in); got != c.want {
			t.Errorf("HTMLUnescape(%+q) = %+q, want %+q", c.in, got, c.want)
		}
	}
}

// TestEntityTable checks the data table: Python's html.entities.html5 has
// 2231 names, 106 of them legacy names without ";" that all also exist with
// it; ftfy derives 3501 references from it.
func TestEntityTable(t *testing.T) {
	if len(html5Entities) != 2231 {
		t.Errorf("%d entity names, want 2231", len(html5Entities))
	}
	legacy := 0
	for name, v := range html5Entities {
		if v == "" || !utf8.ValidString(v) || utf8.RuneCountInString(v) > 2 {
			t.Errorf("entity %q has value %+q", name, v)
		}
		if !strings.HasSuffix(name, ";") {
			legacy++
			if html5Entities[name+";"] != v {
				t.Errorf("legacy entity %q has no %q twin", name, name+";")
			}
		}
	}
	if legacy != 106 {
		t.Errorf("%d legacy names, want 106", legacy)
	}
	if len(ftfyEntities) != 3501 {
		t.Errorf("%d ftfy references, want 3501", len(ftfyEntities))
	}
}

// TestCodecs checks the single-byte tables against Python's codecs on the
// bytes where x/text and Python differ or that ftfy relies on.
func TestCodecs(t *testing.T) {
	byName := map[string]*singleByte{}
	for _, e := range charmapEncodings {
		byName[e.name] = e
	}
	if len(byName) != 10 {
		t.Fatalf("%d encodings, want ftfy's 10", len(byName))
	}
	cases := []struct {
		enc  string
		b    byte
		want rune
	}{
		{"latin-1", 0x85, 0x85},
		{"latin-1", 0x1A, 0x1A},
		{"sloppy-windows-1252", 0x80, '€'},
		{"sloppy-windows-1252", 0x81, 0x81}, // hole: Latin-1
		{"sloppy-windows-1252", 0x1A, 0xFFFD},
		{"sloppy-windows-1251", 0x98, 0x98}, // hole
		{"sloppy-windows-1251", 0xC0, 'А'},
		{"sloppy-windows-1253", 0xAA, 0xAA}, // hole
		{"sloppy-windows-1253", 0xD2, 0xD2}, // hole
		{"sloppy-windows-1257", 0xA1, 0xA1}, // hole
		{"iso-8859-2", 0x85, 0x85},          // C1, as in Python
		{"iso-8859-2", 0xA1, 'Ą'},
		{"iso-8859-2", 0x1A, 0x1A},
		{"macroman", 0xDB, '€'},
		{"macroman", 0xF0, 0xF8FF},
		{"cp437", 0xB0, '░'},
		{"cp437", 0x1A, 0x1A},
	}
	for _, c := range cases {
		if got := byName[c.enc].decode[c.b]; got != c.want {
			t.Errorf("%s byte %#x decodes to %U, want %U", c.enc, c.b, got, c.want)
		}
	}
	if byName["sloppy-windows-1252"].possible([]rune{0x1A}) {
		t.Errorf("sloppy codecs must not encode U+001A")
	}
	if !byName["latin-1"].possible([]rune("\x1aé\u0085")) {
		t.Errorf("latin-1 must encode U+001A, é, U+0085")
	}
	// utf-8-variants: CESU-8 pairs and Java's NUL; strict UTF-8 rejects both.
	variants := []struct {
		in   []byte
		want string
		ok   bool
	}{
		{[]byte("\xed\xa0\xbd\xed\xb8\x80"), "😀", true},
		{[]byte("a\xc0\x80b"), "a\x00b", true},
		{[]byte("\xed\xa0\xbd"), "", false},
		{[]byte("\xc0\x41"), "", false},
		{[]byte("\xed\x9f\xbf"), "\ud7ff", true},
		{[]byte("\xed\xa0\xbd\xed\xb8"), "", false},
	}
	for _, v := range variants {
		got, ok := decodeUTF8Variants(v.in)
		if ok != v.ok || ok && string(got) != v.want {
			t.Errorf("utf-8-variants(% x) = %+q %v, want %+q %v", v.in, string(got), ok, v.want, v.ok)
		}
		if _, strict := decodeUTF8Strict(v.in); strict && (v.in[0] == 0xC0 || len(v.in) > 3) {
			t.Errorf("strict UTF-8 accepted % x", v.in)
		}
	}
}

// TestWanWhitespace: Python's strip and the regex module's \s disagree on
// U+001C–U+001F; neither touches U+200B or U+FEFF.
func TestWanWhitespace(t *testing.T) {
	if got := PyStrip("\x1c\x1d a \x1e\x1f"); got != "a" {
		t.Errorf("PyStrip: %+q", got)
	}
	if got := CollapseWhitespace("a\x1c\x1db \u200b\u200b c\ufeff\u3000\u0085\u00a0\u2028d"); got != "a\x1c\x1db \u200b\u200b c\ufeff d" {
		t.Errorf("CollapseWhitespace: %+q", got)
	}
	if got := PyStrip("\u200ba\u200b"); got != "\u200ba\u200b" {
		t.Errorf("PyStrip removed U+200B: %+q", got)
	}
}

// TestWanLongInput: a long prompt of repeated lines cleans to the repeated
// clean of one line (ftfy fixes line by line; Python agrees).
func TestWanLongInput(t *testing.T) {
	unit := "Ã© a cafÃ© &amp; ＦＵＬＬ “quoted” text\u00a0with\tspaces\n"
	if got := Wan(unit); got != `é a café & FULL "quoted" text with spaces` {
		t.Fatalf("Wan(unit) = %+q", got)
	}
	got := Wan(strings.Repeat(unit, 2000))
	if want := strings.TrimSuffix(strings.Repeat(Wan(unit)+" ", 2000), " "); got != want {
		t.Fatalf("Wan of a repeated line differs from the repeated clean")
	}
}

// TestMapHelpersKeepIdentity: the fixers return their input unchanged (the
// same slice) when they have nothing to do.
func TestMapHelpersKeepIdentity(t *testing.T) {
	text := []rune("plain text")
	for name, f := range map[string]func([]rune) []rune{
		"uncurlQuotes": uncurlQuotes, "fixLatinLigatures": fixLatinLigatures, "fixCharacterWidth": fixCharacterWidth,
		"fixLineBreaks": fixLineBreaks, "fixSurrogates": fixSurrogates, "removeTerminalEscapes": removeTerminalEscapes,
		"removeControlChars": removeControlChars, "fixC1Controls": fixC1Controls, "nfc": nfc, "unescapeHTML": unescapeHTML,
	} {
		if got := f(text); !slices.Equal(got, text) {
			t.Errorf("%s changed plain text: %q", name, string(got))
		}
	}
}
