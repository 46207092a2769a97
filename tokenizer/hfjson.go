package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
)

// ParseJSON builds a Model from a Hugging Face tokenizer.json holding a
// Unigram model, as transformers writes one from a spiece.model (its
// SpmConverter / T5Converter; T5TokenizerFast's tokenizer.json): it is
// read back as that SentencePiece model and tokenizes as Parse's model
// does (sentencepiece 0.1.97's Viterbi and normalizer; the fast
// tokenizer's own differences, see the golden README's caveats, are not
// reproduced). The mapping:
//
//   - model.vocab gives the pieces and scores, model.unk_id the UNKNOWN
//     piece, model.byte_fallback the byte pieces (<0x00>…<0xFF> become
//     BYTE pieces only with it);
//   - added_tokens inside the vocabulary are CONTROL pieces when special,
//     USER_DEFINED ones otherwise; added tokens beyond it (T5's
//     <extra_id_*>) are not pieces;
//   - the normalizer's Precompiled charsmap is the normalization rule; a
//     Replace of " {2,}" (with Strip) is remove_extra_whitespaces;
//   - the Metaspace pre-tokenizer's prefix (add_prefix_space, or a
//     prepend_scheme other than "never") is add_dummy_prefix, its "▁"
//     the whitespace escape; a WhitespaceSplit before it changes nothing
//     (sentencepiece's pieces do not cross whitespace either).
//
// Any other model type, normalizer or pre-tokenizer is ErrUnsupported,
// named.
func ParseJSON(data []byte) (*Model, error) {
	if len(data) > MaxModelBytes {
		return nil, fmt.Errorf("%w: tokenizer.json is larger than %d bytes", ErrFormat, MaxModelBytes)
	}
	var j struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Normalizer   json.RawMessage `json:"normalizer"`
		PreTokenizer json.RawMessage `json:"pre_tokenizer"`
		Model        struct {
			Type         string          `json:"type"`
			UnkID        *int            `json:"unk_id"`
			Vocab        json.RawMessage `json:"vocab"`
			ByteFallback bool            `json:"byte_fallback"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json: %v", ErrFormat, err)
	}
	if j.Model.Type != "Unigram" {
		return nil, fmt.Errorf("%w: tokenizer.json model %q (only Unigram, a SentencePiece unigram model, is read)", ErrUnsupported, j.Model.Type)
	}
	var vocab [][]json.RawMessage
	if err := json.Unmarshal(j.Model.Vocab, &vocab); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json vocab: %v", ErrFormat, err)
	}
	mp := &modelProto{trainer: defaultTrainerSpec(), normalizer: normalizerSpec{escapeWhitespaces: true}}
	mp.trainer.byteFallback = j.Model.ByteFallback
	mp.trainer.unkID, mp.trainer.bosID, mp.trainer.eosID, mp.trainer.padID = -1, -1, -1, -1
	n := len(vocab)
	if n == 0 || n > math.MaxInt32 {
		return nil, fmt.Errorf("%w: tokenizer.json has %d vocabulary entries", ErrFormat, n)
	}
	for i, e := range vocab {
		var p pieceProto
		var score float64
		if len(e) != 2 || json.Unmarshal(e[0], &p.piece) != nil || json.Unmarshal(e[1], &score) != nil {
			return nil, fmt.Errorf("%w: tokenizer.json vocab entry %d is not [piece, score]", ErrFormat, i)
		}
		p.score, p.typ = float32(score), PieceNormal
		if j.Model.ByteFallback {
			if _, ok := pieceToByte(p.piece); ok {
				p.typ = PieceByte
			}
		}
		mp.pieces = append(mp.pieces, p)
	}
	for _, a := range j.AddedTokens {
		if a.ID < 0 || a.ID >= n {
			continue // beyond the vocabulary (T5's sentinels): not a piece
		}
		if mp.pieces[a.ID].piece != a.Content {
			return nil, fmt.Errorf("%w: tokenizer.json added token %d %q is vocabulary piece %q", ErrFormat, a.ID, a.Content, mp.pieces[a.ID].piece)
		}
		if a.Special {
			mp.pieces[a.ID].typ = PieceControl
		} else {
			mp.pieces[a.ID].typ = PieceUserDefined
		}
	}
	if j.Model.UnkID == nil || *j.Model.UnkID < 0 || *j.Model.UnkID >= n {
		return nil, fmt.Errorf("%w: tokenizer.json has no unk_id within its %d pieces", ErrFormat, n)
	}
	mp.pieces[*j.Model.UnkID].typ = PieceUnknown
	mp.trainer.unkID = int32(*j.Model.UnkID)
	for i, p := range mp.pieces {
		switch p.piece {
		case EOSPiece:
			mp.trainer.eosID = int32(i)
		case PadPiece:
			mp.trainer.padID = int32(i)
		case "<s>":
			mp.trainer.bosID = int32(i)
		}
	}
	if err := jsonNormalizer(j.Normalizer, &mp.normalizer); err != nil {
		return nil, err
	}
	if err := jsonPreTokenizer(j.PreTokenizer, &mp.normalizer); err != nil {
		return nil, err
	}
	return fromProto(mp)
}

// jsonStep is one normalizer or pre-tokenizer of tokenizer.json.
type jsonStep struct {
	Type       string          `json:"type"`
	Steps      json.RawMessage `json:"normalizers"`
	PreSteps   json.RawMessage `json:"pretokenizers"`
	Charsmap   *string         `json:"precompiled_charsmap"`
	RawPattern json.RawMessage `json:"pattern"`
	Content    string          `json:"content"`
	Replace    string          `json:"replacement"`
	AddPrefix  *bool           `json:"add_prefix_space"`
	Prepend    string          `json:"prepend_scheme"`
}

// flatten lists a (possibly Sequence) step's steps.
func flatten(raw json.RawMessage, key func(s jsonStep) json.RawMessage) ([]jsonStep, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s jsonStep
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json: %v", ErrFormat, err)
	}
	if s.Type != "Sequence" {
		return []jsonStep{s}, nil
	}
	var subs []json.RawMessage
	if err := json.Unmarshal(key(s), &subs); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json sequence: %v", ErrFormat, err)
	}
	var out []jsonStep
	for _, r := range subs {
		f, err := flatten(r, key)
		if err != nil {
			return nil, err
		}
		out = append(out, f...)
	}
	return out, nil
}

func jsonNormalizer(raw json.RawMessage, ns *normalizerSpec) error {
	steps, err := flatten(raw, func(s jsonStep) json.RawMessage { return s.Steps })
	if err != nil {
		return err
	}
	for _, s := range steps {
		switch s.Type {
		case "Precompiled":
			if s.Charsmap == nil || *s.Charsmap == "" {
				continue
			}
			b, err := base64.StdEncoding.DecodeString(*s.Charsmap)
			if err != nil {
				return fmt.Errorf("%w: tokenizer.json precompiled_charsmap: %v", ErrFormat, err)
			}
			ns.charsmap, ns.name = b, "precompiled (tokenizer.json)"
		case "Replace":
			var p map[string]string
			if err := json.Unmarshal(s.RawPattern, &p); err != nil {
				return fmt.Errorf("%w: tokenizer.json Replace pattern: %v", ErrFormat, err)
			}
			if p["Regex"] != " {2,}" {
				return fmt.Errorf("%w: tokenizer.json normalizer Replace %v → %q (only the whitespace collapse \" {2,}\" of a converted spiece.model is read)", ErrUnsupported, p, s.Content)
			}
			ns.removeExtraWhitespaces = true
		case "Strip":
			// With the collapse: sentencepiece's remove_extra_whitespaces.
		default:
			return fmt.Errorf("%w: tokenizer.json normalizer %q (a converted spiece.model has Precompiled, Strip and Replace)", ErrUnsupported, s.Type)
		}
	}
	return nil
}

func jsonPreTokenizer(raw json.RawMessage, ns *normalizerSpec) error {
	steps, err := flatten(raw, func(s jsonStep) json.RawMessage { return s.PreSteps })
	if err != nil {
		return err
	}
	meta := false
	for _, s := range steps {
		switch s.Type {
		case "Metaspace":
			if s.Replace != "" && s.Replace != "▁" {
				return fmt.Errorf("%w: tokenizer.json Metaspace replacement %q (SentencePiece escapes whitespace as ▁)", ErrUnsupported, s.Replace)
			}
			meta = true
			switch {
			case s.Prepend != "":
				ns.addDummyPrefix = s.Prepend != "never"
			case s.AddPrefix != nil:
				ns.addDummyPrefix = *s.AddPrefix
			default:
				ns.addDummyPrefix = true
			}
		case "WhitespaceSplit":
		default:
			return fmt.Errorf("%w: tokenizer.json pre-tokenizer %q (a converted spiece.model has Metaspace)", ErrUnsupported, s.Type)
		}
	}
	if !meta {
		return fmt.Errorf("%w: tokenizer.json has no Metaspace pre-tokenizer: not a converted SentencePiece model", ErrUnsupported)
	}
	return nil
}
