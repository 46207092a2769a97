package generate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/internal/filehash"
	"github.com/densitykv/densitykv/internal/finite"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/t5"
	"github.com/densitykv/densitykv/tokenizer"
	"github.com/densitykv/densitykv/weights"
)

// TextOptions configures the text stage: Wan2.1's umT5 encoder and its
// SentencePiece tokenizer, at the DiT's text length.
type TextOptions struct {
	Encoder   string // umT5 encoder: checkpoint or folder in a layout package weights reads (models_t5_umt5-xxl-enc-bf16.pth, google/umt5-xxl, a diffusers model)
	Tokenizer string // spiece.model, or a folder holding it (google/umt5-xxl, a diffusers model or its tokenizer/)
	// TextLen is the token length of a prompt (EOS included): the DiT's
	// text length, wan.Config.TextLen (512 for Wan2.1).
	TextLen int
	// CacheDir, when set, keeps every embedding computed, keyed by the
	// prompt, the encoder's and the tokenizer's content and TextLen
	// (CacheKey); embeddings found there are not computed again.
	CacheDir string
	// Progress, when set, is called after each prompt encoded (done of
	// total prompts that missed the cache).
	Progress func(done, total int)
	// Warn, when set, receives warnings: a prompt truncated at TextLen, a
	// damaged cache file.
	Warn func(msg string)
	// Discard, with CacheDir set, leaves the embeddings' Values nil once
	// they are in the cache (read them with ReadEmbedding(CachePath(…))),
	// so that a long list of prompts is not held in memory.
	Discard bool
	// Loading, when set, is called while the encoder's weights are read
	// (bytes read so far and the total); Loaded, once they are, with what
	// was read (t5.Model.Loaded).
	Loading func(done, total int64)
	Loaded  func(desc string)
	// Precision is the encoder's compute precision (t5.Model.Precision;
	// the weights are bfloat16 either way): generate's --precision, bf16
	// for the real umT5-XXL, fp32 for the tiny golden encoder; bf16-fast
	// runs its linears on Backend's tensor cores (Backend must be in fast
	// mode: gpu.Opened.BackendFor). It is part of the cache key (exact
	// precisions keep their keys; a bf16-fast embedding never serves an
	// exact run, nor the other way round).
	Precision compute.Precision
	// Backend, when set, is where the encoder computes (t5.Model.UseBackend;
	// nil: the CPU): its weights go there for the encoding and are freed
	// before EncodePrompts returns. Exact mode gives the CPU's bits, so the
	// cache key does not name it. DeviceMemory, when positive, is the
	// device-local memory the weights must fit (a larger encoder is
	// refused before anything is uploaded).
	Backend      compute.Backend
	DeviceMemory int64
}

// TextInputs describes the text stage's inputs once checked (CheckText).
type TextInputs struct {
	Encoder       t5.Config
	EncoderSum    filehash.Sum
	Tokenizer     *tokenizer.Model
	TokenizerPath string // the spiece.model file
	TokenizerSum  filehash.Sum
}

// CheckText checks the text stage's input files without reading the
// encoder's weights (t5.Inspect) and identifies them (filehash): the
// tokenizer is loaded (a few MB), the encoder's tensors are checked for
// names, shapes and dtypes. Errors name the file.
func CheckText(o TextOptions) (*TextInputs, error) {
	if o.Encoder == "" || o.Tokenizer == "" {
		return nil, fmt.Errorf("generate: text: need a text encoder (%q) and a tokenizer (%q)", o.Encoder, o.Tokenizer)
	}
	if o.TextLen < 1 || o.TextLen > tokenizer.MaxTextLen {
		return nil, fmt.Errorf("generate: text: text length %d, want 1..%d", o.TextLen, tokenizer.MaxTextLen)
	}
	in := &TextInputs{}
	var err error
	if in.TokenizerPath, err = weights.TokenizerFile(o.Tokenizer); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	if in.Tokenizer, err = tokenizer.Load(in.TokenizerPath); err != nil {
		return nil, fmt.Errorf("generate: tokenizer %s: %w", o.Tokenizer, err)
	}
	if in.TokenizerSum, err = filehash.File(in.TokenizerPath); err != nil {
		return nil, fmt.Errorf("generate: tokenizer: %w", err)
	}
	if in.Encoder, err = t5.Inspect(o.Encoder, t5.LoadOptions{}); err != nil {
		return nil, fmt.Errorf("generate: text encoder: %w", err)
	}
	if err := CheckVocab(in.Tokenizer.VocabSize(), in.Encoder.Vocab); err != nil {
		return nil, fmt.Errorf("generate: tokenizer %s and text encoder %s: %w", o.Tokenizer, o.Encoder, err)
	}
	if in.EncoderSum, err = filehash.Path(o.Encoder); err != nil {
		return nil, fmt.Errorf("generate: text encoder: %w", err)
	}
	return in, nil
}

