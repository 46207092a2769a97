package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot/vg"

	"github.com/densitykv/densitykv/plots"
	"github.com/densitykv/densitykv/storage"
)

func init() { register(newStorageCmd) }

// storageJSON is the --json output of `densitykv storage`.
type storageJSON struct {
	Config storage.Config `json:"config"`
	Rows   []storageRow   `json:"rows"`
	Plots  []string       `json:"plots,omitempty"`
}

type storageRow struct {
	Policy    string  `json:"policy"`
	Seconds   float64 `json:"seconds"`
	Frames    int64   `json:"frames"`
	Bytes     int64   `json:"bytes"`
	GiB       float64 `json:"gib"`
	Reduction float64 `json:"reduction_vs_longlive_rag"`
}

func newStorageCmd() *cobra.Command {
	c := storage.Paper()
	var horizons []float64
	var jsonOut, noPlot bool
	var out string
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "Persistent temporal-state storage table and storage-vs-horizon plot (paper formulas)",
		Long: `storage prints the persistent temporal-state storage of every memory policy
at the given horizons, by the paper's accounting (supplementary
"Persistent-storage accounting"; formulas in package storage): BF16 K/V,
DensityKV's two FP32 density scalars and int64/int32 provenance per state,
LongLive-RAG's one 1,024-d BF16 descriptor per frame, Deep Forcing's query
buffer and metadata. Model parameters and temporary workspace are excluded.
Defaults reproduce the paper (Wan2.1-1.3B: 30 layers, 12 heads, d=128,
1,560 tokens/frame, M=9,360, 4 latent frames/s): DensityKV 3.28 GiB,
LongLive-RAG 32.1 / 64.3 / 128.5 GiB at 30 / 60 / 120 s. The table prints
GiB at the paper's precision (one decimal from 10 GiB up, two below); --json
keeps full precision.

It also draws storage vs generation length for all policies into
--out/storage_vs_horizon.png (and .svg).`,
		Example: `  densitykv storage
  densitykv storage --horizons 30,60,120,300 --json
  densitykv storage --layers 4 --heads 4 --head-dim 64 --tokens-per-frame 160 --capacity 960`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(horizons) == 0 {
				return usagef("--horizons is empty, want seconds such as 30,60,120")
			}
			for _, h := range horizons {
				if !(h > 0) || math.IsInf(h, 0) {
					return usagef("--horizons has %v, want positive finite seconds", h)
				}
			}
			for _, f := range []struct {
				name string
				v    int
			}{{"layers", c.Layers}, {"heads", c.Heads}, {"head-dim", c.KeyDim}, {"tokens-per-frame", c.TokensPerFrame}, {"cache-frames", c.CacheFrames}, {"descriptor-dim", c.DescriptorDim}} {
				if f.v < 1 {
					return usagef("--%s is %d, want >= 1", f.name, f.v)
				}
			}
			for _, f := range []struct {
				name string
				v    int
			}{{"capacity", c.Capacity}, {"sink-frames", c.SinkFrames}, {"window-frames", c.WindowFrames}, {"query-buffer-frames", c.QueryBufferFrames}} {
				if f.v < 0 {
					return usagef("--%s is %d, want >= 0", f.name, f.v)
				}
			}
			if !(c.LatentFPS > 0) {
				return usagef("--fps is %v, want > 0", c.LatentFPS)
			}
			c.ValueDim = c.KeyDim
			rows, err := storage.Table(c, horizons)
			if err != nil {
				return err
			}
			res := storageJSON{Config: c}
			for _, r := range rows {
				res.Rows = append(res.Rows, storageRow{Policy: r.Policy, Seconds: r.Seconds, Frames: r.Frames, Bytes: r.Bytes, GiB: r.GiB(), Reduction: r.Reduction})
			}
			if !noPlot {
				if err := os.MkdirAll(out, 0o755); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				fig, err := storageFigure(c, horizons)
				if err != nil {
					return err
				}
				paths, err := fig.Save(filepath.Join(out, "storage_vs_horizon"))
				if err != nil {
					return err
				}
				res.Plots = paths
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				return printJSON(w, res)
			}
			fmt.Fprintf(w, "persistent temporal-state storage: %d layers × %d heads, d=%d, %d tokens/frame, M=%d, sink %d + window %d frames, %g latent frames/s\n",
				c.Layers, c.Heads, c.KeyDim, c.TokensPerFrame, c.Capacity, c.SinkFrames, c.WindowFrames, c.LatentFPS)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "horizon s\tframes\tpolicy\tGiB\tLongLive-RAG ÷ policy\t")
			for _, r := range res.Rows {
				fmt.Fprintf(tw, "%g\t%d\t%s\t%s\t%.1f×\t\n", r.Seconds, r.Frames, r.Policy, paperGiB(r.GiB), r.Reduction)
			}
			tw.Flush()
			for _, p := range res.Plots {
				fmt.Fprintf(w, "plot: %s\n", p)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Float64SliceVar(&horizons, "horizons", []float64{30, 60, 120}, "horizons in seconds of video")
	f.IntVar(&c.Layers, "layers", c.Layers, "transformer layers L")
	f.IntVar(&c.Heads, "heads", c.Heads, "attention heads H")
	f.IntVar(&c.KeyDim, "head-dim", c.KeyDim, "per-head key/value dimension")
	f.IntVar(&c.TokensPerFrame, "tokens-per-frame", c.TokensPerFrame, "latent tokens per frame")
	f.IntVar(&c.Capacity, "capacity", c.Capacity, "DensityKV bank capacity M per head")
	f.IntVar(&c.SinkFrames, "sink-frames", c.SinkFrames, "first-frame sink, frames")
	f.IntVar(&c.WindowFrames, "window-frames", c.WindowFrames, "local window, frames")
	f.IntVar(&c.CacheFrames, "cache-frames", c.CacheFrames, "native / Deep Forcing cache, frames")
	f.IntVar(&c.QueryBufferFrames, "query-buffer-frames", c.QueryBufferFrames, "Deep Forcing query buffer, frames")
	f.IntVar(&c.DescriptorDim, "descriptor-dim", c.DescriptorDim, "LongLive-RAG descriptor size (BF16 values)")
	f.Float64Var(&c.LatentFPS, "fps", c.LatentFPS, "latent frames per second")
	f.BoolVar(&jsonOut, "json", false, "print the table as JSON")
	f.BoolVar(&noPlot, "no-plot", false, "do not draw the figure")
	f.StringVar(&out, "out", "runs/storage", "folder for storage_vs_horizon.png/.svg")
	return cmd
}

