package weights

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// ModelIndex is the file that marks a diffusers model folder.
const ModelIndex = "model_index.json"

// maxJSON bounds the JSON files read (indexes, configs).
const maxJSON = 64 << 20

// weightExt are the extensions of weight files found in a folder.
var weightExt = []string{".safetensors", ".pt", ".pth", ".bin", ".ckpt"}

func isWeightFile(name string) bool {
	return slices.Contains(weightExt, strings.ToLower(filepath.Ext(name))) && !strings.HasPrefix(name, ".")
}

// shardName matches the files of a sharded checkpoint without an index
// ("diffusion_pytorch_model-00001-of-00002.safetensors").
var shardName = regexp.MustCompile(`^(.*)-(\d+)-of-(\d+)(\.[A-Za-z]+)$`)

// Component returns where the kind's weights are under path: for a
// diffusers model folder (one with model_index.json) its sub-folder
// (transformer/, vae/, text_encoder/, tokenizer/), else path. A model
// folder without that component is an error naming what it has.
func Component(path string, k Kind) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("weights: %s %w", k.Flag(), err)
	}
	if !st.IsDir() {
		return path, nil
	}
	if _, err := os.Stat(filepath.Join(path, ModelIndex)); err != nil {
		return path, nil
	}
	sub := k.Component()
	if sub == "" {
		return "", fmt.Errorf("weights: %s %s is a diffusers model folder (%s), which holds no %s", k.Flag(), path, ModelIndex, k)
	}
	p := filepath.Join(path, sub)
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		return "", fmt.Errorf("weights: %s %s is a diffusers model folder (%s) without a %s/ folder (it has %s)", k.Flag(), path, ModelIndex, sub, listing(path))
	}
	return p, nil
}

// listing names a folder's entries for messages (at most 12).
func listing(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "nothing readable: " + err.Error()
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		return "nothing"
	}
	return firstN(names, 12)
}

// firstN joins the first n strings, saying how many more there are.
func firstN(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("%s, … (%d more)", strings.Join(s[:n], ", "), len(s)-n)
}

// fileSet is where a kind's weights are: one file, or the shards of an
// index, with the folder's config.json.
type fileSet struct {
	files  []string
	index  string // the shard index ("" without)
	config string // config.json beside the weights ("" without)
	dir    string // the folder given or found ("" for a file given)
}

// findFiles resolves path (a file, an index or a folder) to the files
// holding the kind's weights.
func findFiles(path string, k Kind) (*fileSet, error) {
	p, err := Component(path, k)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("weights: %s %w", k.Flag(), err)
	}
	if !st.IsDir() {
		if strings.HasSuffix(p, ".index.json") {
			return fromIndex(p, k)
		}
		fs := &fileSet{files: []string{p}}
		if c := filepath.Join(filepath.Dir(p), "config.json"); fileExists(c) && k != LoRA {
			fs.config = c
		}
		return fs, nil
	}
	dir := p
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("weights: %s %w", k.Flag(), err)
	}
	var indexes, files []string
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		switch n := e.Name(); {
		case strings.HasSuffix(n, ".index.json"):
			indexes = append(indexes, n)
		case isWeightFile(n):
			files = append(files, n)
		}
	}
	// A Hugging Face folder often ships the same weights twice,
	// safetensors and PyTorch (.bin): the safetensors are read.
	indexes, files = preferSafetensors(indexes), preferSafetensors(files)
	var fs *fileSet
	switch {
	case k == LoRA && slices.Contains(files, "adapter_model.safetensors"):
		fs = &fileSet{files: []string{filepath.Join(dir, "adapter_model.safetensors")}}
	case k == LoRA && slices.Contains(files, "adapter_model.bin"):
		fs = &fileSet{files: []string{filepath.Join(dir, "adapter_model.bin")}}
	case len(indexes) == 1:
		fs, err = fromIndex(filepath.Join(dir, indexes[0]), k)
	case len(indexes) > 1:
		return nil, &LayoutError{Path: path, Want: k, Found: fmt.Sprintf("a folder with %d shard indexes: %s", len(indexes), firstN(indexes, 6)),
			Looks: "several models in one folder: name the index file to use"}
	case len(files) == 1:
		fs = &fileSet{files: []string{filepath.Join(dir, files[0])}}
	case len(files) > 1:
		if sh := shards(files); sh != nil {
			fs = &fileSet{}
			for _, f := range sh {
				fs.files = append(fs.files, filepath.Join(dir, f))
			}
			break
		}
		return nil, &LayoutError{Path: path, Want: k, Found: fmt.Sprintf("a folder with %d weight files: %s", len(files), firstN(files, 8)),
			Looks: "several weight files and no shard index: name the file to use"}
	default:
		return nil, &LayoutError{Path: path, Want: k, Found: "a folder holding " + listing(dir), Looks: "no weight files (" + strings.Join(weightExt, ", ") + " or a *.index.json)"}
	}
	if err != nil {
		return nil, err
	}
	fs.dir = dir
	if c := filepath.Join(dir, "config.json"); fileExists(c) && k != LoRA {
		fs.config = c
	}
	return fs, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// shards returns files when they are exactly the numbered shards
