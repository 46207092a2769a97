// Package tokenizer is the prompt tokenizer of Wan2.1's text encoder: a
// SentencePiece unigram model (the spiece.model of google/umt5-xxl) and the
// T5 post-processing Wan applies.
//
//	m, err := tokenizer.Load("google/umt5-xxl")     // the folder, its spiece.model or tokenizer.json
//	t, err := m.EncodeT5(prompt, 512)                // Clean, Encode, EOS, truncate, pad
//	// t.IDs [512]int32, t.Mask [512]bool, t.SeqLen, t.Truncated
//
// What it reproduces, and from where:
//
//   - Clean is Wan's clean='whitespace' (package textclean: ftfy.fix_text,
//     html.unescape twice, strip, collapse, strip).
//   - Parse reads the ModelProto (sentencepiece_model.proto) with a small
//     bounded wire reader: pieces, scores and types; the trainer spec
//     (model type, byte_fallback, ids); the normalizer spec (precompiled
//     charsmap, add_dummy_prefix, remove_extra_whitespaces,
//     escape_whitespaces); self-test samples, which are run on load.
//   - Normalize is sentencepiece 0.1.97's Normalizer: the longest charsmap
//     rule at each position (a darts-clone double array of byte keys to
//     NUL-terminated replacements), user-defined pieces passed through,
//     leading/trailing/repeated spaces dropped, a dummy "▁" prefix, spaces
//     as "▁".
//   - Encode is its unigram Model::EncodeOptimized Viterbi search, with the
//     same float32/float64 arithmetic and tie-breaking, then
//     PopulateSentencePieceText: unknown characters become <0xXX> byte pieces
//     with byte fallback, and a run of them one <unk> without.
//   - EncodeT5 is what Hugging Face's T5TokenizerFast does for Wan: the pieces
//     cut to text_len-1, "</s>" appended (never cut), "<pad>" to text_len, a
//     mask over pieces and EOS, seq_len the mask's count.
//
// Wan actually runs T5TokenizerFast from tokenizer.json, not the
// sentencepiece library. For cleaned prompts the two agree except on literal
// special-token text ("</s>", "<pad>", "<unk>", "<extra_id_N>"), which the
// fast tokenizer matches as added tokens and this package (like
// sentencepiece) encodes as characters, and possibly on a literal "▁".
// spiece.model is read first; a folder with only tokenizer.json (or that
// file) is read by ParseJSON as the SentencePiece model it was converted
// from, and tokenizes as that spiece.model does.
package tokenizer
