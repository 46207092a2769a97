package main

import (
	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/config"
)

func init() { register(newDemoCmd) }

func newDemoCmd() *cobra.Command {
	var rf runFlags
	var cf *configFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the memory policies side by side on the built-in synthetic stream (offline, about 20 s on two cores)",
		Long: `demo is the quickest way to see DensityKV work. Offline, with no downloads,
it runs Native, FIFO, uniform stride, Deep Forcing, LongLive-RAG and DensityKV
side by side on the built-in synthetic video-like KV stream (static background
regions, moving objects that leave and return, a camera pan, a scene cut and
its return, slow appearance drift) at a reduced but faithful scale: the
paper's three-frame blocks, one sink frame, five-frame local window,
twelve-frame native cache and six frame-equivalents of memory per head, at 4
latent frames per second, on a 10×16 token grid with 4 layers and 4 heads of
dimension 64, for 30 s of video.

It prints every DensityKV bank update (admitted, evicted mandatory/capacity,
occupancy, bank bytes), a comparison table, and where the run folder and plots
are (runs/demo by default; an existing demo folder is overwritten, a folder
of another command only with --force). Every
simulate flag works here too, with the demo's defaults.`,
		Example: `  densitykv demo
  densitykv demo --seconds 60 --seed 3
  densitykv demo --json --quiet`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current block"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// An existing demo folder is overwritten (runfolder.Claim's
			// overwriteOwn); any other folder only with --force.
			return runSimulateCommand(cmd, "demo", cf, rf, config.DemoConfig())
		},
	}
	cf = bindConfigFlags(cmd.Flags(), config.DemoConfig())
	rf.bind(cmd, "densitykv")
	return cmd
}
