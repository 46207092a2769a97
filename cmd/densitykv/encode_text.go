package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/generate"
	"github.com/densitykv/densitykv/t5"
)

func init() { register(newEncodeTextCmd) }

func newEncodeTextCmd() *cobra.Command {
	var o generate.TextOptions
	var prompt, outPath, precision string
	dev := device.CPU
	var jsonOut, quiet bool
	cmd := &cobra.Command{
		Use:   "encode-text",
		Short: "Encode a prompt with Wan2.1's umT5 text encoder into a --text file",
		Long: `encode-text runs a prompt through Wan2.1's text stage: the prompt clean
(ftfy, HTML unescape, whitespace), the SentencePiece tokenizer with T5's
EOS, truncation and padding to --text-len tokens, and the umT5 encoder
(bfloat16 weights; --precision fp32|bf16|bf16-fast is its compute
precision, as generate's: bf16 by default for umT5-XXL, fp32 for a smaller
test encoder; bf16-fast runs its linears on a GPU's tensor cores,
--device vulkan with VK_NV_cooperative_matrix, not the CPU's bits). It writes the encoder output [seq_len, dim] as tensor
"context" of a safetensors file, with the prompt, its tokens and the
hashes of the encoder and tokenizer as metadata: what generate --text reads.
A prompt longer than --text-len tokens is truncated, with a warning.`,
		Example: `  densitykv encode-text --text-encoder models_t5_umt5-xxl-enc-bf16.pth --tokenizer google/umt5-xxl \
      --prompt "a red panda walks through snow, cinematic" -o emb.safetensors`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("prompt") {
				return usagef("--prompt is required")
			}
			if outPath == "" {
				return usagef("-o (the output .safetensors file) is required")
			}
			if st, err := os.Stat(filepath.Dir(outPath)); err != nil || !st.IsDir() {
				return usagef("-o %s: folder %s does not exist", outPath, filepath.Dir(outPath))
			}
			in, err := generate.CheckText(o)
			if err != nil {
				return usagef("--text-encoder/--tokenizer: %w", err)
			}
			o.Precision = compute.Exactly(config.DefaultPrecision("1.3b"))
			if in.Encoder.Dim < t5.UMT5XXL().Dim {
				o.Precision = compute.Exactly(config.DefaultPrecision("tiny"))
			}
			if cmd.Flags().Changed("precision") {
				if err := o.Precision.UnmarshalText([]byte(strings.TrimSpace(precision))); err != nil {
					return usagef("--precision: %v", err)
				}
			}
			cd, err := openDevice(dev)
			if err != nil {
				return err
			}
			defer cd.Close()
			if o.Backend, err = backendFor(cd, o.Precision); err != nil {
				return err
			}
			o.DeviceMemory = int64(cd.Choice.Device.DeviceLocalBytes())
			stderr := cmd.ErrOrStderr()
			o.Warn = func(msg string) { fmt.Fprintln(stderr, msg) }
			prog := newProgress(stderr, "encode (prompts)", 1, 0, quiet)
			o.Progress = func(done, _ int) { prog.add(done - prog.done) }
			began := time.Now()
			es, err := generate.EncodePrompts(o, in, []string{prompt})
			prog.finish()
			if err != nil {
				return err
			}
			e := es[0]
			if err := e.Write(outPath); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				return printJSON(w, map[string]any{"output": outPath, "prompt": e.Prompt, "cleaned": e.Cleaned, "pieces": e.Pieces,
					"seq_len": e.SeqLen, "text_len": e.TextLen, "truncated": e.Truncated, "precision": e.Precision, "dim": e.Dim, "cached": e.Cached,
					"text_encoder": e.Encoder, "tokenizer": e.Tokenizer, "elapsed_seconds": time.Since(began).Seconds()})
			}
			fmt.Fprintf(w, "%s: context [%d, %d] (%d tokens + EOS%s) in %.1f s\n", outPath, e.SeqLen, e.Dim, min(e.Pieces, e.TextLen-1),
				map[bool]string{true: ", truncated", false: ""}[e.Truncated], time.Since(began).Seconds())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Encoder, "text-encoder", "", "umT5 text encoder checkpoint (models_t5_umt5-xxl-enc-bf16.pth or .safetensors)")
	f.StringVar(&o.Tokenizer, "tokenizer", "", "spiece.model, or a folder holding it (google/umt5-xxl)")
	f.IntVar(&o.TextLen, "text-len", 512, "tokens per prompt, EOS included: the DiT's text length (512 for Wan2.1, 8 for the tiny golden DiT)")
	f.StringVar(&o.CacheDir, "text-cache", "", "folder of cached embeddings to read and add to (default: none)")
	f.StringVar(&prompt, "prompt", "", "the prompt")
	f.StringVar(&precision, "precision", "", "the encoder's compute precision, fp32, bf16 or bf16-fast (default: bf16 for umT5-XXL, fp32 for smaller encoders; "+fastUsage+")")
	f.StringVarP(&outPath, "output", "o", "", "output .safetensors file")
	f.Var(&dev, "device", "where the encoder computes: "+device.Values+" (exact mode: the same embedding on every device; Vulkan needs a build with -tags vulkan)")
	f.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	f.BoolVar(&quiet, "quiet", false, "no progress output")
	return cmd
}
