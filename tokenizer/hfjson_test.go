package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// toJSON writes the tokenizer.json transformers' SpmConverter makes of a
// spiece.model (convert_slow_tokenizer.py): the Unigram vocabulary with
// unk_id and byte_fallback, CONTROL pieces as special added tokens and
// USER_DEFINED ones as plain added tokens, the normalizer
// Sequence[Precompiled, Strip(right), Replace(" {2,}", "▁")] (the last
// two with remove_extra_whitespaces), the Metaspace pre-tokenizer
// (prepend_scheme "always" with add_dummy_prefix, else "never").
func toJSON(t *testing.T, spm []byte) []byte {
	t.Helper()
	mp, err := parseModelProto(spm)
	if err != nil {
		t.Fatal(err)
	}
	var vocab [][]any
	var added []map[string]any
	for i, p := range mp.pieces {
		vocab = append(vocab, []any{p.piece, p.score})
		if p.typ == PieceControl || p.typ == PieceUserDefined || p.typ == PieceUnknown {
			added = append(added, map[string]any{"id": i, "content": p.piece, "special": p.typ != PieceUserDefined, "normalized": false})
		}
	}
	norms := []any{}
	if len(mp.normalizer.charsmap) > 0 {
		norms = append(norms, map[string]any{"type": "Precompiled", "precompiled_charsmap": base64.StdEncoding.EncodeToString(mp.normalizer.charsmap)})
	}
	if mp.normalizer.removeExtraWhitespaces {
		norms = append(norms, map[string]any{"type": "Strip", "strip_left": false, "strip_right": true},
			map[string]any{"type": "Replace", "pattern": map[string]string{"Regex": " {2,}"}, "content": "▁"})
	}
	prepend := "never"
	if mp.normalizer.addDummyPrefix {
		prepend = "always"
	}
	j := map[string]any{
		"version": "1.0", "added_tokens": added,
		"normalizer":    map[string]any{"type": "Sequence", "normalizers": norms},
		"pre_tokenizer": map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": prepend, "split": true},
		"model":         map[string]any{"type": "Unigram", "unk_id": mp.trainer.unkID, "vocab": vocab, "byte_fallback": mp.trainer.byteFallback},
	}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTokenizerJSON: the tokenizer.json of each golden and test model
// (as transformers converts it) loads, from the file and from a folder
// holding only it, to a model that encodes every golden and test string
// to the spiece.model's ids.
func TestTokenizerJSON(t *testing.T) {
	g, dir := loadGolden(t)
	var texts []string
	for _, c := range g.Cases {
		texts = append(texts, c.Raw, c.Cleaned)
	}
	var cases spmCases
	data, err := os.ReadFile(filepath.Join("testdata", "spm_cases.json"))
	if err != nil || json.Unmarshal(data, &cases) != nil {
		t.Fatalf("spm_cases.json: %v", err)
	}
	for _, cs := range cases.Models {
		for _, c := range cs {
			texts = append(texts, c.Text)
		}
	}
	models := map[string]string{"testdata/custom.model": "", "testdata/nodummy.model": ""}
	for _, n := range goldenModelNames(g) {
		models[filepath.Join(dir, n)] = ""
	}
	for path := range models {
		t.Run(filepath.Base(path), func(t *testing.T) {
			spm, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Parse(spm)
			if err != nil {
				t.Fatal(err)
			}
			folder := t.TempDir()
			jp := filepath.Join(folder, JSONFile)
			if err := os.WriteFile(jp, toJSON(t, spm), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{jp, folder} {
				got, err := Load(p)
				if err != nil {
					t.Fatal(err)
				}
				if got.VocabSize() != want.VocabSize() || got.Spec().ByteFallback != want.Spec().ByteFallback || got.Spec().AddDummyPrefix != want.Spec().AddDummyPrefix {
					t.Fatalf("spec %+v, spiece.model's %+v", got.Spec(), want.Spec())
				}
				for _, s := range texts {
					a, errA := want.Encode(s)
					b, errB := got.Encode(s)
					if (errA == nil) != (errB == nil) || !slices.Equal(a, b) {
						t.Fatalf("Encode(%+q): %v (%v), spiece.model %v (%v)", s, b, errB, a, errA)
					}
				}
			}
		})
	}
	// What is not a converted SentencePiece model is refused, named.
	for _, c := range []struct{ json, says string }{
		{`{"model":{"type":"BPE","vocab":{}}}`, `model "BPE"`},
		{`{"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0],["a",-1]]},"pre_tokenizer":{"type":"ByteLevel"}}`, `pre-tokenizer "ByteLevel"`},
		{`{"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0],["a",-1]]},"normalizer":{"type":"Lowercase"},"pre_tokenizer":{"type":"Metaspace"}}`, `normalizer "Lowercase"`},
		{`{"model":{"type":"Unigram","unk_id":5,"vocab":[["<unk>",0],["a",-1]]},"pre_tokenizer":{"type":"Metaspace"}}`, "no unk_id"},
	} {
		if _, err := ParseJSON([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %q", c.json, err, c.says)
		}
	}
}
