package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/cputime"
	"github.com/densitykv/densitykv/t5"
	"github.com/densitykv/densitykv/vae"
)

// Rate is a timed workload's arithmetic rate: the matrix products' FLOPs
// over the median wall time and over the CPU time, against the kernel's
// own peak on one core (gemm.PeakGFLOPS, measured in process just before
// the run).
type Rate struct {
	Precision gemm.Precision `json:"precision"`
	// Device is where the model ran: "cpu" or a Vulkan device's label
	// (Kernel "exact", no CPU peak).
	Device    string  `json:"device"`
	Kernel    string  `json:"kernel"`
	FLOPs     float64 `json:"flops"` // per timed unit (a block, a prompt)
	GFLOPS    float64 `json:"gflops"`
	CPUGFLOPS float64 `json:"gflops_per_cpu_second"`
	Peak      float64 `json:"kernel_peak_gflops_per_core"`
	// PeakFraction is GFLOPS / (Peak · Threads); CPUPeakFraction is
	// CPUGFLOPS / Peak (per busy core: less sensitive to other load).
	PeakFraction    float64 `json:"peak_fraction"`
	CPUPeakFraction float64 `json:"cpu_peak_fraction"`
	Threads         int     `json:"threads"`
}

func newRate(p gemm.Precision) Rate {
	return Rate{Precision: p, Device: "cpu", Kernel: gemm.KernelName(p), Peak: gemm.PeakGFLOPS(p), Threads: gemm.Threads()}
}

// onDevice is the rate of a run on a device's backend be: no CPU kernel
// or peak; Kernel is the backend's mode ("exact", or "fast": tensor
// cores, compute.Fast).
func onDevice(p gemm.Precision, device string, be compute.Backend) Rate {
	return Rate{Precision: p, Device: device, Kernel: compute.ModeOf(be).String(), Threads: gemm.Threads()}
}

// set fills the rates from the FLOPs of one unit, its median wall time and
// its CPU time.
func (r *Rate) set(flops, seconds, cpu float64) {
	r.FLOPs = flops
	if seconds > 0 {
		r.GFLOPS = flops / seconds / 1e9
	}
	if cpu > 0 {
		r.CPUGFLOPS = flops / cpu / 1e9
	}
	if r.Peak > 0 {
		r.PeakFraction = r.GFLOPS / (r.Peak * float64(r.Threads))
		r.CPUPeakFraction = r.CPUGFLOPS / r.Peak
	}
}

func (r Rate) String() string {
	if r.Device != "" && r.Device != "cpu" {
		return fmt.Sprintf("%.1f GFLOP/s on %s (%s mode)", r.GFLOPS, r.Device, r.Kernel)
	}
	return fmt.Sprintf("%.1f GFLOP/s (%.1f per CPU-second) on the %v %s kernel, %.0f%% of its peak %.1f GFLOP/s per core × %d threads (%.0f%% per busy core)",
		r.GFLOPS, r.CPUGFLOPS, r.Precision, r.Kernel, 100*r.PeakFraction, r.Peak, r.Threads, 100*r.CPUPeakFraction)
}

// VAEOptions configures RunVAE.
type VAEOptions struct {
	Name          string
	Model         vae.Config // architecture (vae.DefaultConfig(): Wan2.1's)
	Height, Width int        // latent size (60×104 for 480×832 video)
	// FramesPerBlock latent frames are decoded per timed block (0 = 3, a
	// generation block), Blocks blocks in a row on one stream (0 = 2);
	// the first block includes the stream's first frame (1 + 4·2 pixel
	// frames instead of 12) and is timed like the others.
	FramesPerBlock, Blocks int
	Precision              gemm.Precision
	Seed                   uint64
	// Backend, when set, is where the decoder computes (vae.Model.UseBackend;
	// nil: the CPU), Device its label.
	Backend  compute.Backend
	Device   string
	Context  context.Context // stops between blocks when cancelled (nil = never)
	Progress func(done, total int)
}