// MaxExtraRows is how many more rows than the tokenizer has pieces a text
// encoder's embedding may have: T5's sentinel ids and padding (umT5-XXL:
// 256,000 pieces, 256,384 rows).
const MaxExtraRows = 1024

// CheckVocab checks a tokenizer of pieces pieces against a text encoder
// whose embedding has rows rows: a piece id beyond the rows cannot be
// embedded, and far fewer pieces than rows means the tokenizer is
// another model's (its ids would pick unrelated rows: garbage
// conditioning, with no error).
func CheckVocab(pieces, rows int) error {
	switch {
	case pieces > rows:
		return fmt.Errorf("the tokenizer has %d pieces, more than the %d rows of the encoder's embedding: they are not a pair", pieces, rows)
	case rows-pieces > MaxExtraRows:
		return fmt.Errorf("the tokenizer has %d pieces and the encoder's embedding %d rows (at most %d more rows are T5's sentinel ids and padding): the tokenizer is not the encoder's (umT5-XXL's has 256,000 pieces for 256,384 rows)", pieces, rows, MaxExtraRows)
	}
	return nil
}

// CacheKey is the cache key of a prompt's embedding: the SHA-256 of the
// prompt, the encoder's and the tokenizer's content (filehash), the text
// length and the encoder's precision.
func (in *TextInputs) CacheKey(prompt string, textLen int, prec compute.Precision) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "densitykv text embedding v2\x00%s\x00%s\x00%d\x00%s\x00", in.EncoderSum, in.TokenizerSum, textLen, prec)
	b.WriteString(prompt)
	return filehash.Bytes(b.Bytes())
}

// Embedding is one prompt's text-encoder output, as Wan's T5EncoderModel
// returns it: SeqLen rows (the pieces and the EOS) of Dim values; the DiT
// zero-pads it to its text length.
type Embedding struct {
	Prompt    string
	Cleaned   string // the prompt after Wan's clean
	Pieces    int    // tokens before truncation (EOS not counted)
	SeqLen    int    // rows: min(Pieces, TextLen−1) + 1
	TextLen   int
	Truncated bool // the prompt lost pieces at TextLen
	// Precision is the encoder's compute precision ("" in files written
	// before it was recorded).
	Precision string
	Dim       int
	Values    []float32 // [SeqLen][Dim]
	// Encoder and Tokenizer identify the files that made it.
	Encoder, Tokenizer string // filehash.Sum.String()
	Key                string // CacheKey
	// Cached says it was read from the cache rather than computed.
	Cached bool
}

// Text is the embedding as a rollout text source, labelled label.
func (e *Embedding) Text(label string) rollout.TextValues {
	return rollout.TextValues{Name: label, Values: e.Values, Rows: e.SeqLen, Dim: e.Dim}
}

// TruncationWarning is the warning for a truncated prompt.
func (e *Embedding) TruncationWarning() string {
	return fmt.Sprintf("warning: prompt %q has %d tokens; the text length %d keeps the first %d and the EOS (the rest is ignored, as Wan does)",
		short(e.Prompt), e.Pieces, e.TextLen, e.TextLen-1)
}

func short(s string) string {
	r := []rune(s)
	if len(r) > 60 {
		return string(r[:57]) + "..."
	}
	return s
}

