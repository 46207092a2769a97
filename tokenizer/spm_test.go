package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// spmCases is testdata/spm_cases.json: sentencepiece 0.1.97's ids and pieces
// on the small test models (see testdata/README.md).
type spmCases struct {
	Models map[string][]struct {
		Text   string   `json:"text"`
		IDs    []int    `json:"ids"`
		Pieces []string `json:"pieces"`
	} `json:"models"`
}

func loadTestModel(t testing.TB, name string) *Model {
	t.Helper()
	m, err := Load(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	return m
}

// TestSentencePieceCases checks Encode and EncodePieces against sentencepiece
// on models with user-defined and control pieces, a custom charsmap, suffix
// whitespace, no dummy prefix and kept extra whitespace.
func TestSentencePieceCases(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "spm_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases spmCases
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases.Models) != 3 {
		t.Fatalf("spm_cases.json has %d models, want 3", len(cases.Models))
	}
	for name, cs := range cases.Models {
		t.Run(name, func(t *testing.T) {
			m := loadTestModel(t, name)
			if len(cs) < 300 {
				t.Fatalf("%d cases", len(cs))
			}
			for _, c := range cs {
				ids, err := m.Encode(c.Text)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids, c.IDs) && !(len(ids) == 0 && len(c.IDs) == 0) {
					t.Errorf("Encode(%+q)\n got %v\nwant %v", c.Text, ids, c.IDs)
				}
				pieces, err := m.EncodePieces(c.Text)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(pieces, c.Pieces) && !(len(pieces) == 0 && len(c.Pieces) == 0) {
					t.Errorf("EncodePieces(%+q)\n got %q\nwant %q", c.Text, pieces, c.Pieces)
				}
				checkLossless(t, m, c.Text)
			}
		})
	}
}

// checkLossless checks SentencePiece's guarantee that the pieces spell the
// normalized text: without byte fallback the concatenation of EncodePieces
// (an <unk> piece is the text it covers); with it, the pieces of Encode's ids
// with each byte piece read as its byte.
func checkLossless(t testing.TB, m *Model, text string) {
	t.Helper()
	norm, err := m.Normalize(text)
	if err != nil {
		t.Fatal(err)
	}
	pieces, err := m.EncodePieces(text)
	if err != nil {
		t.Fatal(err)
	}
	if !m.byteFallback {
		if got := strings.Join(pieces, ""); got != norm {
			t.Errorf("pieces of %+q spell %+q, normalized is %+q", text, got, norm)
		}
		return
	}
	ids, err := m.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(pieces) {
		t.Fatalf("%+q: %d ids and %d pieces", text, len(ids), len(pieces))
	}
	var b strings.Builder
	for i, id := range ids {
		p, typ := m.Piece(id)
		switch typ {
		case PieceByte:
			v, _ := pieceToByte(p)
			b.WriteByte(v)
		case PieceNormal, PieceUserDefined:
			b.WriteString(p)
		default:
			t.Errorf("Encode(%+q) produced piece %d %q of type %d", text, id, p, typ)
		}
		if p != pieces[i] {
			t.Errorf("Encode(%+q): id %d is %q, EncodePieces says %q", text, id, p, pieces[i])
		}
	}
	if b.String() != norm {
		t.Errorf("ids of %+q spell %+q, normalized is %+q", text, b.String(), norm)
	}
}

// TestSelfTestSamples: custom.model carries sentencepiece's self-test
// samples, which Parse runs; a sample that no longer matches is an error.
func TestSelfTestSamples(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "custom.model"))
	if err != nil {
		t.Fatal(err)
	}
	mp, err := parseModelProto(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(mp.selfTest) != 10 {
		t.Fatalf("custom.model has %d self-test samples, want 10", len(mp.selfTest))
	}
	if _, err := Parse(data); err != nil {
		t.Fatalf("Parse with self-test: %v", err)
	}
	mp.selfTest[3].expected += " ▁extra"
	_, err = Parse(encodeModelProto(mp))
	if err == nil || !strings.Contains(err.Error(), "self-test sample 3") {
		t.Fatalf("a wrong self-test sample gave %v", err)
	}
}
