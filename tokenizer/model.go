package tokenizer

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Errors, wrapped with what and where.
var (
	// ErrFormat: the model file is not a well-formed SentencePiece ModelProto.
	ErrFormat = errors.New("tokenizer: malformed model")
	// ErrUnsupported: a well-formed model this package does not implement
	// (a BPE, word or char model).
	ErrUnsupported = errors.New("tokenizer: unsupported model")
	// ErrInput: text or arguments out of the accepted range.
	ErrInput = errors.New("tokenizer: bad input")
)

// Limits.
const (
	// MaxModelBytes bounds the model file (umT5-XXL's spiece.model is 4.3 MB).
	MaxModelBytes = 256 << 20
	// MaxTextBytes bounds the text Encode and EncodeT5 accept. Tokenization is
	// linear in it; a prompt is a few kilobytes.
	MaxTextBytes = 1 << 18
	// MaxTextLen bounds the text_len of EncodeT5 (Wan uses 512).
	MaxTextLen = 1 << 16
	// MaxPieceBytes bounds one piece (T5's pieces are at most 16 characters).
	MaxPieceBytes = 1 << 12
)

// ModelFile and JSONFile are the file names Load looks for in a folder,
// in that order.
const (
	ModelFile = "spiece.model"
	JSONFile  = "tokenizer.json"
)

// PieceType is ModelProto.SentencePiece.Type.
type PieceType int32

// Piece types.
const (
	PieceNormal      PieceType = 1 // a vocabulary piece
	PieceUnknown     PieceType = 2 // <unk>
	PieceControl     PieceType = 3 // </s>, <pad>, <s>: never matched in text
	PieceUserDefined PieceType = 4 // always matched where it occurs
	PieceUnused      PieceType = 5 // kept in the vocabulary, never produced
	PieceByte        PieceType = 6 // <0x00>…<0xFF>, for byte fallback
)

// Model is a SentencePiece unigram model: the vocabulary, the normalizer and
// the Viterbi segmentation of sentencepiece 0.1.97. A Model is immutable and
// safe for concurrent use.
type Model struct {
	pieces []pieceProto

	normalIDs   map[string]int32 // NORMAL, USER_DEFINED and UNUSED pieces
	reservedIDs map[string]int32 // the other types
	trie        *pieceTrie       // normalIDs, for the Viterbi search
	norm        *normalizer

	unkID        int32
	byteFallback bool
	byteIDs      [256]int32
	minScore     float32 // over NORMAL pieces
	maxScore     float32

	spec Spec
}

// Spec describes a loaded model: the settings that decide how it tokenizes.
type Spec struct {
	Pieces                  int    // vocabulary size (number of pieces)
	ByteFallback            bool   // unknown characters become <0xXX> pieces
	BytePieces              int    // number of BYTE pieces
	NormalizerName          string // e.g. "nmt_nfkc"
	CharsmapBytes           int    // size of the precompiled charsmap
	AddDummyPrefix          bool   // a leading "▁"
	RemoveExtraWhitespaces  bool   // drop leading, trailing and repeated spaces
	EscapeWhitespaces       bool   // spaces become "▁"
	TreatWhitespaceAsSuffix bool
	SplitDigits             bool // a training setting; recorded only
	MaxPieceLength          int  // a training setting; recorded only
	UnkID                   int  // the UNKNOWN piece
	// The ids the trainer spec records for <unk>, <s>, </s>, <pad> (-1: none).
	TrainerUnkID, TrainerBOSID, TrainerEOSID, TrainerPadID int
}

// Load reads a SentencePiece model: the spiece.model file itself, a
// Hugging Face tokenizer.json converted from one (ParseJSON; a file whose
// name ends in .json), or a folder holding either (as Wan2.1's
// google/umt5-xxl folder does; spiece.model first).
func Load(path string) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
		dir := path
		path = filepath.Join(dir, ModelFile)
		if _, err := os.Stat(path); err != nil {
			path = filepath.Join(dir, JSONFile)
			if _, jerr := os.Stat(path); jerr != nil {
				return nil, fmt.Errorf("tokenizer: folder %s has no %s or %s: %w", dir, ModelFile, JSONFile, err)
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxModelBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: reading %s: %w", path, err)
	}
	if len(data) > MaxModelBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrFormat, path, MaxModelBytes)
	}
	parse := Parse
	if strings.HasSuffix(strings.ToLower(path), ".json") {
		parse = ParseJSON
	}
	m, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Parse builds a Model from the bytes of a spiece.model file. It checks what
