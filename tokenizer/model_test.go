package tokenizer

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A protobuf writer for the fields this package reads, to make altered models.

func appendVarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendTag(b []byte, field, typ int) []byte { return appendVarint(b, uint64(field<<3|typ)) }

func appendBytesField(b []byte, field int, p []byte) []byte {
	b = appendTag(b, field, wireBytes)
	b = appendVarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendVarintField(b []byte, field int, v int64) []byte {
	return appendVarint(appendTag(b, field, wireVarint), uint64(v))
}

func appendBool(b []byte, field int, v bool) []byte {
	if v {
		return appendVarintField(b, field, 1)
	}
	return appendVarintField(b, field, 0)
}

// encodeModelProto serializes what parseModelProto reads.
func encodeModelProto(mp *modelProto) []byte {
	var out []byte
	for _, p := range mp.pieces {
		var pb []byte
		pb = appendBytesField(pb, fieldPiece, []byte(p.piece))
		pb = appendTag(pb, fieldScore, wireFixed32)
		pb = binary.LittleEndian.AppendUint32(pb, math.Float32bits(p.score))
		pb = appendVarintField(pb, fieldType, int64(p.typ))
		out = appendBytesField(out, fieldPieces, pb)
	}
	ts := mp.trainer
	var tb []byte
	tb = appendVarintField(tb, fieldModelType, int64(ts.modelType))
	tb = appendVarintField(tb, fieldVocabSize, int64(ts.vocabSize))
	tb = appendVarintField(tb, fieldMaxPieceLength, int64(ts.maxPieceLength))
	tb = appendBool(tb, fieldTreatWhitespaceAsSuffix, ts.treatWhitespaceAsSuffix)
	tb = appendBool(tb, fieldSplitDigits, ts.splitDigits)
	tb = appendBool(tb, fieldByteFallback, ts.byteFallback)
	tb = appendVarintField(tb, fieldUnkID, int64(ts.unkID))
	tb = appendVarintField(tb, fieldBosID, int64(ts.bosID))
	tb = appendVarintField(tb, fieldEosID, int64(ts.eosID))
	tb = appendVarintField(tb, fieldPadID, int64(ts.padID))
	out = appendBytesField(out, fieldTrainerSpec, tb)
	ns := mp.normalizer
	var nb []byte
	nb = appendBytesField(nb, fieldNormName, []byte(ns.name))
	if len(ns.charsmap) > 0 {
		nb = appendBytesField(nb, fieldPrecompiledCharsmap, ns.charsmap)
	}
	nb = appendBool(nb, fieldAddDummyPrefix, ns.addDummyPrefix)
	nb = appendBool(nb, fieldRemoveExtraWhitespaces, ns.removeExtraWhitespaces)
	nb = appendBool(nb, fieldEscapeWhitespaces, ns.escapeWhitespaces)
	out = appendBytesField(out, fieldNormalizerSpec, nb)
	if len(mp.selfTest) > 0 {
		var sb []byte
		for _, s := range mp.selfTest {
			var one []byte
			one = appendBytesField(one, 1, []byte(s.input))
			one = appendBytesField(one, 2, []byte(s.expected))
			sb = appendBytesField(sb, 1, one)
		}
		out = appendBytesField(out, fieldSelfTestData, sb)
	}
	return out
}

func readTestModel(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func parseTestProto(t testing.TB, name string) *modelProto {
	t.Helper()
	mp, err := parseModelProto(readTestModel(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return mp
}

// TestProtoRoundTrip: re-serializing a parsed model gives a model that
// encodes identically (the writer the other tests use is faithful).
func TestProtoRoundTrip(t *testing.T) {
	for _, name := range []string{"custom.model", "suffix.model", "nodummy.model"} {
		orig := loadTestModel(t, name)
		again, err := Parse(encodeModelProto(parseTestProto(t, name)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if orig.Spec() != again.Spec() {
			t.Errorf("%s: spec %+v, again %+v", name, orig.Spec(), again.Spec())
		}
		for _, s := range []string{"the dog sat on the <cat> mat", "Ａｂｃ abc  z 123", "東京 😀 é"} {
			a, _ := orig.Encode(s)
			b, _ := again.Encode(s)
			if !slices.Equal(a, b) {
				t.Errorf("%s: %q: %v vs %v", name, s, a, b)
			}
		}
	}
}

// TestCorruptModels: a truncated or damaged model file gives an error that
// names the problem, never a panic, and never a model that misreads it.
func TestCorruptModels(t *testing.T) {
	data := readTestModel(t, "custom.model")
	// Every truncation is either an error or a smaller valid model (a cut
	// that falls exactly between two top-level fields); never a panic.
	valid := 0
	for n := 0; n < len(data); n += max(1, len(data)/331) {
		m, err := Parse(data[:n])
		if err == nil {
			valid++
			if m.VocabSize() > 1200 {
				t.Fatalf("truncation to %d bytes gave %d pieces", n, m.VocabSize())
			}
			continue
		}
		if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("truncation to %d bytes: error %v is not ErrFormat", n, err)
		}
	}
	if valid > 10 {
		t.Errorf("%d truncations parsed as valid models", valid)
	}
	_, err := Parse(data[:len(data)-3])
	if err == nil || !strings.Contains(err.Error(), "past the end") && !strings.Contains(err.Error(), "truncated") {
		t.Errorf("model cut inside its last field: %v", err)
	}
	// Flipped bytes: an error, or a model (a flip in a score or a string);
	// never a panic, and encoding with whatever loads stays in range.
	for i := 0; i < len(data); i += 23 {
		bad := slices.Clone(data)
		bad[i] ^= 0xA5
		m, err := Parse(bad)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("flip at %d: %v is not ErrFormat/ErrUnsupported", i, err)
			}
			continue
		}
		ids, err := m.Encode("the dog sat on <cat> abc z 123 東京")
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if id < 0 || id >= m.VocabSize() {
				t.Fatalf("flip at %d: id %d out of range", i, id)
			}
		}
	}
}

// TestModelErrors: each structural rule sentencepiece enforces on load is an
// error that says what is wrong.
func TestModelErrors(t *testing.T) {
	cases := []struct {
		name   string
		modify func(mp *modelProto)
		want   string
		is     error
	}{
		{"bpe", func(mp *modelProto) { mp.trainer.modelType = 2 }, "model_type 2", ErrUnsupported},
		{"empty piece", func(mp *modelProto) { mp.pieces[40].piece = "" }, "piece 40 is empty", ErrFormat},
		{"duplicate", func(mp *modelProto) { mp.pieces[300].piece = mp.pieces[301].piece }, "already defined", ErrFormat},
		{"no unk", func(mp *modelProto) { mp.pieces[2].typ = PieceControl }, "no <unk>", ErrFormat},
		{"two unks", func(mp *modelProto) { mp.pieces[3].typ = PieceUnknown }, "second <unk>", ErrFormat},
		{"missing byte", func(mp *modelProto) { mp.pieces[100].typ = PieceNormal; mp.pieces[100].piece = "zzz-not-a-byte" }, "no piece <0x", ErrFormat},
		{"bytes without fallback", func(mp *modelProto) { mp.trainer.byteFallback = false }, "byte_fallback is false", ErrFormat},
		{"bad byte piece", func(mp *modelProto) { mp.pieces[100].piece = "<0xzz>" }, "is not <0xXX>", ErrFormat},
		{"nan score", func(mp *modelProto) { mp.pieces[500].score = float32(math.NaN()) }, "score NaN", ErrFormat},
		{"long piece", func(mp *modelProto) { mp.pieces[500].piece = strings.Repeat("x", MaxPieceBytes+1) }, "bytes long", ErrFormat},
		{"only specials", func(mp *modelProto) { mp.pieces = mp.pieces[:3]; mp.trainer.byteFallback = false }, "no normal", ErrFormat},
		{"charsmap size", func(mp *modelProto) {
			mp.normalizer.charsmap = slices.Clone(mp.normalizer.charsmap)
			binary.LittleEndian.PutUint32(mp.normalizer.charsmap, uint32(len(mp.normalizer.charsmap)))
		}, "exceeds", ErrFormat},
		{"charsmap short", func(mp *modelProto) { mp.normalizer.charsmap = []byte{1, 0, 0} }, "too short", ErrFormat},
		{"charsmap strings", func(mp *modelProto) {
			cm := mp.normalizer.charsmap
			size := binary.LittleEndian.Uint32(cm)
			mp.normalizer.charsmap = slices.Clone(cm[:4+size+1]) // strings cut to one byte
		}, "past the last terminated string", ErrFormat},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mp := parseTestProto(t, "custom.model")
			mp.selfTest = nil
			c.modify(mp)
			_, err := Parse(encodeModelProto(mp))
			if err == nil || !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %v containing %q", err, c.is, c.want)
			}
		})
	}
}

