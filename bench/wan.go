package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/cputime"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/wan"
)

// WanOptions configures RunWan.
type WanOptions struct {
	Name  string     // label ("tiny", "wan2.1-1.3b")
	Model wan.Config // architecture; Layers is the full depth
	// LayersRun is the number of layers actually built and run (0 = all).
	// With fewer, per-block time is extrapolated linearly to Model.Layers
	// (the layers are identical in cost), and so is the peak heap: each
	// missing layer adds its parameters, its KV-cache state and its
	// prompt's cross-attention K/V (see WanResult). Only the fixed-context
	// run (Blocks == 0) can run fewer layers.
	LayersRun      int
	Height, Width  int // latent size
	FramesPerBlock int // 0 = 3
	// Blocks > 0 runs a real rollout of that many blocks with the Policy
	// (memory.New name, default native, cache 12 frames) and reports the
	// median of the blocks after the cache is full. Blocks == 0 runs Calls
	// forward calls of one block against a fixed steady-state context of
	// ContextFrames frames (sink + history + the block itself), held per
	// layer in float32 like Native's rolling cache.
	Blocks        int
	Policy        string
	Calls         int // forward calls timed with Blocks == 0 (0 = 5, one block)
	ContextFrames int // 0 = 12 (Wan's native cache)
	Seed          uint64
	// Precision is the model's precision (fp32 or bf16; the random
	// weights are the same float32 values, rounded at bf16).
	Precision gemm.Precision
	// Backend, when set, is where the model computes (wan.Model.UseBackend;
	// nil: the CPU), and Device names it in the result ("vulkan:0 NAME").
	// There each layer's attention history is kept on the device (sent
	// once per block; the fixed context's once) and the policy's
	// decisions run on the host (memory.Planner; see wan's history.go).
	Backend compute.Backend
	Device  string
	// Context stops the benchmark between forward calls when cancelled
	// (nil = never); RunWan then returns an error wrapping ctx.Err().
	Context context.Context
	// Progress, when set, is called after every forward call with the
	// calls done and their total.
	Progress func(done, total int)
}

