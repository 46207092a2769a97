package tokenizer

import (
	"fmt"
)

// unkPenalty is sentencepiece's kUnkPenalty: an unknown character scores
// this much below the least likely piece.
const unkPenalty float32 = 10

// Normalize returns the text SentencePiece segments: the charsmap applied,
// whitespace handled and spaces written as "▁" (with the model's settings).
func (m *Model) Normalize(text string) (string, error) {
	if err := checkText(text); err != nil {
		return "", err
	}
	return string(m.norm.normalize(text)), nil
}

// Encode returns the piece ids of text, as sentencepiece's
// SentencePieceProcessor::Encode gives them: normalized, segmented by the
// unigram Viterbi search, unknown characters as <0xXX> byte pieces (byte
// fallback) or, without it, each run of them as one <unk>
// (PopulateSentencePieceText). No EOS is added and text is not cleaned (see
// Clean and EncodeT5).
func (m *Model) Encode(text string) ([]int, error) {
	if err := checkText(text); err != nil {
		return nil, err
	}
	normalized, segs := m.segment(text)
	ids := make([]int, 0, len(segs))
	prevUnk := false
	for _, s := range segs {
		isUnk := s.id == m.unkID
		switch {
		case isUnk && m.byteFallback:
			for _, b := range normalized[s.start:s.end] {
				ids = append(ids, int(m.byteIDs[b]))
			}
		case isUnk && prevUnk: // merged into the previous <unk>
		default:
			ids = append(ids, int(s.id))
		}
		prevUnk = isUnk
	}
	return ids, nil
}

// EncodePieces is Encode giving the pieces as sentencepiece's
// EncodeAsPieces does: the vocabulary piece for a known piece, "<0xXX>" for
// a byte, and for <unk> the normalized text it covers (a run merged).
func (m *Model) EncodePieces(text string) ([]string, error) {
	if err := checkText(text); err != nil {
		return nil, err
	}
	normalized, segs := m.segment(text)
	pieces := make([]string, 0, len(segs))
	prevUnk := false
	for _, s := range segs {
		isUnk := s.id == m.unkID
		switch {
		case isUnk && m.byteFallback:
			for _, b := range normalized[s.start:s.end] {
				pieces = append(pieces, byteToPiece(b))
			}
		case isUnk && prevUnk:
			pieces[len(pieces)-1] += string(normalized[s.start:s.end])
		case isUnk:
			pieces = append(pieces, string(normalized[s.start:s.end]))
		default:
			pieces = append(pieces, m.pieces[s.id].piece)
		}
		prevUnk = isUnk
	}
	return pieces, nil
}

// segment normalizes text and finds its best segmentation.
func (m *Model) segment(text string) ([]byte, []segment) {
	normalized := m.norm.normalize(text)
	if len(normalized) == 0 {
		return nil, nil
	}
	return normalized, m.viterbi(normalized)
}

func checkText(text string) error {
	if len(text) > MaxTextBytes {
		return fmt.Errorf("%w: text of %d bytes is longer than the %d accepted", ErrInput, len(text), MaxTextBytes)
	}
	return nil
}

// segment is one piece of the best path: normalized[start:end] is piece id.
type segment struct {
	id         int32
	start, end int
}

// bestPath is sentencepiece's BestPathNode: the best path ending at a byte
// position.
type bestPath struct {
	id      int32
	score   float32
	startAt int32 // -1: no path ends here yet
}

// viterbi is sentencepiece's unigram Model::EncodeOptimized (0.1.97): for
// each character start, every vocabulary piece beginning there updates the
// best path ending where it ends; a character no piece of its exact length
// covers gets an <unk> of score minScore-10. A candidate replaces the best
// path only when strictly better, so ties keep the earliest start and, from
// one start, the shortest piece. The arithmetic is sentencepiece's: piece
// scores are float32, a candidate score is the float64 sum of the piece score
// and the float32 path score (the C++ promotes it through a conditional with
// a double), compared in float64 and stored as float32; the <unk> candidate is
// a float32 sum.
func (m *Model) viterbi(normalized []byte) []segment {
	size := len(normalized)
	best := make([]bestPath, size+1)
	for i := range best {
		best[i].startAt = -1
	}
	unkScore := m.minScore - unkPenalty
	for startsAt := 0; startsAt < size; {
		tillHere := best[startsAt].score
		mblen := min(oneCharLen(normalized[startsAt]), size-startsAt)
		hasSingleNode := false
		node := int32(0)
		for keyPos := startsAt; keyPos < size; keyPos++ {
			if node = m.trie.child(node, normalized[keyPos]); node < 0 {
				break
			}
			id := m.trie.nodes[node].id
			if id < 0 {
				continue
			}
			p := &m.pieces[id]
			if p.typ == PieceUnused {
				continue
			}
			length := keyPos + 1 - startsAt
			var score float64
			if p.typ == PieceUserDefined {
				// User-defined pieces get a bonus that makes them always win.
				score = float64(float32(float32(length)*m.maxScore)) - 0.1
			} else {
				score = float64(p.score)
			}
			cand := score + float64(tillHere)
			target := &best[keyPos+1]
			if target.startAt == -1 || cand > float64(target.score) {
				*target = bestPath{id: id, score: float32(cand), startAt: int32(startsAt)}
			}
			if !hasSingleNode && length == mblen {
				hasSingleNode = true
			}
		}
		if !hasSingleNode {
			target := &best[startsAt+mblen]
			cand := float32(unkScore + tillHere)
			if target.startAt == -1 || cand > target.score {
				*target = bestPath{id: m.unkID, score: cand, startAt: int32(startsAt)}
			}
		}
		startsAt += mblen
	}
	n := 0
	for end := size; end > 0; end = int(best[end].startAt) {
		n++
	}
	segs := make([]segment, n)
	for end := size; end > 0; end = int(best[end].startAt) {
		n--
		segs[n] = segment{id: best[end].id, start: int(best[end].startAt), end: end}
	}
	return segs
}

// oneCharLen is sentencepiece's OneCharLen: the length of a UTF-8 sequence
// from its lead byte (1 for a stray continuation byte).
func oneCharLen(lead byte) int {
	return int("\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x02\x02\x03\x04"[lead>>4])
}