// TestWireErrors: malformed protobuf framing names the message and offset.
func TestWireErrors(t *testing.T) {
	cases := []struct {
		data []byte
		want string
	}{
		{[]byte{0x0A, 0x05, 0x0A}, "ModelProto at byte 2: length 5 runs past"},
		{[]byte{0x80}, "truncated varint"},
		{[]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F}, "overflows"},
		{[]byte{0x00}, "invalid field number 0"},
		{[]byte{0x7F}, "field 15 has invalid wire type 7"},
		{[]byte{0x0D, 1, 2, 3, 4}, "field 1 (pieces) has wire type 5"},
		{[]byte{0x0A, 0x02, 0x18, 0x09}, "pieces[0] at byte 4: unknown piece type 9"},
		{[]byte{0x33, 0x3C}, "group 6 closed by end-group 7"},
		{[]byte{0x4C}, "unexpected end-group 9"},
	}
	for _, c := range cases {
		_, err := Parse(c.data)
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(% x) = %v, want error containing %q", c.data, err, c.want)
		}
	}
	// Unknown fields of every wire type, and groups, are skipped.
	data := readTestModel(t, "suffix.model")
	var extra []byte
	extra = appendVarintField(extra, 99, 5)
	extra = appendTag(extra, 98, wireFixed64)
	extra = append(extra, 1, 2, 3, 4, 5, 6, 7, 8)
	extra = appendTag(extra, 97, wireFixed32)
	extra = append(extra, 1, 2, 3, 4)
	extra = appendBytesField(extra, 96, []byte("skip me"))
	extra = appendTag(extra, 95, wireStart)
	extra = appendVarintField(extra, 1, 1)
	extra = appendTag(extra, 95, wireEnd)
	m, err := Parse(append(slices.Clone(data), extra...))
	if err != nil {
		t.Fatalf("unknown fields: %v", err)
	}
	if m.VocabSize() != loadTestModel(t, "suffix.model").VocabSize() {
		t.Errorf("unknown fields changed the vocabulary")
	}
}