// WanResult is what RunWan measured.
type WanResult struct {
	Name      string         `json:"name"`
	Precision gemm.Precision `json:"precision"`
	// Device is where the model ran: "cpu", or a Vulkan device
	// ("vulkan:0 NAME").
	Device string `json:"device"`
	// Kernel is the gemm kernel the products ran on (gemm.KernelName; on
	// a device, the backend's mode: "exact" kernels, or "fast": the
	// bf16 linears on tensor cores, compute.Fast).
	Kernel string `json:"kernel"`
	// FLOPsPerCall counts the matrix products of one forward call at
	// LayersRun layers with Keys keys (wan.Config.FLOPs); GFLOPS is it
	// over the median call, CPUGFLOPS over the CPU time per call.
	FLOPsPerCall float64 `json:"flops_per_call"`
	GFLOPS       float64 `json:"gflops"`
	CPUGFLOPS    float64 `json:"gflops_per_cpu_second"`
	// PeakGFLOPS is the kernel's own peak on one core, measured in
	// process just before the run (gemm.PeakGFLOPS); PeakFraction is
	// GFLOPS / (PeakGFLOPS · Threads) and CPUPeakFraction CPUGFLOPS /
	// PeakGFLOPS (per busy core: less sensitive to other load).
	PeakGFLOPS      float64   `json:"kernel_peak_gflops_per_core"`
	PeakFraction    float64   `json:"peak_fraction"`
	CPUPeakFraction float64   `json:"cpu_peak_fraction"`
	Params          int64     `json:"params"` // parameters of the full model
	Layers          int       `json:"layers"` // full depth
	LayersRun       int       `json:"layers_run"`
	Tokens          int       `json:"tokens_per_call"` // query tokens per call
	Keys            int       `json:"keys_per_call"`   // self-attention keys per call (steady state)
	CallsPerBlock   int       `json:"calls_per_block"`
	CallSeconds     []float64 `json:"call_seconds"`            // each timed forward call (LayersRun layers)
	BlockSeconds    []float64 `json:"block_seconds,omitempty"` // each timed block (LayersRun layers; real rollouts only)
	MedianCall      float64   `json:"call_seconds_median"`
	// CallCPU is the process CPU seconds per timed call (user + system,
	// all threads): less sensitive than wall time to other load on a
	// shared machine.
	CallCPU       float64 `json:"call_cpu_seconds"`
	MedianBlock   float64 `json:"block_seconds_median"`         // seconds per block at LayersRun layers
	PerBlock      float64 `json:"seconds_per_block_full_model"` // seconds per block of the full model (extrapolated when LayersRun < Layers)
	Extrapolated  bool    `json:"extrapolated"`
	ParamBytes    int64   `json:"param_bytes"`     // parameter memory of the full model (packed weights at Precision; float32 norms, biases)
	PeakHeapBytes uint64  `json:"peak_heap_bytes"` // peak live heap observed during the run (LayersRun layers)
	// PeakHeapFull is PeakHeapBytes when every layer ran; otherwise the
	// estimate PeakHeapBytes + (Layers − LayersRun)·(ParamBytesPerLayer +
	// PolicyBytesPerLayer + TextBytesPerLayer). Shared buffers (the
	// model's and attention's workspaces, the latents, the text embedding)
	// are measured once and not scaled.
	PeakHeapFull uint64 `json:"peak_heap_bytes_full_model"`
	// The per-layer memory components, in bytes, as held by the run
	// (…Run, for LayersRun layers) and per layer: parameters (packed
	// weights at Precision, float32 norms and biases), the
	// memory policy's per-layer K/V state (the fixed-context run holds
	// ContextFrames frames of K and V per layer, as Native does; 0 for a
	// real policy, whose layers all run), and the prompt's cross-attention
	// K/V (EmbedText keeps TextLen rows of K and V per layer).
	ParamBytesRun       int64   `json:"-"`
	ParamBytesPerLayer  int64   `json:"param_bytes_per_layer"`
	PolicyBytesRun      int64   `json:"-"`
	PolicyBytesPerLayer int64   `json:"kv_cache_bytes_per_layer"`
	TextBytesRun        int64   `json:"-"`
	TextBytesPerLayer   int64   `json:"text_kv_bytes_per_layer"`
	Threads             int     `json:"threads"`
	SecondsElapsed      float64 `json:"elapsed_seconds"`
	// Note says how an extrapolated result was made ("" when measured).
	Note string `json:"note,omitempty"`
}

// String formats the result for `densitykv bench`, saying what was
// measured and what is extrapolated.
func (r WanResult) String() string {
	if r.Device != "" && r.Device != "cpu" {
		return r.deviceString()
	}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	timeNote, memNote := "", fmt.Sprintf("peak heap %.1f MiB measured with all %d layers", float64(r.PeakHeapBytes)/(1<<20), r.Layers)
	if r.Extrapolated {
		timeNote = fmt.Sprintf(" (extrapolated from %d of %d layers)", r.LayersRun, r.Layers)
		memNote = fmt.Sprintf("peak heap %.1f MiB measured with %d of %d layers; full model %.1f MiB extrapolated = measured + %d layers × %.1f MiB (per layer: parameters %.1f, KV cache %.1f, text K/V %.1f MiB)",
			float64(r.PeakHeapBytes)/(1<<20), r.LayersRun, r.Layers, float64(r.PeakHeapFull)/(1<<20), r.Layers-r.LayersRun,
			mib(r.ParamBytesPerLayer+r.PolicyBytesPerLayer+r.TextBytesPerLayer), mib(r.ParamBytesPerLayer), mib(r.PolicyBytesPerLayer), mib(r.TextBytesPerLayer))
	}
	return fmt.Sprintf("%s %v: %.3g M params (%.1f MiB), %d tokens × %d keys per call, %d calls per block: median call %.4g s (%.4g CPU s) measured at %d layers, %.4g s per block%s; "+
		"%.1f GFLOP/s (%.1f per CPU-second) on the %s kernel, %.0f%% of its peak %.1f GFLOP/s per core × %d threads (%.0f%% per busy core); %s",
		r.Name, r.Precision, float64(r.Params)/1e6, mib(r.ParamBytes), r.Tokens, r.Keys, r.CallsPerBlock, r.MedianCall, r.CallCPU, r.LayersRun, r.PerBlock, timeNote,
		r.GFLOPS, r.CPUGFLOPS, r.Kernel, 100*r.PeakFraction, r.PeakGFLOPS, r.Threads, 100*r.CPUPeakFraction, memNote)
}