// VAEResult is what RunVAE measured: per latent block, the decoder's time.
type VAEResult struct {
	Name         string    `json:"name"`
	Params       int64     `json:"params"`
	Height       int       `json:"latent_height"`
	Width        int       `json:"latent_width"`
	BlockSeconds []float64 `json:"block_seconds"`
	BlockCPU     []float64 `json:"block_cpu_seconds"`
	MedianBlock  float64   `json:"block_seconds_median"`
	PixelFrames  []int     `json:"pixel_frames"` // per block
	// PerBlock and PerBlockCPU are a steady generation block's wall and
	// CPU seconds (3 latent frames, 12 pixel frames): the median of the
	// blocks after the first (or the only one), scaled by 3/FramesPerBlock
	// when the blocks timed were not 3 frames long (Extrapolated).
	PerBlock      float64 `json:"seconds_per_block"`
	PerBlockCPU   float64 `json:"cpu_seconds_per_block"`
	Extrapolated  bool    `json:"extrapolated"`
	PeakHeapBytes uint64  `json:"peak_heap_bytes"`
	// PeakRSS is the process's peak resident set while the decoder ran
	// (sampled every 20 ms; RSS on Linux, 0 elsewhere), StateBytes the
	// decoder's feature caches and working frames at the end.
	PeakRSS    int64 `json:"peak_rss_bytes"`
	StateBytes int64 `json:"decoder_state_bytes"`
	// PackedBytes is the weights packed at the precision run; the float32
	// weights (Params·4 bytes) are kept beside them.
	PackedBytes int64 `json:"packed_weight_bytes"`
	Rate
}

func (r VAEResult) String() string {
	ex := "measured"
	if r.Extrapolated {
		ex = "extrapolated from the blocks timed"
	}
	return fmt.Sprintf("%s %v: %d×%d latents, median block %.3g s (%v s per block, %v pixel frames); a 3-frame block %.4g s, %.4g CPU-s (%s); %s; decoder state %.2f GiB, peak heap %.0f MiB, peak RSS %.2f GiB",
		r.Name, r.Precision, r.Height, r.Width, r.MedianBlock, secondsString(r.BlockSeconds), r.PixelFrames, r.PerBlock, r.PerBlockCPU, ex, r.Rate,
		float64(r.StateBytes)/(1<<30), float64(r.PeakHeapBytes)/(1<<20), float64(r.PeakRSS)/(1<<30))
}

func secondsString(x []float64) string {
	s := ""
	for i, v := range x {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.3g", v)
	}
	return "[" + s + "]"
}

// RunVAE decodes Blocks blocks of random latents with a random VAE of the
// configuration at the precision, one block per Decode call on one
// stream, and times each. The rate counts the convolutions' and the
// attention's FLOPs (vae.Decoder.FLOPs) of the median block. At 480×832 a
// latent frame takes minutes on two cores: FramesPerBlock 1 with Blocks 2
// times frame 0 and one steady frame, and PerBlock extrapolates the 3-frame
// block from it.
func RunVAE(o VAEOptions) (VAEResult, error) {
	if o.FramesPerBlock <= 0 {
		o.FramesPerBlock = 3
	}
	if o.Blocks <= 0 {
		o.Blocks = 2
	}
	res := VAEResult{Name: o.Name, Height: o.Height, Width: o.Width, Rate: newRate(o.Precision)}
	if o.Backend != nil {
		res.Rate = onDevice(o.Precision, o.Device, o.Backend)
	}
	release()
	peak := sync.OnceValue(startHeapSampler().done)
	defer peak()
	rs := startRSS()
	defer rs.done()
	m, err := vae.Random(o.Model, o.Seed)
	if err != nil {
		return res, err
	}
	if o.Backend != nil {
		m.UseBackend(o.Backend)
		defer m.UseBackend(nil)
	}
	res.Params = m.NumParams()
	c := o.Model.ZDim
	mean, std := make([]float32, c), make([]float32, c)
	for i := range std {
		std[i] = 1
	}
	d, err := m.NewDecoder(vae.Options{Mean: mean, Std: std, Precision: o.Precision})
	if err != nil {
		return res, err
	}
	r := rand.New(rand.NewPCG(o.Seed, 3))
	z := make([]float32, o.FramesPerBlock*c*o.Height*o.Width)
	var flops []float64
	for b := 0; b < o.Blocks; b++ {
		if o.Context != nil && o.Context.Err() != nil {
			return res, fmt.Errorf("bench: vae: stopped after %d of %d blocks: %w", b, o.Blocks, o.Context.Err())
		}
		for i := range z {
			z[i] = float32(r.NormFloat64())
		}
		f0, p0 := d.FLOPs(), d.PixelFrames()
		t0, c0 := time.Now(), cputime.Process()
		if err := d.DecodeFunc(z, o.FramesPerBlock, c, o.Height, o.Width, func(int, []float32) error { return nil }); err != nil {
			return res, err
		}
		res.BlockSeconds = append(res.BlockSeconds, time.Since(t0).Seconds())
		res.BlockCPU = append(res.BlockCPU, (cputime.Process() - c0).Seconds())
		res.PixelFrames = append(res.PixelFrames, d.PixelFrames()-p0)
		flops = append(flops, float64(d.FLOPs()-f0))
		if o.Progress != nil {
			o.Progress(b+1, o.Blocks)
		}
	}
	res.PeakHeapBytes = peak()
	res.PeakRSS = rs.done()
	res.StateBytes = d.Bytes()
	res.PackedBytes = m.PackedBytes()
	res.MedianBlock = Median(res.BlockSeconds)
	// The rate of the later blocks (full blocks of pixel frames), or of
	// the only one.
	last := len(flops) - 1
	steady, steadyCPU := Median(res.BlockSeconds[min(1, last):]), Median(res.BlockCPU[min(1, last):])
	res.set(flops[last], steady, steadyCPU)
	scale := 3 / float64(o.FramesPerBlock)
	res.PerBlock, res.PerBlockCPU, res.Extrapolated = steady*scale, steadyCPU*scale, o.FramesPerBlock != 3
	return res, nil
}

