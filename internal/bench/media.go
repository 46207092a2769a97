package bench

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/densitykv/densitykv/internal/cputime"
	"github.com/densitykv/densitykv/t5"
	"github.com/densitykv/densitykv/vae"
)

// The text encoder and VAE benchmarks behind `densitykv bench text` and
// `bench vae`, and the real-size memory measurement of a whole run behind
// `bench pipeline`. Memory is the process's resident set (RSS, from
// /proc/self/status on Linux: what the machine has to hold), sampled while
// each stage runs.

// RSS returns the process's resident and peak resident bytes (Linux; 0
// elsewhere).
func RSS() (rss, peak int64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) != 2 || fs[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(fs[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return rss, peak
}

// rssSampler records the peak RSS while a stage runs.
type rssSampler struct {
	peak atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func startRSS() *rssSampler {
	s := &rssSampler{stop: make(chan struct{})}
	sample := func() {
		if r, _ := RSS(); r > s.peak.Load() {
			s.peak.Store(r)
		}
	}
	sample()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return s
}

// done stops the sampler (once) and returns the peak.
func (s *rssSampler) done() int64 {
	s.once.Do(func() { close(s.stop); s.wg.Wait() })
	return s.peak.Load()
}

// release hands freed memory back to the operating system.
func release() {
	runtime.GC()
	debug.FreeOSMemory()
}

// VAEOptions configures RunVAE.
type VAEOptions struct {
	Name          string
	Config        vae.Config
	Height, Width int // latent size (60×104 for 480×832)
	// Frames is the number of steady-state latent frames timed after the
	// stream's first (0 = 1). Each makes 4 pixel frames.
	Frames  int
	Seed    uint64
	Context context.Context
	// Progress is called after every latent frame (done of total).
	Progress func(done, total int)
}

// VAEResult is what RunVAE measured.
type VAEResult struct {
	Name          string    `json:"name"`
	Params        int64     `json:"params"`
	Height        int       `json:"height"` // pixels
	Width         int       `json:"width"`
	FirstSeconds  float64   `json:"first_frame_seconds"` // latent frame 0 (1 pixel frame)
	FrameSeconds  []float64 `json:"frame_seconds"`       // each steady latent frame (4 pixel frames)
	MedianFrame   float64   `json:"frame_seconds_median"`
	FrameCPU      float64   `json:"frame_cpu_seconds"` // process CPU seconds per steady frame
	FrameFLOPs    float64   `json:"frame_flops"`       // per steady latent frame
	GFLOPS        float64   `json:"gflops"`            // steady frames, wall
	GFLOPSPerCPU  float64   `json:"gflops_per_cpu_second"`
	BlockSeconds  float64   `json:"block_seconds"`       // 3 steady frames (extrapolated when fewer were timed)
	FirstBlock    float64   `json:"first_block_seconds"` // frame 0 + 2 steady frames
	Extrapolated  bool      `json:"extrapolated"`
	StateBytes    int64     `json:"decoder_state_bytes"` // feature caches and working frames
	ParamBytes    int64     `json:"param_bytes"`
	PeakRSS       int64     `json:"peak_rss_bytes"`
	Threads       int       `json:"threads"`
	ElapsedSecond float64   `json:"elapsed_seconds"`
}

// String says what was measured and what is extrapolated.
func (r VAEResult) String() string {
	ex := "measured"
	if r.Extrapolated {
		ex = fmt.Sprintf("extrapolated from %d latent frame(s)", len(r.FrameSeconds))
	}
	return fmt.Sprintf("%s: %.3g M params, %d×%d video: latent frame 0 %.4g s; steady latent frame (4 pixel frames) median %.4g s (%.4g CPU s), %.1f GFLOP/s (%.1f per CPU-second); block of 3 latent frames %.4g s, first block %.4g s (%s); decoder state %.2f GiB, peak RSS %.2f GiB; %d threads",
		r.Name, float64(r.Params)/1e6, r.Width, r.Height, r.FirstSeconds, r.MedianFrame, r.FrameCPU, r.GFLOPS, r.GFLOPSPerCPU,
		r.BlockSeconds, r.FirstBlock, ex, float64(r.StateBytes)/(1<<30), float64(r.PeakRSS)/(1<<30), r.Threads)
}

// RunVAE times the streaming decoder of o.Config with random weights:
// latent frame 0 of a stream, then o.Frames steady latent frames.
func RunVAE(o VAEOptions) (VAEResult, error) {
	if o.Frames <= 0 {
		o.Frames = 1
	}
	start := time.Now()
	release()
	rs := startRSS()
	defer rs.done()
	m, err := vae.Random(o.Config, o.Seed)
	if err != nil {
		return VAEResult{}, err
	}
	opt := vae.Options{}
	if o.Config.ZDim != 16 {
		opt.Mean, opt.Std = make([]float32, o.Config.ZDim), make([]float32, o.Config.ZDim)
		for i := range opt.Std {
			opt.Std[i] = 1
		}
	}
	d, err := m.NewDecoder(opt)
	if err != nil {
		return VAEResult{}, err
	}
	sc := o.Config.SpatialScale()
	res := VAEResult{Name: o.Name, Params: m.NumParams(), Height: sc * o.Height, Width: sc * o.Width, ParamBytes: 4 * m.NumParams(), Threads: runtime.GOMAXPROCS(0)}
	r := rand.New(rand.NewPCG(o.Seed, 2))
	z := make([]float32, o.Config.ZDim*o.Height*o.Width)
	frame := func() (float64, error) {
		for i := range z {
			z[i] = float32(r.NormFloat64())
		}
		t0 := time.Now()
		err := d.DecodeFunc(z, 1, o.Config.ZDim, o.Height, o.Width, func(int, []float32) error { return nil })
		return time.Since(t0).Seconds(), err
	}
	total := 1 + o.Frames
	stopped := func(done int) error {
		if o.Context != nil && o.Context.Err() != nil {
			return fmt.Errorf("bench: vae: stopped after %d of %d latent frames: %w", done, total, o.Context.Err())
		}
		return nil
	}
	if res.FirstSeconds, err = frame(); err != nil {
		return res, err
	}
	if o.Progress != nil {
		o.Progress(1, total)
	}
	f0, cpu0 := d.FLOPs(), cputime.Process()
	for i := 0; i < o.Frames; i++ {
		if err := stopped(1 + i); err != nil {
			return res, err
		}
		s, err := frame()
		if err != nil {
			return res, err
		}
		res.FrameSeconds = append(res.FrameSeconds, s)
		if o.Progress != nil {
			o.Progress(2+i, total)
		}
	}
	var wall float64
	for _, s := range res.FrameSeconds {
		wall += s
	}
	flops := float64(d.FLOPs() - f0)
	cpu := (cputime.Process() - cpu0).Seconds()
	res.MedianFrame = Median(res.FrameSeconds)
	res.FrameCPU = cpu / float64(o.Frames)
	res.FrameFLOPs = flops / float64(o.Frames)
	res.GFLOPS = flops / wall / 1e9
	if cpu > 0 {
		res.GFLOPSPerCPU = flops / cpu / 1e9
	}
	res.BlockSeconds = 3 * res.MedianFrame
	res.FirstBlock = res.FirstSeconds + 2*res.MedianFrame
	res.Extrapolated = o.Frames < 3
	res.StateBytes = d.Bytes()
	res.PeakRSS = rs.done()
	res.ElapsedSecond = time.Since(start).Seconds()
	return res, nil
}

// TextOptions configures RunText.
type TextOptions struct {
	Name   string
	Config t5.Config
	// LayersRun is the number of layers built and run (0 = all); with
	// fewer, the time per prompt is scaled to Config.Layers and the peak
	// RSS adds the missing layers' weights.
	LayersRun int
	Tokens    int // prompt length, EOS included (0 = 128)
	Prompts   int // timed prompts (0 = 3)
	Seed      uint64
	Context   context.Context
	Progress  func(done, total int)
}

// TextResult is what RunText measured.
type TextResult struct {
	Name           string    `json:"name"`
	Params         int64     `json:"params"`
	Layers         int       `json:"layers"`
	LayersRun      int       `json:"layers_run"`
	Tokens         int       `json:"tokens"`
	BuildSeconds   float64   `json:"build_seconds"` // random weights (loading a checkpoint is disk-bound instead)
	PromptSeconds  []float64 `json:"prompt_seconds"`
	Median         float64   `json:"prompt_seconds_median"`
	PromptCPU      float64   `json:"prompt_cpu_seconds"`
	PerPrompt      float64   `json:"seconds_per_prompt_full_model"`
	GFLOPS         float64   `json:"gflops"`
	GFLOPSPerCPU   float64   `json:"gflops_per_cpu_second"`
	Extrapolated   bool      `json:"extrapolated"`
	WeightBytes    int64     `json:"weight_bytes_full_model"`
	WorkspaceBytes int64     `json:"workspace_bytes"`
	PeakRSS        int64     `json:"peak_rss_bytes"`
	PeakRSSFull    int64     `json:"peak_rss_bytes_full_model"`
	Threads        int       `json:"threads"`
	ElapsedSeconds float64   `json:"elapsed_seconds"`
}

// String says what was measured and what is extrapolated.
func (r TextResult) String() string {
	ex, mem := "", fmt.Sprintf("peak RSS %.2f GiB", float64(r.PeakRSS)/(1<<30))
	if r.Extrapolated {
		ex = fmt.Sprintf(" (extrapolated from %d of %d layers)", r.LayersRun, r.Layers)
		mem = fmt.Sprintf("peak RSS %.2f GiB with %d layers; full model %.2f GiB extrapolated (+ the missing layers' bf16 weights)",
			float64(r.PeakRSS)/(1<<30), r.LayersRun, float64(r.PeakRSSFull)/(1<<30))
	}
	return fmt.Sprintf("%s: %.3g B params (bf16 weights %.2f GiB), %d tokens per prompt: median %.4g s (%.4g CPU s) at %d layers, %.4g s per prompt%s, %.1f GFLOP/s (%.1f per CPU-second); %s; random weights built in %.1f s; %d threads",
		r.Name, float64(r.Params)/1e9, float64(r.WeightBytes)/(1<<30), r.Tokens, r.Median, r.PromptCPU, r.LayersRun, r.PerPrompt, ex,
		r.GFLOPS, r.GFLOPSPerCPU, mem, r.BuildSeconds, r.Threads)
}

// RunText times the umT5 encoder of o.Config with random weights on
// prompts of o.Tokens tokens.
func RunText(o TextOptions) (TextResult, error) {
	full := o.Config
	if err := full.Validate(); err != nil {
		return TextResult{}, err
	}
	if o.LayersRun <= 0 || o.LayersRun > full.Layers {
		o.LayersRun = full.Layers
	}
	if o.Tokens <= 0 {
		o.Tokens = 128
	}
	if o.Prompts <= 0 {
		o.Prompts = 3
	}
	if o.Tokens > t5.MaxTokens {
		return TextResult{}, fmt.Errorf("bench: text: %d tokens, at most %d", o.Tokens, t5.MaxTokens)
	}
	run := full
	run.Layers = o.LayersRun
	start := time.Now()
	release()
	rs := startRSS()
	defer rs.done()
	m, err := t5.NewRandom(run, o.Seed)
	if err != nil {
		return TextResult{}, err
	}
	res := TextResult{Name: o.Name, Params: full.Params(), Layers: full.Layers, LayersRun: o.LayersRun, Tokens: o.Tokens,
		BuildSeconds: time.Since(start).Seconds(), Threads: runtime.GOMAXPROCS(0)}
	perLayerW := (m.WeightBytes() - embedBytes(run)) / int64(run.Layers)
	res.WeightBytes = embedBytes(full) + perLayerW*int64(full.Layers)
	r := rand.New(rand.NewPCG(o.Seed, 3))
	ids, mask := make([]int32, o.Tokens), make([]int32, o.Tokens)
	var flops float64
	cpu0 := cputime.Process()
	for p := 0; p < o.Prompts; p++ {
		if o.Context != nil && o.Context.Err() != nil {
			return res, fmt.Errorf("bench: text: stopped after %d of %d prompts: %w", p, o.Prompts, o.Context.Err())
		}
		for i := range ids {
			ids[i], mask[i] = int32(2+r.IntN(run.Vocab-2)), 1
		}
		ids[len(ids)-1] = 1 // EOS
		t0 := time.Now()
		if _, err := m.Encode(ids, mask); err != nil {
			return res, err
		}
		res.PromptSeconds = append(res.PromptSeconds, time.Since(t0).Seconds())
		flops += run.FLOPs(o.Tokens)
		if o.Progress != nil {
			o.Progress(p+1, o.Prompts)
		}
	}
	cpu := (cputime.Process() - cpu0).Seconds()
	var wall float64
	for _, s := range res.PromptSeconds {
		wall += s
	}
	res.Median = Median(res.PromptSeconds)
	res.PromptCPU = cpu / float64(o.Prompts)
	res.GFLOPS = flops / wall / 1e9
	if cpu > 0 {
		res.GFLOPSPerCPU = flops / cpu / 1e9
	}
	res.Extrapolated = o.LayersRun < full.Layers
	res.PerPrompt = res.Median * float64(full.Layers) / float64(o.LayersRun)
	res.WorkspaceBytes = m.WorkspaceBytes()
	res.PeakRSS = rs.done()
	res.PeakRSSFull = res.PeakRSS + perLayerW*int64(full.Layers-o.LayersRun) + embedBytes(full) - embedBytes(run)
	res.ElapsedSeconds = time.Since(start).Seconds()
	return res, nil
}

// embedBytes is the bf16 token embedding of c.
func embedBytes(c t5.Config) int64 { return 2 * int64(c.Vocab) * int64(c.Dim) }