// deviceString is String for a run on a device: no CPU kernel peak, and
// the host heap (the weights and activations live on the device).
func (r WanResult) deviceString() string {
	timeNote := ""
	if r.Extrapolated {
		timeNote = fmt.Sprintf(" (extrapolated from %d of %d layers)", r.LayersRun, r.Layers)
	}
	return fmt.Sprintf("%s %v on %s (%s mode): %.3g M params, %d tokens × %d keys per call, %d calls per block: median call %.4g s measured at %d layers, %.4g s per block%s; %.1f GFLOP/s; "+
		"each layer's attention history kept on the device, the memory policy's decisions on the host; host peak heap %.1f MiB",
		r.Name, r.Precision, r.Device, r.Kernel, float64(r.Params)/1e6, r.Tokens, r.Keys, r.CallsPerBlock, r.MedianCall, r.LayersRun, r.PerBlock, timeNote,
		r.GFLOPS, float64(r.PeakHeapBytes)/(1<<20))
}

// heapSampler records the peak live heap while running.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	sample := func() {
		metrics.Read(s)
		if v := s[0].Value.Uint64(); v > h.peak.Load() {
			h.peak.Store(v)
		}
	}
	sample()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(25 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return h
}

func (h *heapSampler) done() uint64 { close(h.stop); h.wg.Wait(); return h.peak.Load() }

// RunWan measures per-call and per-block time and peak memory of the model
// with random weights (see WanOptions).
func RunWan(o WanOptions) (WanResult, error) {
	if err := o.defaults(); err != nil {
		return WanResult{}, err
	}
	start := time.Now()
	w := &wanBench{o: o, full: o.Model, run: o.Model}
	w.run.Layers = o.LayersRun
	w.res = WanResult{Name: o.Name, Precision: o.Precision, Device: "cpu", Kernel: gemm.KernelName(o.Precision), Layers: o.Model.Layers, LayersRun: o.LayersRun, Threads: gemm.Threads()}
	if o.Backend != nil {
		// The CPU kernels' peak says nothing of a device.
		w.res.Device, w.res.Kernel = o.Device, compute.ModeOf(o.Backend).String() // exact, or fast (tensor cores)
	} else {
		w.res.PeakGFLOPS = gemm.PeakGFLOPS(o.Precision)
	}
	runtime.GC()
	hs := startHeapSampler()
	if err := w.model(); err != nil {
		hs.done()
		return WanResult{}, err
	}
	err := w.text()
	if err == nil && o.Blocks > 0 {
		err = w.rollout()
	} else if err == nil {
		err = w.calls()
	}
	if err != nil {
		hs.done()
		return w.res, err
	}
	w.res.PeakHeapBytes = hs.done()
	w.rates()
	w.res.SecondsElapsed = time.Since(start).Seconds()
	return w.res, nil
}

// defaults fills o's zero fields in and checks the combination.
func (o *WanOptions) defaults() error {
	full := o.Model
	if err := full.Validate(); err != nil {
		return err
	}
	if o.FramesPerBlock == 0 {
		o.FramesPerBlock = 3
	}
	if o.LayersRun <= 0 || o.LayersRun > full.Layers {
		o.LayersRun = full.Layers
	}
	if o.Calls <= 0 {
		o.Calls = 5
	}
	if o.ContextFrames == 0 {
		o.ContextFrames = 12
	}
	if o.ContextFrames < o.FramesPerBlock {
		return fmt.Errorf("bench: wan: context %d frames < block %d frames", o.ContextFrames, o.FramesPerBlock)
	}
	if o.Blocks > 0 && o.LayersRun < full.Layers {
		return fmt.Errorf("bench: wan: a real rollout runs every layer (%d of %d requested): its policy's per-layer state cannot be extrapolated", o.LayersRun, full.Layers)
	}
	return nil
}

