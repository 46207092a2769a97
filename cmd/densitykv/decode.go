package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/generate"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/video"
)

func init() { register(newDecodeCmd) }

func newDecodeCmd() *cobra.Command {
	var o generate.DecodeOptions
	var jsonOut, quiet bool
	var precision string
	var fps, crf int
	cmd := &cobra.Command{
		Use:   "decode RUN_FOLDER",
		Short: "Make a generate run's video again from its latents (Wan VAE → mp4)",
		Long: `decode reads the latents a generate run saved (manifest.json, latents/) and
decodes every completed block with the streaming Wan VAE decoder into the
run folder's video: segments/segment_NNNNN.mp4 per block, and video.mp4 and
the run's horizons (video_<S>s.mp4), each one continuous encode of the
frames (H.264 at the run's frame rate and crf, 16 fps and crf 18 unless the
run chose others, with the run's metadata from generation.json), or PNG
frames in frames/ when ffmpeg is not installed. It replaces the video files
the folder had, after checking every latent shard and config.resolved.yaml
against the SHA-256 the run recorded (manifest.json, state/checkpoint.json):
a file changed or damaged since is refused by name and the video is left as
it was. Use it for a run made without a VAE
or without ffmpeg, or with other latent statistics.

--vae defaults to the run's generate.vae, and --vae-mean/--vae-std to the
run's values (else Wan2.1's 16), --precision to the run's
generate.precision, --fps and --crf to the run's generate.video. Ctrl-C stops after the current block and
joins what is decoded.`,
		Example: `  densitykv decode --vae Wan2.1_VAE.pth runs/generate
  densitykv decode runs/e2e --json`,
		Args:        cobra.ExactArgs(1),
		Annotations: interruptible("stopping after the current block"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return usagef("decode: run folder %q does not exist", dir)
			}
			for _, c := range []struct {
				flag string
				v    int
				dst  **int
			}{{"fps", fps, &o.FPS}, {"crf", crf, &o.CRF}} {
				if cmd.Flags().Changed(c.flag) {
					v := c.v
					*c.dst = &v
				}
			}
			if cmd.Flags().Changed("precision") {
				if err := refuseFast(precision, "the VAE decoder"); err != nil {
					return err
				}
				var p gemm.Precision
				if err := p.UnmarshalText([]byte(strings.TrimSpace(precision))); err != nil {
					return usagef("--precision: %v", err)
				}
				o.Precision = &p
			}
			stderr := cmd.ErrOrStderr()
			var prog *progress
			hooks := runfolder.Hooks{
				Progress: func(_ string, done, total int) {
					if prog == nil {
						prog = newProgress(stderr, "decode (blocks)", total, 0, quiet)
					}
					prog.add(done - prog.done)
				},
				Warn: func(msg string) { fmt.Fprintln(stderr, msg) },
			}
			res, err := generate.Decode(cmd.Context(), dir, o, hooks)
			if prog != nil {
				prog.finish()
			}
			if err != nil && !errors.Is(err, runfolder.ErrInterrupted) {
				return err
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				if err := printJSON(w, res); err != nil {
					return err
				}
			} else {
				where := res.Video
				if where == "" {
					where = res.FramesDir + " (PNG frames; install ffmpeg for mp4)"
				}
				if res.Video != "" {
					where += fmt.Sprintf(" (%d fps, crf %d)", res.FPS, res.CRF)
				}
				fmt.Fprintf(w, "decoded %d blocks (%d latent frames) into %d frames of %d×%d in %.1f s: %s\n",
					res.Blocks, res.LatentFrames, res.Frames, res.Width, res.Height, res.Seconds, where)
			}
			if res.Interrupted {
				return fmt.Errorf("%w after %d blocks; the video holds them", errInterrupted, res.Blocks)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.VAE, "vae", "", "Wan VAE checkpoint (Wan2.1_VAE.pth or .safetensors; default: the run's)")
	f.Float32SliceVar(&o.Mean, "vae-mean", nil, "latent mean per channel (default: the run's, else Wan2.1's)")
	f.Float32SliceVar(&o.Std, "vae-std", nil, "latent std per channel (default: the run's, else Wan2.1's)")
	f.StringVar(&precision, "precision", "", "the decoder's precision, fp32 or bf16 (default: the run's)")
	f.IntVar(&fps, "fps", video.DefaultFPS, fmt.Sprintf("frames per second of the mp4s, 1..%d (default: the run's generate.video.fps)", video.MaxFPS))
	f.IntVar(&crf, "crf", video.DefaultCRF, fmt.Sprintf("x264's constant rate factor of the mp4s, 0..%d (default: the run's generate.video.crf)", video.MaxCRF))
	f.Var(&o.Device, "device", "where the VAE computes: "+device.Values+" (exact mode: the same video bytes on every device; Vulkan needs a build with -tags vulkan)")
	f.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	f.BoolVar(&quiet, "quiet", false, "no progress output")
	return cmd
}