// 1..N of one checkpoint (name-0000i-of-0000N.ext), in order, else nil.
func shards(files []string) []string {
	var stem, total, ext string
	got := map[int]string{}
	for _, f := range files {
		m := shardName.FindStringSubmatch(f)
		if m == nil || (stem != "" && (m[1] != stem || m[3] != total || m[4] != ext)) {
			return nil
		}
		stem, total, ext = m[1], m[3], m[4]
		var i int
		fmt.Sscan(m[2], &i)
		got[i] = f
	}
	var n int
	fmt.Sscan(total, &n)
	if n != len(files) {
		return nil
	}
	out := make([]string, n)
	for i := 1; i <= n; i++ {
		f, ok := got[i]
		if !ok {
			return nil
		}
		out[i-1] = f
	}
	return out
}

// shardIndex is a *.index.json of a sharded checkpoint (safetensors'
// and PyTorch's, as transformers and diffusers write them).
type shardIndex struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// fromIndex reads a shard index: the files it names, in the folder of
// the index.
func fromIndex(p string, k Kind) (*fileSet, error) {
	var idx shardIndex
	if err := readJSON(p, &idx); err != nil {
		return nil, fmt.Errorf("weights: %s shard index %s: %w", k.Flag(), p, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("weights: %s shard index %s: its weight_map is empty", k.Flag(), p)
	}
	seen := map[string]bool{}
	var files []string
	for name, f := range idx.WeightMap {
		if f == "" || f != filepath.Base(f) || strings.HasPrefix(f, ".") {
			return nil, fmt.Errorf("weights: %s shard index %s: tensor %s is in %q, want a file name in the index's folder", k.Flag(), p, name, f)
		}
		if !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	sort.Strings(files)
	fs := &fileSet{index: p}
	for _, f := range files {
		fp := filepath.Join(filepath.Dir(p), f)
		if !fileExists(fp) {
			return nil, fmt.Errorf("weights: %s shard index %s names %s, which is missing (%d shards: %s)", k.Flag(), p, f, len(files), firstN(files, 6))
		}
		fs.files = append(fs.files, fp)
	}
	return fs, nil
}

// readJSON decodes a JSON file of at most maxJSON bytes.
func readJSON(p string, v any) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxJSON+1))
	if err != nil {
		return err
	}
	if len(b) > maxJSON {
		return fmt.Errorf("larger than %d bytes", maxJSON)
	}
	return json.Unmarshal(b, v)
}

// TokenizerFile returns the tokenizer file under path: path itself when
// it is a file, else the folder's spiece.model, or its tokenizer.json
// when it has no spiece.model (a diffusers model folder's tokenizer/
// first). A folder with neither is a *LayoutError naming what it holds.
func TokenizerFile(path string) (string, error) {
	p, err := Component(path, Tokenizer)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("weights: --tokenizer %w", err)
	}
	if !st.IsDir() {
		return p, nil
	}
	for _, n := range []string{"spiece.model", "tokenizer.json"} {
		if f := filepath.Join(p, n); fileExists(f) {
			return f, nil
		}
	}
	return "", &LayoutError{Path: path, Want: Tokenizer, Found: "a folder holding " + listing(p), Looks: "no spiece.model or tokenizer.json"}
}

// Files returns the weight files that hold kind k's weights at path (a
// file, a shard index, a folder or a diffusers model folder), as Open
// finds them, without opening them.
func Files(path string, k Kind) ([]string, error) {
	fs, err := findFiles(path, k)
	if err != nil {
		return nil, err
	}
	return fs.files, nil
}

// preferSafetensors keeps the safetensors files (and indexes) of names
// when there are any, else all of names.
func preferSafetensors(names []string) []string {
	var st []string
	for _, n := range names {
		if strings.HasSuffix(strings.ToLower(strings.TrimSuffix(n, ".index.json")), ".safetensors") {
			st = append(st, n)
		}
	}
	if len(st) > 0 {
		return st
	}
	return names
}