// TextOptions configures RunText.
type TextOptions struct {
	Name  string
	Model t5.Config // architecture; Layers is the full depth (t5.UMT5XXL())
	// LayersRun layers are built and run (0 = all); the per-prompt time is
	// extrapolated linearly to Model.Layers (the layers cost the same).
	LayersRun int
	Tokens    int // prompt length (0 = 512, Wan's text_len)
	Prompts   int // timed prompts (0 = 3)
	Precision gemm.Precision
	Seed      uint64
	// Backend, when set, is where the encoder computes (t5.Model.UseBackend;
	// nil: the CPU), Device its label.
	Backend  compute.Backend
	Device   string
	Context  context.Context
	Progress func(done, total int)
}

// TextResult is what RunText measured: per prompt, the encoder's time.
type TextResult struct {
	Name          string    `json:"name"`
	Layers        int       `json:"layers"`
	LayersRun     int       `json:"layers_run"`
	Tokens        int       `json:"tokens"`
	PromptSeconds []float64 `json:"prompt_seconds"` // at LayersRun layers
	PromptCPU     []float64 `json:"prompt_cpu_seconds"`
	MedianPrompt  float64   `json:"prompt_seconds_median"`
	// PerPrompt is the median prompt's time for the full depth
	// (extrapolated when LayersRun < Layers).
	PerPrompt     float64 `json:"seconds_per_prompt_full_model"`
	Extrapolated  bool    `json:"extrapolated"`
	WeightBytes   int64   `json:"weight_bytes_run"` // bfloat16 matrices of the layers run (and the embedding)
	PeakHeapBytes uint64  `json:"peak_heap_bytes"`
	// Params and WeightBytesFull are the full model's (Layers layers, the
	// whole vocabulary): what a real checkpoint holds in bfloat16.
	Params          int64 `json:"params"`
	WeightBytesFull int64 `json:"weight_bytes_full_model"`
	// PeakRSS is the process's peak resident set while the encoder ran
	// (the layers run, a 4,096-row embedding); PeakRSSFull adds the
	// missing layers' and embedding rows' bfloat16 weights (extrapolated
	// when LayersRun < Layers or the vocabulary was cut).
	PeakRSS     int64 `json:"peak_rss_bytes"`
	PeakRSSFull int64 `json:"peak_rss_bytes_full_model"`
	Rate
}

