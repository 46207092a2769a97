package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/golden"
)

// FuzzParse: any bytes give a model or an ErrFormat/ErrUnsupported error,
// never a panic; a model that loads encodes text into ids within its
// vocabulary that spell the normalized text.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"custom.model", "suffix.model", "nodummy.model"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte{0x0A, 0x05, 0x0A})
	f.Add([]byte{0x33, 0x3C})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error %v is neither ErrFormat nor ErrUnsupported", err)
			}
			return
		}
		for _, text := range []string{"the dog sat on <cat> 東京 😀", " a  b ", "\xff\xfe abc"} {
			ids, err := m.Encode(text)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				if id < 0 || id >= m.VocabSize() {
					t.Fatalf("id %d outside the %d-piece vocabulary", id, m.VocabSize())
				}
			}
			checkLossless(t, m, text)
		}
	})
}

// fuzzModels are the models FuzzEncode runs on: the golden byte-fallback and
// plain T5 models and the small test models.
func fuzzModels(t testing.TB) []*Model {
	dir := golden.T5(t)
	var ms []*Model
	for _, p := range []string{
		filepath.Join(dir, "spiece.model"), filepath.Join(dir, "spiece_nobytefallback.model"),
		filepath.Join("testdata", "custom.model"), filepath.Join("testdata", "suffix.model"), filepath.Join("testdata", "nodummy.model"),
	} {
		m, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

// FuzzEncode: on any text, Encode never panics, produces only pieces a
// segmentation may produce (no control or unused pieces; <unk> only
// without byte fallback, and never twice in a row), the pieces spell the
// normalized text (SentencePiece's lossless guarantee), and EncodeT5 lays
// the pieces of the cleaned text out as Wan's T5 input.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", " ", "a red panda walks through snow", "色调艳丽，过曝", "</s><pad><0x41>▁",
		"\x00\x01\u200b\ufeff", "ﬁ ① ㍿ 𝐁 ǅ", "\xff\xc3", "cafÃ© &amp; ＦＵＬＬ", "<cat>dog##abc z 123"} {
		f.Add(s, uint16(16))
	}
	models := fuzzModels(f)
	f.Fuzz(func(t *testing.T, text string, textLen uint16) {
		if len(text) > 4096 {
			return
		}
		L := int(textLen%600) + 1
		for _, m := range models {
			ids, err := m.Encode(text)
			if err != nil {
				t.Fatal(err)
			}
			prevUnk := false
			for _, id := range ids {
				if id < 0 || id >= m.VocabSize() {
					t.Fatalf("id %d out of range", id)
				}
				_, typ := m.Piece(id)
				isUnk := typ == PieceUnknown
				if typ == PieceControl || typ == PieceUnused || isUnk && (m.byteFallback || prevUnk) || typ == PieceByte && !m.byteFallback {
					t.Fatalf("Encode(%+q) produced piece %d of type %d", text, id, typ)
				}
				prevUnk = isUnk
			}
			checkLossless(t, m, text)
			if _, _, err := m.t5Specials(); err != nil {
				continue // a test model without </s>
			}
			tok, err := m.EncodeT5(text, L)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := m.Encode(tok.Cleaned)
			eos, _ := m.PieceID(EOSPiece)
			keep := min(len(want), L-1)
			if tok.Pieces != len(want) || tok.SeqLen != keep+1 || tok.Truncated != (len(want) > L-1) ||
				len(tok.IDs) != L || int(tok.IDs[keep]) != eos {
				t.Fatalf("EncodeT5(%+q, %d): %+v for %d pieces", text, L, tok, len(want))
			}
			for i := range L {
				if tok.Mask[i] != (i < tok.SeqLen) || i < keep && int(tok.IDs[i]) != want[i] {
					t.Fatalf("EncodeT5(%+q, %d): position %d id %d mask %v", text, L, i, tok.IDs[i], tok.Mask[i])
				}
			}
			if !slices.Equal(tok.IDs[:keep], toInt32(want[:keep])) {
				t.Fatal("EncodeT5 ids differ from Encode")
			}
		}
	})
}

func toInt32(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}
