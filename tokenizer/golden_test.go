package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/densitykv/densitykv/golden"
)

// The schema of tokenize.json (see ../shared/golden/t5/README.md).
type goldenFile struct {
	Format         string                 `json:"format"`
	Cleaning       goldenCleaning         `json:"cleaning"`
	PostProcessing goldenPost             `json:"post_processing"`
	TextLens       []int                  `json:"text_lens"`
	Models         map[string]goldenModel `json:"models"`
	NCases         int                    `json:"n_cases"`
	NTruncated512  map[string]int         `json:"n_truncated_at_512"`
	Categories     map[string]int         `json:"categories"`
	Cases          []goldenCase           `json:"cases"`
}

type goldenCleaning struct {
	Order []string `json:"order"`
}

type goldenPost struct {
	EOSID int `json:"eos_id"`
	PadID int `json:"pad_id"`
}

type goldenModel struct {
	SHA256         string `json:"sha256"`
	VocabSize      int    `json:"vocab_size"`
	ByteFallback   bool   `json:"byte_fallback"`
	NBytePieces    int    `json:"n_byte_pieces"`
	ModelType      string `json:"model_type"`
	SplitDigits    bool   `json:"split_digits"`
	MaxPieceLength int    `json:"max_sentencepiece_length"`
	TreatWSSuffix  bool   `json:"treat_whitespace_as_suffix"`
	Normalizer     struct {
		Name                   string `json:"name"`
		AddDummyPrefix         bool   `json:"add_dummy_prefix"`
		RemoveExtraWhitespaces bool   `json:"remove_extra_whitespaces"`
		EscapeWhitespaces      bool   `json:"escape_whitespaces"`
		CharsmapBytes          int    `json:"precompiled_charsmap_bytes"`
	} `json:"normalizer"`
	IDs struct {
		Pad int `json:"pad"`
		EOS int `json:"eos"`
		Unk int `json:"unk"`
		BOS int `json:"bos"`
	} `json:"ids"`
}

type goldenCase struct {
	Index         int                          `json:"index"`
	Category      string                       `json:"category"`
	Raw           string                       `json:"raw"`
	Cleaned       string                       `json:"cleaned"`
	CleanedNoFTFY string                       `json:"cleaned_no_ftfy"`
	Tokens        map[string]goldenModelTokens `json:"tokens"`
}

type goldenModelTokens struct {
	NPieces        int      `json:"n_pieces"`
	PieceIDs       []int    `json:"piece_ids"`
	Pieces         []string `json:"pieces"`
	PieceIDsNoFTFY []int    `json:"piece_ids_no_ftfy"`
	// text_len_L entries, decoded by UnmarshalJSON.
	ByLen map[int]goldenPadded `json:"-"`
}

type goldenPadded struct {
	InputIDs      []int `json:"input_ids"`
	AttentionMask []int `json:"attention_mask"`
	SeqLen        int   `json:"seq_len"`
	Truncated     bool  `json:"truncated"`
}

func (g *goldenModelTokens) UnmarshalJSON(b []byte) error {
	type plain goldenModelTokens
	if err := json.Unmarshal(b, (*plain)(g)); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	g.ByLen = map[int]goldenPadded{}
	for k, v := range all {
		var l int
		if _, err := fmt.Sscanf(k, "text_len_%d", &l); err != nil {
			continue
		}
		var p goldenPadded
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		g.ByLen[l] = p
	}
	return nil
}

var (
	goldenOnce sync.Once
	goldenData *goldenFile
	goldenDir  string
	goldenErr  error
)

// loadGolden reads tokenize.json once; it fails the test when the golden
// folder or file is missing.
func loadGolden(t *testing.T) (*goldenFile, string) {
	t.Helper()
	dir := golden.T5(t)
	goldenOnce.Do(func() {
		goldenDir = dir
		data, err := os.ReadFile(filepath.Join(dir, "tokenize.json"))
		if err != nil {
			goldenErr = err
			return
		}
		goldenData = &goldenFile{}
		goldenErr = json.Unmarshal(data, goldenData)
	})
	if goldenErr != nil {
		t.Fatalf("tokenize.json: %v", goldenErr)
	}
	if len(goldenData.Cases) == 0 || len(goldenData.Cases) != goldenData.NCases {
		t.Fatalf("tokenize.json holds %d cases, n_cases says %d", len(goldenData.Cases), goldenData.NCases)
	}
	if len(goldenData.Models) != 2 || len(goldenData.TextLens) == 0 {
		t.Fatalf("tokenize.json: %d models, text_lens %v", len(goldenData.Models), goldenData.TextLens)
	}
	return goldenData, goldenDir
}