// TestLoadPaths: Load takes the file or a folder holding spiece.model, and
// says what is wrong otherwise.
func TestLoadPaths(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ModelFile), readTestModel(t, "suffix.model"), 0o644); err != nil {
		t.Fatal(err)
	}
	fromDir, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(folder): %v", err)
	}
	fromFile, err := Load(filepath.Join(dir, ModelFile))
	if err != nil || fromFile.VocabSize() != fromDir.VocabSize() {
		t.Fatalf("Load(file): %v", err)
	}
	onlyJSON := t.TempDir()
	if err := os.WriteFile(filepath.Join(onlyJSON, "tokenizer.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(onlyJSON); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("folder with only tokenizer.json: %v", err)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "has no spiece.model") {
		t.Errorf("empty folder: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.model")); err == nil {
		t.Errorf("missing file: no error")
	}
	broken := filepath.Join(dir, "broken.model")
	if err := os.WriteFile(broken, []byte{0x0A, 0x7F}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(broken); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "broken.model") {
		t.Errorf("broken file: %v", err)
	}
}

// TestUnusedPieces: an UNUSED piece stays in the vocabulary but is never
// produced, as in sentencepiece.
func TestUnusedPieces(t *testing.T) {
	mp := parseTestProto(t, "suffix.model")
	m := loadTestModel(t, "suffix.model")
	text := "the dog sat on the mat in the sun"
	before, _ := m.Encode(text)
	victim := before[0]
	mp.pieces[victim].typ = PieceUnused
	m2, err := Parse(encodeModelProto(mp))
	if err != nil {
		t.Fatal(err)
	}
	after, _ := m2.Encode(text)
	if slices.Contains(after, victim) {
		t.Fatalf("unused piece %d still produced: %v", victim, after)
	}
	checkLossless(t, m2, text)
	if id, ok := m2.PieceID(mp.pieces[victim].piece); !ok || id != victim {
		t.Errorf("PieceID of the unused piece: %d %v", id, ok)
	}
}

// TestInputBounds: text and text_len outside the accepted ranges are errors.
func TestInputBounds(t *testing.T) {
	m := loadTestModel(t, "custom.model")
	long := strings.Repeat("a", MaxTextBytes+1)
	if _, err := m.Encode(long); !errors.Is(err, ErrInput) {
		t.Errorf("Encode of %d bytes: %v", len(long), err)
	}
	if _, err := m.EncodeT5(long, 16); !errors.Is(err, ErrInput) {
		t.Errorf("EncodeT5 of %d bytes: %v", len(long), err)
	}
	for _, L := range []int{0, -1, MaxTextLen + 1} {
		if _, err := m.EncodeT5("a cat", L); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "text_len") {
			t.Errorf("text_len %d: %v", L, err)
		}
	}
	if _, err := m.Encode(strings.Repeat("a", MaxTextBytes)); err != nil {
		t.Errorf("Encode at the bound: %v", err)
	}
}
