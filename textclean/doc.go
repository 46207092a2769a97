// Package textclean is the prompt clean Wan2.1 applies before tokenizing
// (wan/modules/tokenizers.py, clean='whitespace'): ftfy's fix_text with its
// default settings, Python's html.unescape twice, strip, whitespace collapse,
// strip. Wan is the whole clean; FixText, HTMLUnescape, PyStrip and
// CollapseWhitespace are its steps.
//
// FixText follows ftfy 6.3.1 (the version the golden data was made with;
// Wan does not pin one) step for step: the segmenting of fix_text, the
// fixers of fix_and_explain in their order and to a fixed point, and the
// mojibake repair of fix_encoding with its heuristics (the badness
// expression, the UTF-8 clue classes, restore_byte_a0,
// replace_lossy_sequences, decode_inconsistent_utf8, the sloppy codecs and
// utf-8-variants). Regular expressions of ftfy are written out as matchers
// that keep Python's leftmost-first semantics; their character classes are
// in chardata.go.
//
// Text is handled as code points, as Python strings are. Unicode data comes
// from Go and golang.org/x/text (Unicode 15), where the reference ran Python
// 3.11 (Unicode 14): the results differ only on characters assigned in
// Unicode 15.
package textclean
