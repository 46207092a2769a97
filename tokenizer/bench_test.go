package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/golden"
)

func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"testdata/custom.model", "golden:spiece.model"} {
		path := name
		if rest, ok := strings.CutPrefix(name, "golden:"); ok {
			path = filepath.Join(golden.T5(b), rest)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(filepath.Base(path), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchPrompt returns a prompt of about n pieces under m: English prompt
// sentences of the golden cases, repeated.
func benchPrompt(b *testing.B, m *Model, n int, cjk bool) string {
	g, _ := loadGoldenForBench(b)
	var parts []string
	for _, c := range g.Cases {
		if (!cjk && c.Category == "english_prompt") || (cjk && (c.Category == "cjk" || c.Category == "wan_example")) {
			parts = append(parts, c.Raw)
		}
	}
	var sb strings.Builder
	for i := 0; ; i++ {
		ids, _ := m.Encode(Clean(sb.String()))
		if len(ids) >= n {
			break
		}
		sb.WriteString(parts[i%len(parts)])
		sb.WriteByte(' ')
	}
	return sb.String()
}

func loadGoldenForBench(b *testing.B) (*goldenFile, string) {
	dir := golden.T5(b)
	data, err := os.ReadFile(filepath.Join(dir, "tokenize.json"))
	if err != nil {
		b.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(data, &g); err != nil {
		b.Fatal(err)
	}
	return &g, dir
}

// BenchmarkEncode times a 512-piece prompt: Encode alone (normalize and
// Viterbi), and EncodeT5 (Clean, Encode, padding to 512).
func BenchmarkEncode(b *testing.B) {
	m, err := Load(filepath.Join(golden.T5(b), "spiece.model"))
	if err != nil {
		b.Fatal(err)
	}
	for _, cjk := range []bool{false, true} {
		name := "english"
		if cjk {
			name = "chinese"
		}
		prompt := benchPrompt(b, m, 512, cjk)
		cleaned := Clean(prompt)
		b.Run(name+"/Encode", func(b *testing.B) {
			b.SetBytes(int64(len(cleaned)))
			for b.Loop() {
				if _, err := m.Encode(cleaned); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/Clean", func(b *testing.B) {
			b.SetBytes(int64(len(prompt)))
			for b.Loop() {
				Clean(prompt)
			}
		})
		b.Run(name+"/EncodeT5", func(b *testing.B) {
			b.SetBytes(int64(len(prompt)))
			for b.Loop() {
				if _, err := m.EncodeT5(prompt, 512); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