// wanBench is one RunWan: the model run (the full one's first LayersRun
// layers) and what it measures.
type wanBench struct {
	o         WanOptions
	full, run wan.Config
	m         *wan.Model
	res       WanResult
	lay       memory.Layout
	r         *rand.Rand
	txt       *wan.Text
}

// model builds the model of random weights and records its sizes.
func (w *wanBench) model() error {
	o, full, res := w.o, w.full, &w.res
	m, err := wan.Random(w.run, o.Seed, o.Precision)
	if err != nil {
		return err
	}
	w.m = m
	if o.Backend != nil {
		m.UseBackend(o.Backend)
	}
	perLayer := blockParams(full)
	res.Params = m.NumParams() + int64(full.Layers-o.LayersRun)*perLayer
	res.ParamBytesRun, res.ParamBytesPerLayer = m.WeightBytes(), m.Blocks[0].WeightBytes()
	res.ParamBytes = res.ParamBytesRun + int64(full.Layers-o.LayersRun)*res.ParamBytesPerLayer
	w.lay = w.run.Layout(o.Height, o.Width, o.FramesPerBlock)
	res.Tokens = w.lay.TokensPerBlock()
	res.CallsPerBlock = 5
	return nil
}

// text embeds a random text context and records its K/V bytes.
func (w *wanBench) text() error {
	full, res := w.full, &w.res
	w.r = rand.New(rand.NewPCG(w.o.Seed, 1))
	ctx := make([]float32, full.TextLen*full.TextDim)
	for i := range ctx {
		ctx[i] = float32(w.r.NormFloat64())
	}
	txt, err := w.m.EmbedText(ctx, full.TextLen)
	if err != nil {
		return err
	}
	w.txt = txt
	for l := range txt.K {
		res.TextBytesRun += 4 * int64(len(txt.K[l])+len(txt.V[l]))
	}
	res.TextBytesPerLayer = res.TextBytesRun / int64(w.o.LayersRun)
	return nil
}

// rollout times a real rollout of Blocks blocks with the Policy: its
// forward calls and blocks once the cache holds 12 frames.
func (w *wanBench) rollout() error {
	o, res := w.o, &w.res
	name := o.Policy
	if name == "" {
		name = memory.NameNative
	}
	mc, err := w.run.Memory(memory.Config{}, o.Height, o.Width, o.FramesPerBlock)
	if err != nil {
		return err
	}
	pol, err := memory.New(name, mc)
	if err != nil {
		return err
	}
	sch := rollout.DefaultSchedule()
	res.CallsPerBlock = len(sch.Timesteps) + 1
	var last time.Time
	var cpuFull, cpuLast time.Duration
	timed, calls := 0, 0
	err = rollout.Run(w.m, pol, rollout.Options{Blocks: o.Blocks, FramesPerBlock: o.FramesPerBlock, Height: o.Height, Width: o.Width, Schedule: sch,
		Noise: rollout.Seeded{Seed: o.Seed, StepsPerBlock: len(sch.Timesteps) - 1}, Prompts: []rollout.Prompt{{Text: w.txt}}, Context: o.Context,
		Progress: func(p rollout.Progress) {
			if calls++; o.Progress != nil {
				o.Progress(calls, o.Blocks*res.CallsPerBlock)
			}
			now, cpu := time.Now(), cputime.Process()
			if !last.IsZero() && (p.Block+1)*o.FramesPerBlock > 12 {
				res.CallSeconds = append(res.CallSeconds, now.Sub(last).Seconds())
				cpuFull += cpu - cpuLast
				timed++
			}
			last, cpuLast = now, cpu
		},
		BlockDone: func(b int, _ []float32, log rollout.BlockLog) error {
			if (b+1)*o.FramesPerBlock > 12 {
				res.BlockSeconds = append(res.BlockSeconds, log.Seconds)
				if len(log.Attention) > 0 {
					res.Keys = log.Attention[0].Total()
				}
			}
			return nil
		}})
	if err != nil {
		return err
	}
	res.MedianBlock = Median(res.BlockSeconds)
	if timed > 0 {
		res.CallCPU = cpuFull.Seconds() / float64(timed)
	}
	return nil
}