// EncodePrompts returns the embeddings of prompts, in order: read from
// o.CacheDir where present, else computed by the encoder, which is loaded
// once for all the prompts that need it (and never when every prompt is
// cached) and released before EncodePrompts returns, with its memory
// handed back to the operating system, so that the DiT can load next
// (umT5-XXL holds 11.4 GB). Computed embeddings are written to the cache.
// in is CheckText's result for o.
func EncodePrompts(o TextOptions, in *TextInputs, prompts []string) ([]*Embedding, error) {
	out := make([]*Embedding, len(prompts))
	type job struct {
		i   int
		tok *tokenizer.T5Tokens
	}
	var jobs []job
	byKey := map[string]int{} // first prompt of each key
	for i, p := range prompts {
		key := in.CacheKey(p, o.TextLen, o.Precision)
		if j, ok := byKey[key]; ok {
			out[i] = out[j] // filled below when it is a job
			continue
		}
		byKey[key] = i
		if o.CacheDir != "" {
			e, err := ReadEmbedding(CachePath(o.CacheDir, key))
			switch {
			case err == nil && e.Key == key && e.Prompt == p && e.Dim == in.Encoder.Dim:
				e.Cached = true
				if o.Discard {
					e.Values = nil
				}
				out[i] = e
				continue
			case err == nil:
				o.warn(fmt.Sprintf("warning: text cache %s holds another embedding; computing it again", CachePath(o.CacheDir, key)))
			case !errors.Is(err, os.ErrNotExist):
				o.warn(fmt.Sprintf("warning: text cache: %v; computing it again", err))
			}
		}
		tok, err := in.Tokenizer.EncodeT5(p, o.TextLen)
		if err != nil {
			return nil, fmt.Errorf("generate: prompt %d: %w", i, err)
		}
		jobs = append(jobs, job{i, tok})
	}
	if len(jobs) > 0 {
		if compute.ModeOf(o.Backend) != o.Precision.Mode {
			return nil, fmt.Errorf("generate: text encoder: precision %v on a backend in %v mode (%v)", o.Precision, compute.ModeOf(o.Backend), o.Backend)
		}
		m, err := t5.Load(o.Encoder, t5.LoadOptions{Precision: o.Precision.Prec, Progress: o.Loading})
		if err != nil {
			return nil, fmt.Errorf("generate: text encoder: %w", err)
		}
		if o.Loaded != nil {
			o.Loaded(m.Loaded)
		}
		if m.Config != in.Encoder {
			return nil, fmt.Errorf("generate: text encoder %s changed since it was checked", o.Encoder)
		}
		if o.Backend != nil {
			need := m.WeightBytes() + m.WorkspaceBytes()
			if o.DeviceMemory > 0 && need > o.DeviceMemory {
				return nil, fmt.Errorf("generate: text encoder: its weights and workspace need %.2f GiB on %v, which has %.2f GiB of device-local memory; encode on the CPU (--device cpu)",
					float64(need)/(1<<30), o.Backend, float64(o.DeviceMemory)/(1<<30))
			}
			m.UseBackend(o.Backend)
			defer m.UseBackend(nil) // the encoder's weights leave the device with it
		}
		for n, j := range jobs {
			mask := make([]int32, len(j.tok.Mask))
			for k, b := range j.tok.Mask {
				if b {
					mask[k] = 1
				}
			}
			v, err := m.Encode(j.tok.IDs, mask)
			if err != nil {
				return nil, fmt.Errorf("generate: prompt %d: %w", j.i, err)
			}
			p := prompts[j.i]
			e := &Embedding{Prompt: p, Cleaned: j.tok.Cleaned, Pieces: j.tok.Pieces, SeqLen: j.tok.SeqLen, TextLen: o.TextLen,
				Truncated: j.tok.Truncated, Precision: o.Precision.String(), Dim: m.Config.Dim, Values: v, Encoder: in.EncoderSum.String(), Tokenizer: in.TokenizerSum.String(),
				Key: in.CacheKey(p, o.TextLen, o.Precision)}
			if err := e.check(); err != nil {
				return nil, fmt.Errorf("generate: prompt %d: %w", j.i, err)
			}
			out[j.i] = e
			if o.CacheDir != "" {
				if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
					return nil, fmt.Errorf("generate: text cache: %w", err)
				}
				if err := e.Write(CachePath(o.CacheDir, e.Key)); err != nil {
					return nil, err
				}
				if o.Discard {
					e.Values = nil
				}
			}
			if o.Progress != nil {
				o.Progress(n+1, len(jobs))
			}
		}
		// Release the encoder before the DiT loads.
		m = nil
		runtime.GC()
		debug.FreeOSMemory()
	}
	for i, p := range prompts {
		if out[i] == nil { // a repeat of a computed prompt
			out[i] = out[byKey[in.CacheKey(p, o.TextLen, o.Precision)]]
		}
		if out[i].Truncated && byKey[in.CacheKey(p, o.TextLen, o.Precision)] == i {
			o.warn(out[i].TruncationWarning())
		}
	}
	return out, nil
}