func goldenModelNames(g *goldenFile) []string {
	names := make([]string, 0, len(g.Models))
	for n := range g.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var modelCache sync.Map // path -> *Model

func loadGoldenModel(t *testing.T, dir, name string) *Model {
	t.Helper()
	path := filepath.Join(dir, name)
	if m, ok := modelCache.Load(path); ok {
		return m.(*Model)
	}
	m, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	modelCache.Store(path, m)
	return m
}

// TestGoldenModels checks each model file's hash and that Load reads the
// settings tokenize.json records for it.
func TestGoldenModels(t *testing.T) {
	g, dir := loadGolden(t)
	for _, name := range goldenModelNames(g) {
		want := g.Models[name]
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != want.SHA256 {
				t.Fatalf("%s: sha256 %x, tokenize.json says %s", name, sum, want.SHA256)
			}
			m := loadGoldenModel(t, dir, name)
			s := m.Spec()
			checks := []struct {
				what      string
				got, want any
			}{
				{"vocab size", s.Pieces, want.VocabSize},
				{"byte_fallback", s.ByteFallback, want.ByteFallback},
				{"byte pieces", s.BytePieces, want.NBytePieces},
				{"model type", "unigram", want.ModelType},
				{"split_digits", s.SplitDigits, want.SplitDigits},
				{"max piece length", s.MaxPieceLength, want.MaxPieceLength},
				{"treat_whitespace_as_suffix", s.TreatWhitespaceAsSuffix, want.TreatWSSuffix},
				{"normalizer name", s.NormalizerName, want.Normalizer.Name},
				{"add_dummy_prefix", s.AddDummyPrefix, want.Normalizer.AddDummyPrefix},
				{"remove_extra_whitespaces", s.RemoveExtraWhitespaces, want.Normalizer.RemoveExtraWhitespaces},
				{"escape_whitespaces", s.EscapeWhitespaces, want.Normalizer.EscapeWhitespaces},
				{"charsmap bytes", s.CharsmapBytes, want.Normalizer.CharsmapBytes},
				{"unk id", s.UnkID, want.IDs.Unk},
				{"trainer unk id", s.TrainerUnkID, want.IDs.Unk},
				{"trainer bos id", s.TrainerBOSID, want.IDs.BOS},
				{"trainer eos id", s.TrainerEOSID, want.IDs.EOS},
				{"trainer pad id", s.TrainerPadID, want.IDs.Pad},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
				}
			}
			eos, pad, err := m.t5Specials()
			if err != nil {
				t.Fatal(err)
			}
			if eos != want.IDs.EOS || eos != g.PostProcessing.EOSID || pad != want.IDs.Pad || pad != g.PostProcessing.PadID {
				t.Errorf("T5 specials: eos %d pad %d, want eos %d pad %d", eos, pad, want.IDs.EOS, want.IDs.Pad)
			}
		})
	}
}