// calls times Calls forward calls of one block against a fixed history of
// ContextFrames frames.
func (w *wanBench) calls() error {
	o, full, res := w.o, w.full, &w.res
	S := o.ContextFrames * w.lay.TokensPerFrame()
	res.Keys = S
	pol := newFixedPolicy(w.lay, S, o.Seed)
	res.PolicyBytesRun = pol.heldBytes()
	res.PolicyBytesPerLayer = res.PolicyBytesRun / int64(o.LayersRun)
	in := make([]float32, o.FramesPerBlock*full.InDim*o.Height*o.Width)
	for i := range in {
		in[i] = float32(w.r.NormFloat64())
	}
	flow := make([]float32, len(in))
	ts := make([]float32, o.FramesPerBlock)
	cpu0 := cputime.Process()
	for c := 0; c < o.Calls; c++ {
		if o.Context != nil && o.Context.Err() != nil {
			return fmt.Errorf("bench: wan: stopped after %d of %d calls: %w", c, o.Calls, o.Context.Err())
		}
		for i := range ts {
			ts[i] = rollout.DefaultSchedule().Timesteps[c%4]
		}
		t0 := time.Now()
		if err := w.m.Forward(flow, wan.Call{Latent: in, Height: o.Height, Width: o.Width, Timesteps: ts, Text: w.txt, Mem: memory.Call{Block: 0, Step: c}}, pol); err != nil {
			return err
		}
		res.CallSeconds = append(res.CallSeconds, time.Since(t0).Seconds())
		if o.Progress != nil {
			o.Progress(c+1, o.Calls)
		}
	}
	res.CallCPU = (cputime.Process() - cpu0).Seconds() / float64(o.Calls)
	res.MedianBlock = Median(res.CallSeconds) * float64(res.CallsPerBlock)
	return nil
}

// rates derives the medians, the rates against the kernel's peak and the
// full model's figures from what was measured.
func (w *wanBench) rates() {
	o, full, res := w.o, w.full, &w.res
	res.MedianCall = Median(res.CallSeconds)
	res.FLOPsPerCall = w.run.FLOPs(res.Tokens, res.Keys, o.FramesPerBlock)
	if res.MedianCall > 0 {
		res.GFLOPS = res.FLOPsPerCall / res.MedianCall / 1e9
	}
	if res.CallCPU > 0 {
		res.CPUGFLOPS = res.FLOPsPerCall / res.CallCPU / 1e9
	}
	if res.PeakGFLOPS > 0 {
		res.PeakFraction = res.GFLOPS / (res.PeakGFLOPS * float64(res.Threads))
		res.CPUPeakFraction = res.CPUGFLOPS / res.PeakGFLOPS
	}
	scale := float64(full.Layers) / float64(o.LayersRun)
	res.PerBlock = res.MedianBlock * scale
	res.Extrapolated = o.LayersRun < full.Layers
	res.PeakHeapFull = res.PeakHeapBytes + uint64(int64(full.Layers-o.LayersRun)*(res.ParamBytesPerLayer+res.PolicyBytesPerLayer+res.TextBytesPerLayer))
	if res.Extrapolated {
		res.Note = fmt.Sprintf("measured with %d of %d layers; per-block time scaled by %d/%d; peak_heap_bytes_full_model = peak_heap_bytes + %d × (param + kv_cache + text_kv bytes per layer)",
			res.LayersRun, res.Layers, res.Layers, res.LayersRun, res.Layers-res.LayersRun)
	}
}

// blockParams returns the parameter count of one transformer layer.
func blockParams(c wan.Config) int64 {
	d, f := int64(c.Dim), int64(c.FFNDim)
	return 8*(d*d+d) + 4*d + 2*d + (f*d + f) + (d*f + d) + 6*d
}

// fixedPolicy is a benchmark-only memory.Policy whose every call attends a
// fixed steady-state context of S keys per layer, held like Native's
// rolling cache: per layer, S float32 rows of K and V whose first S − T are
// random history and whose last T receive the block's own keys and values
// on every call (the cache write). Queries are not rotated (RoPE is a
// negligible cost). The context is the layer's cache itself, so there is no
// shared assembly buffer.
type fixedPolicy struct {
	lay  memory.Layout
	S    int
	k, v [][]float32 // per layer [S][H][D]
	key  memory.HistoryKey
}