// paperGiB formats a size in GiB at the paper's printed precision: one
// decimal from 10 GiB up (32.1, 128.5), two below (1.61, 3.28). The JSON
// output keeps full precision.
func paperGiB(g float64) string {
	if math.Round(g*100)/100 >= 10 {
		return fmt.Sprintf("%.1f", g)
	}
	return fmt.Sprintf("%.2f", g)
}

// storageFigure draws storage vs generation length for every policy, with
// points at the table's horizons (the paper's storage figure).
func storageFigure(c storage.Config, horizons []float64) (*plots.Figure, error) {
	title, panels := storagePanels(c, horizons)
	return plots.Lines("storage_vs_horizon", title, 24*vg.Centimeter, 8*vg.Centimeter, panels...)
}

// storagePanels returns the storage figure's title and panels: linear and
// log axes, each with its legend right of the axes, where it hides no
// curve.
func storagePanels(c storage.Config, horizons []float64) (string, []plots.LinePanel) {
	hmax := 0.0
	for _, h := range horizons {
		hmax = math.Max(hmax, h)
	}
	var xs []float64
	for i := 1; i <= 48; i++ {
		xs = append(xs, hmax*float64(i)/48)
	}
	gib := func(b int64) float64 { return float64(b) / storage.GiB }
	type pol struct {
		name   string
		bytes  func(s float64) int64
		dashed bool // told apart from a solid line at nearly the same height
	}
	pols := []pol{
		{"LongLive-RAG (all K/V + descriptors)", func(s float64) int64 { return c.LongLiveRAG(c.Frames(s)) }, false},
		{"Full history (all K/V)", func(s float64) int64 { return c.FullHistory(c.Frames(s)) }, true},
		{"Deep Forcing", func(float64) int64 { return c.DeepForcing() }, false},
		{"Native / Infinity-RoPE", func(float64) int64 { return c.Native() }, true},
		{"FIFO / uniform stride (DensityKV's budget)", func(float64) int64 { return c.Controls() }, true},
		{"DensityKV (sink + window + bank)", func(float64) int64 { return c.DensityKV() }, false},
		{"DensityKV bank only", func(float64) int64 { return c.DensityKVBank() }, false},
	}
	var ss []plots.Series
	for _, p := range pols {
		s := plots.Series{Name: p.name, Dashed: p.dashed}
		for _, x := range xs {
			s.X = append(s.X, x)
			s.Y = append(s.Y, gib(p.bytes(x)))
		}
		ss = append(ss, s)
	}
	return fmt.Sprintf("Persistent temporal-state storage (L = %d, H = %d, d = %d, M = %d)", c.Layers, c.Heads, c.KeyDim, c.Capacity),
		[]plots.LinePanel{
			{Title: "LongLive-RAG grows linearly; Deep Forcing and DensityKV stay bounded",
				XLabel: "generated video (s)", YLabel: "GiB", Series: ss, YFromZero: true, XFromZero: true, YMargin: true, Legend: "right"},
			{Title: "the same on a logarithmic axis",
				XLabel: "generated video (s)", YLabel: "GiB (log)", Series: ss, LogY: true, XFromZero: true, Legend: "right"}}
}