func (o TextOptions) warn(msg string) {
	if o.Warn != nil {
		o.Warn(msg)
	}
}

// CachePath is the cache file of key in dir.
func CachePath(dir, key string) string { return filepath.Join(dir, key+".safetensors") }

// check validates an embedding's sizes and values.
func (e *Embedding) check() error {
	switch {
	case e.Dim <= 0 || e.SeqLen <= 0 || e.TextLen <= 0 || e.SeqLen > e.TextLen:
		return fmt.Errorf("embedding of %d rows of %d values for text length %d", e.SeqLen, e.Dim, e.TextLen)
	case len(e.Values) != e.SeqLen*e.Dim:
		return fmt.Errorf("embedding has %d values, want %d×%d", len(e.Values), e.SeqLen, e.Dim)
	}
	if i := finite.First(e.Values); i >= 0 {
		return fmt.Errorf("embedding has %v at row %d column %d", e.Values[i], i/e.Dim, i%e.Dim)
	}
	return nil
}

// The embedding file: a safetensors file with the tensor "context"
// [SeqLen][Dim] (what rollout.LoadText and --text read) and metadata.
const (
	embeddingFormat = "densitykv text embedding v1"
	embeddingTensor = "context"
)

// Write writes the embedding to path (atomically): tensor "context"
// [SeqLen][Dim] float32 and the prompt, its tokens and the files that
// made it as metadata.
func (e *Embedding) Write(path string) error {
	meta := map[string]string{
		"format": embeddingFormat, "prompt": e.Prompt, "cleaned": e.Cleaned,
		"pieces": strconv.Itoa(e.Pieces), "seq_len": strconv.Itoa(e.SeqLen), "text_len": strconv.Itoa(e.TextLen),
		"truncated": strconv.FormatBool(e.Truncated), "text_encoder": e.Encoder, "tokenizer": e.Tokenizer, "key": e.Key,
	}
	if e.Precision != "" {
		meta["precision"] = e.Precision
	}
	err := atomicfile.Write(path, func(w io.Writer) error {
		return checkpoint.WriteSafetensors(w, []checkpoint.WriteTensor{{Name: embeddingTensor, Shape: []int{e.SeqLen, e.Dim}, Data: e.Values}}, meta)
	})
	if err != nil {
		return fmt.Errorf("generate: write embedding %s: %w", path, err)
	}
	return nil
}

// ReadEmbedding reads an embedding file written by Embedding.Write,
// checking its metadata, shape and values.
func ReadEmbedding(path string) (*Embedding, error) {
	s, err := checkpoint.OpenSafetensors(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	md := s.Metadata
	if md["format"] != embeddingFormat {
		return nil, fmt.Errorf("embedding %s: format %q, want %q", path, md["format"], embeddingFormat)
	}
	e := &Embedding{Prompt: md["prompt"], Cleaned: md["cleaned"], Encoder: md["text_encoder"], Tokenizer: md["tokenizer"], Key: md["key"], Precision: md["precision"]}
	var perr error
	atoi := func(k string) int {
		n, err := strconv.Atoi(md[k])
		if err != nil {
			perr = errors.Join(perr, fmt.Errorf("metadata %s = %q", k, md[k]))
		}
		return n
	}
	e.Pieces, e.SeqLen, e.TextLen = atoi("pieces"), atoi("seq_len"), atoi("text_len")
	if e.Truncated, err = strconv.ParseBool(md["truncated"]); err != nil {
		perr = errors.Join(perr, fmt.Errorf("metadata truncated = %q", md["truncated"]))
	}
	if perr != nil {
		return nil, fmt.Errorf("embedding %s: %w", path, perr)
	}
	v, shape, err := s.Float32(embeddingTensor)
	if err != nil {
		return nil, fmt.Errorf("embedding %s: %w", path, err)
	}
	if len(shape) != 2 || shape[0] != e.SeqLen {
		return nil, fmt.Errorf("embedding %s: tensor %s has shape %v, want [%d, dim]", path, embeddingTensor, shape, e.SeqLen)
	}
	e.Dim, e.Values = shape[1], v
	if err := e.check(); err != nil {
		return nil, fmt.Errorf("embedding %s: %w", path, err)
	}
	return e, nil
}
