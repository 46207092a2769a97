package tokenizer

import (
	"encoding/binary"
	"fmt"
	"math"
)

// A small reader for the protobuf wire format of sentencepiece_model.proto
// (proto2). Only the fields this package uses are kept; every other field is
// skipped by its wire type, as a protobuf parser would. Scalars keep the last
// value seen and repeated occurrences of a sub-message merge into it, as in
// protobuf.

// Wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireStart   = 3 // group start (deprecated, skipped)
	wireEnd     = 4
	wireFixed32 = 5
)

// maxGroupDepth bounds the nesting of skipped groups.
const maxGroupDepth = 64

// wire walks one message.
type wire struct {
	b    []byte
	off  int
	base int    // offset of b in the file, for messages
	what string // the message, for messages ("trainer_spec", "pieces[17]")
}

func (w *wire) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s at byte %d: %s", ErrFormat, w.what, w.base+w.off, fmt.Sprintf(format, args...))
}

func (w *wire) done() bool { return w.off >= len(w.b) }

func (w *wire) varint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 70; shift += 7 {
		if w.off >= len(w.b) {
			return 0, w.errorf("truncated varint")
		}
		c := w.b[w.off]
		w.off++
		if shift == 63 && c > 1 {
			return 0, w.errorf("varint overflows 64 bits")
		}
		v |= uint64(c&0x7F) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, w.errorf("varint longer than 10 bytes")
}

// tag reads a field key.
func (w *wire) tag() (field int, typ int, err error) {
	k, err := w.varint()
	if err != nil {
		return 0, 0, err
	}
	field, typ = int(k>>3), int(k&7)
	if field < 1 || k>>3 > math.MaxInt32 {
		return 0, 0, w.errorf("invalid field number %d", k>>3)
	}
	return field, typ, nil
}

// bytes reads a length-delimited field; it also returns the offset of its
// first byte in the file.
func (w *wire) bytes() ([]byte, int, error) {
	n, err := w.varint()
	if err != nil {
		return nil, 0, err
	}
	if n > uint64(len(w.b)-w.off) {
		return nil, 0, w.errorf("length %d runs past the end of the message (%d bytes left)", n, len(w.b)-w.off)
	}
	start := w.off
	w.off += int(n)
	return w.b[start:w.off], w.base + start, nil
}

func (w *wire) fixed32() (uint32, error) {
	if len(w.b)-w.off < 4 {
		return 0, w.errorf("truncated fixed32")
	}
	v := binary.LittleEndian.Uint32(w.b[w.off:])
	w.off += 4
	return v, nil
}

// expect checks a known field's wire type.
func (w *wire) expect(field, typ, want int, name string) error {
	if typ != want {
		return w.errorf("field %d (%s) has wire type %d, want %d", field, name, typ, want)
	}
	return nil
}

// skip skips a field of an unknown number.
func (w *wire) skip(field, typ, depth int) error {
	switch typ {
	case wireVarint:
		_, err := w.varint()
		return err
	case wireFixed64:
		if len(w.b)-w.off < 8 {
			return w.errorf("truncated fixed64")
		}
		w.off += 8
		return nil
	case wireBytes:
		_, _, err := w.bytes()
		return err
	case wireFixed32:
		_, err := w.fixed32()
		return err
	case wireStart:
		if depth >= maxGroupDepth {
			return w.errorf("groups nested deeper than %d", maxGroupDepth)
		}
		for {
			f, t, err := w.tag()
			if err != nil {
				return err
			}
			if t == wireEnd {
				if f != field {
					return w.errorf("group %d closed by end-group %d", field, f)
				}
				return nil
			}
			if err := w.skip(f, t, depth+1); err != nil {
				return err
			}
		}
	case wireEnd:
		return w.errorf("unexpected end-group %d", field)
	}
	return w.errorf("field %d has invalid wire type %d", field, typ)
}

// The messages, with proto2 defaults.

type modelProto struct {
	pieces      []pieceProto
	trainer     trainerSpec
	normalizer  normalizerSpec
	selfTest    []selfTestSample
	hasTrainer  bool
	hasNormSpec bool
}

type pieceProto struct {
	piece string
	score float32
	typ   PieceType
}

type trainerSpec struct {
	modelType               int32 // UNIGRAM = 1
	vocabSize               int32
	byteFallback            bool
	treatWhitespaceAsSuffix bool
	splitDigits             bool
	maxPieceLength          int32
	unkID, bosID            int32
	eosID, padID            int32
	unkPiece, bosPiece      string
	eosPiece, padPiece      string
}

type normalizerSpec struct {
	name                   string
	charsmap               []byte
	addDummyPrefix         bool
	removeExtraWhitespaces bool
	escapeWhitespaces      bool
	charsmapOffset         int // offset of the charsmap in the file, for messages
}

