package tokenizer

import (
	"fmt"

	"github.com/densitykv/densitykv/textclean"
)

// The special pieces of the T5 tokenizers (Hugging Face's T5Tokenizer and
// T5TokenizerFast name them so, whatever the trainer spec says).
const (
	EOSPiece = "</s>"
	PadPiece = "<pad>"
)

// Clean is Wan2.1's prompt clean (clean='whitespace'): ftfy's fix_text,
// html.unescape twice, strip, whitespace collapse, strip. See package
// textclean.
func Clean(text string) string { return textclean.Wan(text) }

// T5Tokens is one prompt as Wan's HuggingfaceTokenizer gives it to the umT5
// encoder (padding='max_length', truncation=True, max_length=text_len,
// add_special_tokens=True, return_mask=True).
type T5Tokens struct {
	Cleaned   string  // the prompt after Clean
	IDs       []int32 // [textLen]: the pieces, cut to textLen-1, then EOS, then pad ids
	Mask      []bool  // [textLen]: true on the pieces and the EOS
	SeqLen    int     // number of true mask entries: min(Pieces, textLen-1) + 1
	Pieces    int     // pieces before truncation
	Truncated bool    // Pieces > textLen-1: the prompt lost its tail
}

// EncodeT5 cleans a prompt, encodes it and lays it out as Wan's T5 input:
// the pieces cut to textLen-1 (the EOS always stays), EOS, then padding to
// textLen. Truncated reports a cut, which callers should warn about.
func (m *Model) EncodeT5(prompt string, textLen int) (*T5Tokens, error) {
	if textLen < 1 || textLen > MaxTextLen {
		return nil, fmt.Errorf("%w: text_len %d outside [1, %d]", ErrInput, textLen, MaxTextLen)
	}
	if err := checkText(prompt); err != nil {
		return nil, err
	}
	eos, pad, err := m.t5Specials()
	if err != nil {
		return nil, err
	}
	cleaned := Clean(prompt)
	ids, err := m.Encode(cleaned)
	if err != nil {
		return nil, err
	}
	t := PadT5(ids, textLen, eos, pad)
	t.Cleaned = cleaned
	return t, nil
}

// t5Specials returns the ids of EOSPiece and PadPiece.
func (m *Model) t5Specials() (eos, pad int, err error) {
	eos, ok := m.PieceID(EOSPiece)
	if !ok {
		return 0, 0, fmt.Errorf("%w: the model has no %s piece for T5's EOS", ErrUnsupported, EOSPiece)
	}
	pad, ok = m.PieceID(PadPiece)
	if !ok {
		return 0, 0, fmt.Errorf("%w: the model has no %s piece for T5's padding", ErrUnsupported, PadPiece)
	}
	return eos, pad, nil
}

// PadT5 is the T5 post-processing of piece ids: keep at most textLen-1
// pieces, append eos, pad with pad to textLen. It panics when textLen < 1 (a
// programmer error; EncodeT5 checks it).
func PadT5(pieces []int, textLen, eos, pad int) *T5Tokens {
	if textLen < 1 {
		panic(fmt.Sprintf("tokenizer: PadT5 with text_len %d", textLen))
	}
	keep := min(len(pieces), textLen-1)
	t := &T5Tokens{
		IDs:       make([]int32, textLen),
		Mask:      make([]bool, textLen),
		SeqLen:    keep + 1,
		Pieces:    len(pieces),
		Truncated: len(pieces) > textLen-1,
	}
	for i := range t.IDs {
		switch {
		case i < keep:
			t.IDs[i] = int32(pieces[i])
		case i == keep:
			t.IDs[i] = int32(eos)
		default:
			t.IDs[i] = int32(pad)
		}
		t.Mask[i] = i <= keep
	}
	return t
}