func (r TextResult) String() string {
	note := ""
	if r.Extrapolated {
		note = fmt.Sprintf(" (extrapolated from %d of %d layers)", r.LayersRun, r.Layers)
	}
	return fmt.Sprintf("%s %v: %d tokens, median prompt %.3g s at %d layers, %.3g s per prompt%s, %s; peak heap %.0f MiB, peak RSS %.2f GiB; full model %.3g B params, bf16 weights %.2f GiB, peak RSS %.2f GiB (the weights not built added)",
		r.Name, r.Precision, r.Tokens, r.MedianPrompt, r.LayersRun, r.PerPrompt, note, r.Rate, float64(r.PeakHeapBytes)/(1<<20), float64(r.PeakRSS)/(1<<30),
		float64(r.Params)/1e9, float64(r.WeightBytesFull)/(1<<30), float64(r.PeakRSSFull)/(1<<30))
}

// RunText encodes Prompts random prompts of Tokens tokens with a random
// encoder of the configuration (LayersRun layers, a small vocabulary: the
// embedding only gathers rows) at the precision and times each; the rate
// counts the products of t5.Config.FLOPs.
func RunText(o TextOptions) (TextResult, error) {
	if o.Tokens <= 0 {
		o.Tokens = 512
	}
	if o.Prompts <= 0 {
		o.Prompts = 3
	}
	full := o.Model
	if o.LayersRun <= 0 || o.LayersRun > full.Layers {
		o.LayersRun = full.Layers
	}
	run := full
	run.Layers, run.Vocab = o.LayersRun, min(full.Vocab, 4096)
	res := TextResult{Name: o.Name, Layers: full.Layers, LayersRun: o.LayersRun, Tokens: o.Tokens, Rate: newRate(o.Precision)}
	if err := full.Validate(); err != nil {
		return res, err
	}
	if o.Tokens > t5.MaxTokens {
		return res, fmt.Errorf("bench: text: %d tokens, at most %d", o.Tokens, t5.MaxTokens)
	}
	release()
	peak := sync.OnceValue(startHeapSampler().done)
	defer peak()
	rs := startRSS()
	defer rs.done()
	m, err := t5.NewRandom(run, o.Seed)
	if err != nil {
		return res, err
	}
	m.Precision = o.Precision
	if o.Backend != nil {
		res.Rate = onDevice(o.Precision, o.Device, o.Backend)
		m.UseBackend(o.Backend)
		defer m.UseBackend(nil)
	}
	res.WeightBytes = m.WeightBytes()
	perLayer := (res.WeightBytes - embedBytes(run)) / int64(run.Layers)
	res.Params = full.Params()
	res.WeightBytesFull = embedBytes(full) + perLayer*int64(full.Layers)
	r := rand.New(rand.NewPCG(o.Seed, 4))
	ids, mask := make([]int32, o.Tokens), make([]int32, o.Tokens)
	for p := 0; p < o.Prompts; p++ {
		if o.Context != nil && o.Context.Err() != nil {
			return res, fmt.Errorf("bench: text: stopped after %d of %d prompts: %w", p, o.Prompts, o.Context.Err())
		}
		for i := range ids {
			ids[i], mask[i] = int32(2+r.IntN(run.Vocab-2)), 1
		}
		ids[len(ids)-1] = 1
		t0, c0 := time.Now(), cputime.Process()
		if _, err := m.Encode(ids, mask); err != nil {
			return res, err
		}
		res.PromptSeconds = append(res.PromptSeconds, time.Since(t0).Seconds())
		res.PromptCPU = append(res.PromptCPU, (cputime.Process() - c0).Seconds())
		if o.Progress != nil {
			o.Progress(p+1, o.Prompts)
		}
	}
	res.PeakHeapBytes = peak()
	res.PeakRSS = rs.done()
	res.PeakRSSFull = res.PeakRSS + res.WeightBytesFull - res.WeightBytes
	res.MedianPrompt = Median(res.PromptSeconds)
	res.PerPrompt = res.MedianPrompt * float64(full.Layers) / float64(o.LayersRun)
	res.Extrapolated = o.LayersRun < full.Layers
	res.set(run.FLOPs(o.Tokens), res.MedianPrompt, Median(res.PromptCPU))
	return res, nil
}