type selfTestSample struct{ input, expected string }

func defaultTrainerSpec() trainerSpec {
	return trainerSpec{
		modelType: 1, vocabSize: 8000, maxPieceLength: 16,
		unkID: 0, bosID: 1, eosID: 2, padID: -1,
		unkPiece: "<unk>", bosPiece: "<s>", eosPiece: "</s>", padPiece: "<pad>",
	}
}

func defaultNormalizerSpec() normalizerSpec {
	return normalizerSpec{addDummyPrefix: true, removeExtraWhitespaces: true, escapeWhitespaces: true}
}

// ModelProto field numbers.
const (
	fieldPieces           = 1
	fieldTrainerSpec      = 2
	fieldNormalizerSpec   = 3
	fieldSelfTestData     = 4
	fieldDenormalizerSpec = 5
)

// parseModelProto decodes a serialized ModelProto.
func parseModelProto(data []byte) (*modelProto, error) {
	m := &modelProto{trainer: defaultTrainerSpec(), normalizer: defaultNormalizerSpec()}
	w := &wire{b: data, what: "ModelProto"}
	for !w.done() {
		field, typ, err := w.tag()
		if err != nil {
			return nil, err
		}
		switch field {
		case fieldPieces:
			if err := w.expect(field, typ, wireBytes, "pieces"); err != nil {
				return nil, err
			}
			b, off, err := w.bytes()
			if err != nil {
				return nil, err
			}
			p, err := parsePiece(b, off, len(m.pieces))
			if err != nil {
				return nil, err
			}
			m.pieces = append(m.pieces, p)
		case fieldTrainerSpec:
			if err := w.expect(field, typ, wireBytes, "trainer_spec"); err != nil {
				return nil, err
			}
			b, off, err := w.bytes()
			if err != nil {
				return nil, err
			}
			if err := parseTrainerSpec(b, off, &m.trainer); err != nil {
				return nil, err
			}
			m.hasTrainer = true
		case fieldNormalizerSpec:
			if err := w.expect(field, typ, wireBytes, "normalizer_spec"); err != nil {
				return nil, err
			}
			b, off, err := w.bytes()
			if err != nil {
				return nil, err
			}
			if err := parseNormalizerSpec(b, off, &m.normalizer); err != nil {
				return nil, err
			}
			m.hasNormSpec = true
		case fieldSelfTestData:
			if err := w.expect(field, typ, wireBytes, "self_test_data"); err != nil {
				return nil, err
			}
			b, off, err := w.bytes()
			if err != nil {
				return nil, err
			}
			if m.selfTest, err = parseSelfTestData(b, off, m.selfTest); err != nil {
				return nil, err
			}
		default: // denormalizer_spec (decoding only) and unknown fields
			if err := w.skip(field, typ, 0); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// SentencePiece field numbers.
const (
	fieldPiece = 1
	fieldScore = 2
	fieldType  = 3
)

func parsePiece(data []byte, base, index int) (pieceProto, error) {
	p := pieceProto{typ: PieceNormal}
	w := &wire{b: data, base: base, what: fmt.Sprintf("pieces[%d]", index)}
	for !w.done() {
		field, typ, err := w.tag()
		if err != nil {
			return p, err
		}
		switch field {
		case fieldPiece:
			if err := w.expect(field, typ, wireBytes, "piece"); err != nil {
				return p, err
			}
			b, _, err := w.bytes()
			if err != nil {
				return p, err
			}
			p.piece = string(b)
		case fieldScore:
			if err := w.expect(field, typ, wireFixed32, "score"); err != nil {
				return p, err
			}
			v, err := w.fixed32()
			if err != nil {
				return p, err
			}
			p.score = math.Float32frombits(v)
		case fieldType:
			if err := w.expect(field, typ, wireVarint, "type"); err != nil {
				return p, err
			}
			v, err := w.varint()
			if err != nil {
				return p, err
			}
			t := PieceType(int32(v))
			if t < PieceNormal || t > PieceByte {
				return p, w.errorf("unknown piece type %d", int64(v))
			}
			p.typ = t
		default:
			if err := w.skip(field, typ, 0); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}

// TrainerSpec field numbers used here.
const (
	fieldModelType               = 3
	fieldVocabSize               = 4
	fieldMaxPieceLength          = 20
	fieldTreatWhitespaceAsSuffix = 24
	fieldSplitDigits             = 25
	fieldByteFallback            = 35
	fieldUnkID                   = 40
	fieldBosID                   = 41
	fieldEosID                   = 42
	fieldPadID                   = 43
	fieldUnkPiece                = 45
	fieldBosPiece                = 46
	fieldEosPiece                = 47
	fieldPadPiece                = 48
)

func parseTrainerSpec(data []byte, base int, s *trainerSpec) error {
	w := &wire{b: data, base: base, what: "trainer_spec"}
	for !w.done() {
		field, typ, err := w.tag()
		if err != nil {
			return err
		}
		var i32 *int32
		var flag *bool
		var str *string
		switch field {
		case fieldModelType:
			i32 = &s.modelType
		case fieldVocabSize:
			i32 = &s.vocabSize
		case fieldMaxPieceLength:
			i32 = &s.maxPieceLength
		case fieldUnkID:
			i32 = &s.unkID
		case fieldBosID:
			i32 = &s.bosID
		case fieldEosID:
			i32 = &s.eosID
		case fieldPadID:
			i32 = &s.padID
		case fieldTreatWhitespaceAsSuffix:
			flag = &s.treatWhitespaceAsSuffix
		case fieldSplitDigits:
			flag = &s.splitDigits
		case fieldByteFallback:
			flag = &s.byteFallback
		case fieldUnkPiece:
			str = &s.unkPiece
		case fieldBosPiece:
			str = &s.bosPiece
		case fieldEosPiece:
			str = &s.eosPiece
		case fieldPadPiece:
			str = &s.padPiece
		}
		if err := readScalar(w, field, typ, i32, flag, str); err != nil {
			return err
		}
	}
	return nil
}

// NormalizerSpec field numbers.
const (
	fieldNormName               = 1
	fieldPrecompiledCharsmap    = 2
	fieldAddDummyPrefix         = 3
	fieldRemoveExtraWhitespaces = 4
	fieldEscapeWhitespaces      = 5
)

func parseNormalizerSpec(data []byte, base int, s *normalizerSpec) error {
	w := &wire{b: data, base: base, what: "normalizer_spec"}
	for !w.done() {
		field, typ, err := w.tag()
		if err != nil {
			return err
		}
		var flag *bool
		var str *string
		switch field {
		case fieldNormName:
			str = &s.name
		case fieldPrecompiledCharsmap:
			if err := w.expect(field, typ, wireBytes, "precompiled_charsmap"); err != nil {
				return err
			}
			b, off, err := w.bytes()
			if err != nil {
				return err
			}
			s.charsmap, s.charsmapOffset = b, off
			continue
		case fieldAddDummyPrefix:
			flag = &s.addDummyPrefix
		case fieldRemoveExtraWhitespaces:
			flag = &s.removeExtraWhitespaces
		case fieldEscapeWhitespaces:
			flag = &s.escapeWhitespaces
		}
		if err := readScalar(w, field, typ, nil, flag, str); err != nil {
			return err
		}
	}
	return nil
}

func parseSelfTestData(data []byte, base int, samples []selfTestSample) ([]selfTestSample, error) {
	w := &wire{b: data, base: base, what: "self_test_data"}
	for !w.done() {
		field, typ, err := w.tag()
		if err != nil {
			return nil, err
		}
		if field != 1 {
			if err := w.skip(field, typ, 0); err != nil {
				return nil, err
			}
			continue
		}
		if err := w.expect(field, typ, wireBytes, "samples"); err != nil {
			return nil, err
		}
		b, off, err := w.bytes()
		if err != nil {
			return nil, err
		}
		var s selfTestSample
		sw := &wire{b: b, base: off, what: fmt.Sprintf("self_test_data.samples[%d]", len(samples))}
		for !sw.done() {
			f, t, err := sw.tag()
			if err != nil {
				return nil, err
			}
			var str *string
			switch f {
			case 1:
				str = &s.input
			case 2:
				str = &s.expected
			}
			if err := readScalar(sw, f, t, nil, nil, str); err != nil {
				return nil, err
			}
		}
		samples = append(samples, s)
	}
	return samples, nil
}

// readScalar stores a field into whichever of i32, flag and str is set, or
// skips it when none is.
func readScalar(w *wire, field, typ int, i32 *int32, flag *bool, str *string) error {
	switch {
	case i32 != nil || flag != nil:
		if err := w.expect(field, typ, wireVarint, "integer"); err != nil {
			return err
		}
		v, err := w.varint()
		if err != nil {
			return err
		}
		if i32 != nil {
			*i32 = int32(v) // int32 fields are sign-extended to 64 bits on the wire
		} else {
			*flag = v != 0
		}
	case str != nil:
		if err := w.expect(field, typ, wireBytes, "string"); err != nil {
			return err
		}
		b, _, err := w.bytes()
		if err != nil {
			return err
		}
		*str = string(b)
	default:
		return w.skip(field, typ, 0)
	}
	return nil
}