// TestGoldenTokenize checks every case of tokenize.json, for both models and
// every text_len: the cleaned string, the piece ids and pieces (and those of
// the clean without ftfy, where recorded), and the padded ids, mask, seq_len
// and truncation flag of EncodeT5.
func TestGoldenTokenize(t *testing.T) {
	g, dir := loadGolden(t)
	type tally struct{ pass, fail int }
	counts := map[string]*tally{}
	for _, name := range goldenModelNames(g) {
		m := loadGoldenModel(t, dir, name)
		truncatedAt512 := 0
		for _, c := range g.Cases {
			want, ok := c.Tokens[name]
			if !ok {
				t.Fatalf("case %d has no tokens for %s", c.Index, name)
			}
			if Clean(c.Raw) != c.Cleaned {
				t.Errorf("case %d (%s): Clean(%+q) = %+q, want %+q", c.Index, c.Category, c.Raw, Clean(c.Raw), c.Cleaned)
			}
			ids, err := m.Encode(c.Cleaned)
			if err != nil {
				t.Fatalf("case %d: %v", c.Index, err)
			}
			if !slices.Equal(ids, want.PieceIDs) || len(ids) != want.NPieces {
				t.Errorf("%s case %d (%s) %+q:\n got %v\nwant %v", name, c.Index, c.Category, c.Cleaned, ids, want.PieceIDs)
			}
			if len(want.Pieces) != len(ids) {
				t.Errorf("%s case %d: %d pieces recorded for %d ids", name, c.Index, len(want.Pieces), len(want.PieceIDs))
			} else {
				for i, id := range ids {
					if p, _ := m.Piece(id); p != want.Pieces[i] {
						t.Errorf("%s case %d: piece %d is %q, want %q", name, c.Index, i, p, want.Pieces[i])
					}
				}
			}
			if want.PieceIDsNoFTFY != nil {
				if c.CleanedNoFTFY == c.Cleaned {
					t.Errorf("case %d: piece_ids_no_ftfy recorded for an unchanged clean", c.Index)
				}
				noFTFY, err := m.Encode(c.CleanedNoFTFY)
				if err != nil || !slices.Equal(noFTFY, want.PieceIDsNoFTFY) {
					t.Errorf("%s case %d no-ftfy %+q:\n got %v\nwant %v (%v)", name, c.Index, c.CleanedNoFTFY, noFTFY, want.PieceIDsNoFTFY, err)
				}
			}
			if len(want.ByLen) != len(g.TextLens) {
				t.Fatalf("%s case %d: %d text_len entries, want %d", name, c.Index, len(want.ByLen), len(g.TextLens))
			}
			for _, L := range g.TextLens {
				key := fmt.Sprintf("%s text_len_%d", name, L)
				if counts[key] == nil {
					counts[key] = &tally{}
				}
				wp, ok := want.ByLen[L]
				if !ok {
					t.Fatalf("%s case %d: no text_len_%d", name, c.Index, L)
				}
				got, err := m.EncodeT5(c.Raw, L)
				if err != nil {
					t.Fatalf("%s case %d text_len %d: %v", name, c.Index, L, err)
				}
				if ok := checkPadded(t, fmt.Sprintf("%s case %d (%s)", key, c.Index, c.Category), got, wp, c.Cleaned); ok {
					counts[key].pass++
				} else {
					counts[key].fail++
				}
				if L == 512 && got.Truncated {
					truncatedAt512++
				}
			}
		}
		if truncatedAt512 != g.NTruncated512[name] {
			t.Errorf("%s: %d cases truncated at 512, tokenize.json says %d", name, truncatedAt512, g.NTruncated512[name])
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var summary []string
	for _, k := range keys {
		summary = append(summary, fmt.Sprintf("%s: %d/%d", k, counts[k].pass, counts[k].pass+counts[k].fail))
	}
	t.Logf("golden cases passing: %s", strings.Join(summary, "; "))
}

func checkPadded(t *testing.T, what string, got *T5Tokens, want goldenPadded, cleaned string) bool {
	t.Helper()
	ok := true
	fail := func(format string, args ...any) {
		t.Errorf(what+": "+format, args...)
		ok = false
	}
	if got.Cleaned != cleaned {
		fail("cleaned %+q, want %+q", got.Cleaned, cleaned)
	}
	if len(got.IDs) != len(want.InputIDs) || len(got.Mask) != len(want.AttentionMask) {
		fail("%d ids and %d mask entries, want %d and %d", len(got.IDs), len(got.Mask), len(want.InputIDs), len(want.AttentionMask))
		return false
	}
	for i := range got.IDs {
		if int(got.IDs[i]) != want.InputIDs[i] {
			fail("input_ids[%d] = %d, want %d", i, got.IDs[i], want.InputIDs[i])
			break
		}
	}
	for i := range got.Mask {
		if b2i(got.Mask[i]) != want.AttentionMask[i] {
			fail("attention_mask[%d] = %v, want %d", i, got.Mask[i], want.AttentionMask[i])
			break
		}
	}
	if got.SeqLen != want.SeqLen {
		fail("seq_len %d, want %d", got.SeqLen, want.SeqLen)
	}
	if got.Truncated != want.Truncated {
		fail("truncated %v, want %v", got.Truncated, want.Truncated)
	}
	return ok
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