// sentencepiece checks when it loads a model (unique non-empty pieces, one
// <unk>, 256 byte pieces exactly when byte_fallback is set, a well-formed
// charsmap) and more (every charsmap entry points at a terminated string), and
// runs the model's self-test samples, if it has any.
func Parse(data []byte) (*Model, error) {
	if len(data) > MaxModelBytes {
		return nil, fmt.Errorf("%w: model is larger than %d bytes", ErrFormat, MaxModelBytes)
	}
	mp, err := parseModelProto(data)
	if err != nil {
		return nil, err
	}
	return fromProto(mp)
}

// fromProto builds a Model from a parsed (or converted) ModelProto.
func fromProto(mp *modelProto) (*Model, error) {
	if mp.trainer.modelType != 1 {
		return nil, fmt.Errorf("%w: model_type %d (only UNIGRAM = 1 is implemented)", ErrUnsupported, mp.trainer.modelType)
	}
	m := &Model{
		pieces:       mp.pieces,
		normalIDs:    make(map[string]int32, len(mp.pieces)),
		reservedIDs:  map[string]int32{},
		unkID:        -1,
		byteFallback: mp.trainer.byteFallback,
		minScore:     math.MaxFloat32,
		maxScore:     0x1p-126, // FLT_MIN, the smallest normal float32, as sentencepiece starts it
	}
	if len(mp.pieces) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d pieces", ErrFormat, len(mp.pieces))
	}
	var byteFound [256]bool
	nBytes := 0
	for i, p := range mp.pieces {
		if p.piece == "" {
			return nil, fmt.Errorf("%w: piece %d is empty", ErrFormat, i)
		}
		if len(p.piece) > MaxPieceBytes {
			return nil, fmt.Errorf("%w: piece %d is %d bytes long (at most %d accepted)", ErrFormat, i, len(p.piece), MaxPieceBytes)
		}
		ids := m.reservedIDs
		if p.typ == PieceNormal || p.typ == PieceUserDefined || p.typ == PieceUnused {
			ids = m.normalIDs
		}
		if prev, dup := ids[p.piece]; dup {
			return nil, fmt.Errorf("%w: piece %d %q is already defined as piece %d", ErrFormat, i, p.piece, prev)
		}
		ids[p.piece] = int32(i)
		switch p.typ {
		case PieceUnknown:
			if m.unkID >= 0 {
				return nil, fmt.Errorf("%w: piece %d is a second <unk> (piece %d is one)", ErrFormat, i, m.unkID)
			}
			m.unkID = int32(i)
		case PieceByte:
			if !m.byteFallback {
				return nil, fmt.Errorf("%w: byte piece %d %q although byte_fallback is false", ErrFormat, i, p.piece)
			}
			b, ok := pieceToByte(p.piece)
			if !ok {
				return nil, fmt.Errorf("%w: byte piece %d %q is not <0xXX>", ErrFormat, i, p.piece)
			}
			byteFound[b] = true
			nBytes++
		case PieceNormal:
			if math.IsNaN(float64(p.score)) || math.IsInf(float64(p.score), 0) {
				return nil, fmt.Errorf("%w: piece %d %q has score %v", ErrFormat, i, p.piece, p.score)
			}
			m.minScore = min(m.minScore, p.score)
			m.maxScore = max(m.maxScore, p.score)
		}
	}
	if m.unkID < 0 {
		return nil, fmt.Errorf("%w: no <unk> (UNKNOWN) piece", ErrFormat)
	}
	if m.byteFallback {
		for b, ok := range byteFound {
			if !ok {
				return nil, fmt.Errorf("%w: byte_fallback is true but there is no piece <0x%02X>", ErrFormat, b)
			}
		}
		for b := range m.byteIDs {
			m.byteIDs[b] = m.pieceToID(byteToPiece(byte(b)))
		}
	}
	if len(m.normalIDs) == 0 {
		return nil, fmt.Errorf("%w: no normal, user-defined or unused pieces", ErrFormat)
	}
	m.trie = newPieceTrie(m.normalIDs)

	var userDefined map[string]int32
	for i, p := range mp.pieces {
		if p.typ == PieceUserDefined {
			if userDefined == nil {
				userDefined = map[string]int32{}
			}
			userDefined[p.piece] = int32(i)
		}
	}
	var err error
	m.norm, err = newNormalizer(mp.normalizer, mp.trainer.treatWhitespaceAsSuffix, userDefined)
	if err != nil {
		return nil, err
	}
	ns := mp.normalizer
	m.spec = Spec{
		Pieces: len(mp.pieces), ByteFallback: m.byteFallback, BytePieces: nBytes,
		NormalizerName: ns.name, CharsmapBytes: len(ns.charsmap),
		AddDummyPrefix: ns.addDummyPrefix, RemoveExtraWhitespaces: ns.removeExtraWhitespaces,
		EscapeWhitespaces: ns.escapeWhitespaces, TreatWhitespaceAsSuffix: mp.trainer.treatWhitespaceAsSuffix,
		SplitDigits: mp.trainer.splitDigits, MaxPieceLength: int(mp.trainer.maxPieceLength),
		UnkID:        int(m.unkID),
		TrainerUnkID: int(mp.trainer.unkID), TrainerBOSID: int(mp.trainer.bosID),
		TrainerEOSID: int(mp.trainer.eosID), TrainerPadID: int(mp.trainer.padID),
	}
	if err := m.selfTest(mp.selfTest); err != nil {
		return nil, err
	}
	return m, nil
}