func newFixedPolicy(l memory.Layout, S int, seed uint64) *fixedPolicy {
	row := l.Heads * l.HeadDim
	T := l.TokensPerBlock()
	p := &fixedPolicy{lay: l, S: S, k: make([][]float32, l.Layers), v: make([][]float32, l.Layers), key: memory.NewHistoryKey()}
	r := rand.New(rand.NewPCG(seed, 2))
	for i := range p.k {
		p.k[i], p.v[i] = make([]float32, S*row), make([]float32, S*row)
		for j := 0; j < (S-T)*row; j++ {
			p.k[i][j], p.v[i][j] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
	}
	return p
}

// heldBytes returns the bytes of K/V state the policy holds (all layers).
func (p *fixedPolicy) heldBytes() int64 {
	var n int64
	for i := range p.k {
		n += 4 * int64(len(p.k[i])+len(p.v[i]))
	}
	return n
}

func (p *fixedPolicy) Name() string            { return "bench-fixed-context" }
func (p *fixedPolicy) Layout() memory.Layout   { return p.lay }
func (p *fixedPolicy) Begin(memory.Call) error { return nil }
func (p *fixedPolicy) End() error              { return nil }
func (p *fixedPolicy) Bytes() int64            { return p.heldBytes() / 2 } // BF16 accounting
func (p *fixedPolicy) Attend(layer int, q, k, v []float32) (memory.Context, error) {
	n := (p.S - p.lay.TokensPerBlock()) * p.lay.Heads * p.lay.HeadDim
	copy(p.k[layer][n:], k)
	copy(p.v[layer][n:], v)
	return memory.Context{Q: q, K: p.k[layer], V: p.v[layer], Parts: memory.Parts{Local: p.S}}, nil
}

// AttendPlan is the same context for a device backbone (memory.Planner):
// the first S − T rows are the history, sent once per layer and kept on
// the device, the block's frames follow at the rolling cache's last
// temporal positions (rotated there, as Native's are).
func (p *fixedPolicy) AttendPlan(layer int, _ func() ([]float32, []float32, error), have memory.HistoryKey) (memory.Plan, error) {
	T, F, tpf := p.lay.TokensPerBlock(), p.lay.FramesPerBlock, p.lay.TokensPerFrame()
	pl := memory.Plan{Key: p.key, Parts: memory.Parts{Local: p.S}, QT: make([]int, F), Segments: []memory.Segment{{Frame: -1, Rows: p.S - T}}}
	for f := range F {
		pl.QT[f] = p.S/tpf - F + f
		pl.Segments = append(pl.Segments, memory.Segment{Frame: f, T: pl.QT[f], Rows: tpf})
	}
	if have != p.key {
		n := (p.S - T) * p.lay.Heads * p.lay.HeadDim
		pl.K, pl.V = p.k[layer][:n:n], p.v[layer][:n:n]
	}
	return pl, nil
}

// StandardWan returns the benchmarks `densitykv bench wan` reports, each
// at every precision of precs in turn: the tiny golden configuration (a
// real 8-block Native rollout, median of the blocks after the 12-frame
// cache is full) and Wan2.1-T2V-1.3B at 480×832 (60×104 latents, 4,680
// tokens per block) with random weights: one layer run against the
// steady-state 12-frame context (18,720 keys), timed over calls forward
// calls and extrapolated to 30 layers and 5 calls per block (a full 1.3B
// block takes hours on a 2-core machine); its peak heap is extrapolated
// with each missing layer's parameters, 12-frame float32 K/V cache (≈219
// MiB) and text K/V.
func StandardWan(calls int, precs ...gemm.Precision) []WanOptions {
	if len(precs) == 0 {
		precs = []gemm.Precision{gemm.F32, gemm.BF16}
	}
	var os []WanOptions
	for _, o := range []WanOptions{
		{Name: "tiny (golden config)", Model: wan.TinyConfig(), Height: 6, Width: 8, Blocks: 8},
		{Name: "wan2.1-t2v-1.3b", Model: wan.DefaultConfig(), LayersRun: 1, Height: 60, Width: 104, Calls: calls},
	} {
		for _, p := range precs {
			o.Precision = p
			os = append(os, o)
		}
	}
	return os
}