// selfTest encodes the model's self-test samples, as sentencepiece does on
// load. A sample passes when its pieces (joined by spaces) are the expected
// ones, or score the same under the model (ties broken another way).
func (m *Model) selfTest(samples []selfTestSample) error {
	for i, s := range samples {
		pieces, err := m.EncodePieces(s.input)
		if err != nil {
			return fmt.Errorf("%w: self-test sample %d: %v", ErrFormat, i, err)
		}
		got := strings.Join(pieces, " ")
		if got == s.expected {
			continue
		}
		if math.Abs(float64(m.pathScore(strings.Split(s.expected, " "))-m.pathScore(pieces))) > 1e-7 {
			return fmt.Errorf("%w: self-test sample %d: %q encodes to %q, the model says %q", ErrFormat, i, s.input, got, s.expected)
		}
	}
	return nil
}

// pathScore is the unigram score of a segmentation (sentencepiece's
// VerifyOutputsEquivalent).
func (m *Model) pathScore(pieces []string) float32 {
	var total float32
	unk := m.minScore - unkPenalty
	for _, p := range pieces {
		id := m.pieceToID(p)
		switch {
		case id == m.unkID:
			total += unk
		case m.pieces[id].typ == PieceUserDefined:
			total += float32(float64(float32(float32(len(p))*m.maxScore)) - 0.1)
		default:
			total += m.pieces[id].score
		}
	}
	return total
}

// pieceToID is sentencepiece's PieceToId: reserved pieces first, then the
// vocabulary; <unk>'s id when the piece is neither.
func (m *Model) pieceToID(piece string) int32 {
	if id, ok := m.reservedIDs[piece]; ok {
		return id
	}
	if id, ok := m.normalIDs[piece]; ok {
		return id
	}
	return m.unkID
}

// PieceID returns the id of a piece, and whether the model has it.
func (m *Model) PieceID(piece string) (int, bool) {
	if id, ok := m.reservedIDs[piece]; ok {
		return int(id), true
	}
	id, ok := m.normalIDs[piece]
	return int(id), ok
}

// Piece returns the piece of an id and its type; it panics when the id is out
// of range (a programmer error).
func (m *Model) Piece(id int) (string, PieceType) {
	if id < 0 || id >= len(m.pieces) {
		panic(fmt.Sprintf("tokenizer: piece id %d out of range [0, %d)", id, len(m.pieces)))
	}
	return m.pieces[id].piece, m.pieces[id].typ
}

// Score returns the unigram log-probability of a piece; it panics when the
// id is out of range.
func (m *Model) Score(id int) float32 {
	m.Piece(id)
	return m.pieces[id].score
}

// VocabSize is the number of pieces.
func (m *Model) VocabSize() int { return len(m.pieces) }

// Spec describes the model's settings.
func (m *Model) Spec() Spec { return m.spec }

// byteToPiece is sentencepiece's ByteToPiece: "<0x%02X>".
func byteToPiece(b byte) string {
	const hex = "0123456789ABCDEF"
	return "<0x" + string(hex[b>>4]) + string(hex[b&15]) + ">"
}

// pieceToByte inverts byteToPiece (upper-case hex only, as sentencepiece).
func pieceToByte(p string) (byte, bool) {
	if len(p) != 6 || p[:3] != "<0x" || p[5] != '>' {
		return 0, false
	}
	v := 0
	for _, c := range p[3:5] {
		switch {
		case c >= '0' && c <= '9':
			v = v*16 + int(c-'0')
		case c >= 'A' && c <= 'F':
			v = v*16 + int(c-'A') + 10
		default:
			return 0, false
		}
	}
	return byte(v), true
}
