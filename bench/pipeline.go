package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/cputime"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/t5"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/wan"
)

// PipelineOptions configures RunPipeline: the time and memory of a
// real-size run (prompt → umT5 → DiT rollout with a memory policy → VAE)
// measured with random weights of the real shapes.
type PipelineOptions struct {
	Text       t5.Config  // the text encoder (UMT5XXL)
	TextTokens int        // prompt length (0 = 128)
	SkipText   bool       // no text stage (the generation stage alone)
	Model      wan.Config // the DiT (Layers: the full depth)
	// Layers are the DiT depths run (nil = {Model.Layers}: the whole
	// model, measured). With a smaller last depth the generation stage's
	// memory is extrapolated linearly to Model.Layers from the last two
	// depths (every layer holds the same: its weights, its policy state,
	// its prompt's K/V), and the result says so.
	Layers        []int
	Height, Width int    // latent size (60×104)
	Policy        string // memory policy (paper settings; "" = densitykv)
	// Blocks is the rollout's length (0 = 4): the last block is the one
	// measured, at the real schedule (DefaultSchedule: 4 denoising calls
	// and the clean pass per layer); the blocks before it are the warm-up
	// that brings the memory to its steady state (sink and local window
	// full, the DensityKV bank full from block 3 on at the paper's
	// settings), run at WarmSteps denoising steps to save time: the policy
	// state they leave does not depend on the step count, only on the
	// clean passes' K/V.
	Blocks    int
	WarmSteps int // denoising steps of each warm-up block (0 = 1)
	VAE       vae.Config
	// VAEFrames is the number of the measured block's latent frames the
	// VAE decodes (0 = all 3), after one warm-up frame (the last warm-up
	// block's last frame: the decoder's first frame is special, and its
	// feature caches are then filled as in a run).
	VAEFrames int
	// Precision is the models' precision (the text encoder's compute, the
	// DiT's weights and products, the VAE's products), as generate's
	// --precision: bf16 for the real-size models.
	Precision gemm.Precision
	Seed      uint64
	// Backend, when set, is where the models compute (the text encoder,
	// the DiT and the VAE, each UseBackend; nil: the CPU); the memory
	// policy stays on the host. Device labels it in the result.
	Backend compute.Backend
	Device  string
	// NewBank, when set, builds the DensityKV policy's banks (e.g. on the
	// device: gpu.Opened.BankFactory); each depth's banks are freed after
	// it (their Passes' Free, where they have one).
	NewBank func(bank.Config) (*bank.Bank, error)
	Context context.Context
	// Stage reports each stage as it starts.
	Stage func(name string)
	// Progress, when set, reports the rollout's forward calls (done of
	// total over the warm-up and the measured block at the current depth).
	Progress func(done, total int)
}

// PipelineStage is one stage's measurement.
type PipelineStage struct {
	Name       string  `json:"name"`
	Layers     int     `json:"layers,omitempty"` // DiT layers run
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`     // the process's CPU time over the stage, all threads
	PeakRSS    int64   `json:"peak_rss_bytes"`  // resident set, sampled every 20 ms
	PeakHeap   int64   `json:"peak_heap_bytes"` // heap objects, live and not yet swept (runtime/metrics), sampled every 25 ms
	// Live is the heap the stage holds when everything is alive (after a
	// forced GC at its end: the text encoder after its prompt; the DiT,
	// policy, prompt and VAE decoder after the last block's decode): the
	// memory it needs. RSS exceeds it by the collector's slack (GOGC=100
	// lets the heap grow to twice the live heap until a memory limit is
	// near; densitykv sets one at 3/4 of the machine's memory).
	Live int64 `json:"live_heap_bytes"`
	// Steps are the generation stage's parts, in order: building the
	// models, the warm-up blocks, the measured block's DiT calls (with
	// its bank update inside: BankSeconds) and its VAE decode.
	Steps []PipelineStep `json:"steps,omitempty"`
}

// PipelineStep is one part of the generation stage.
type PipelineStep struct {
	Name       string  `json:"name"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	PeakRSS    int64   `json:"peak_rss_bytes"`
	// Calls are the DiT forward calls of the step (layers × calls per
	// layer), BankSeconds the memory policy's update time within it (wall,
	// summed over layers; the bank's own worker threads run inside it).
	Calls       int     `json:"dit_calls,omitempty"`
	BankSeconds float64 `json:"bank_update_seconds,omitempty"`
	// VAEFrames are the latent frames decoded, VideoFrames the 480×832
	// frames they make.
	VAEFrames   int `json:"vae_latent_frames,omitempty"`
	VideoFrames int `json:"video_frames,omitempty"`
}

// PipelineBlock is the measured block at full depth: its wall and CPU
// time by part, and what a video of many such blocks costs (an
// extrapolation from this one block: every steady-state block does the
// same work).
type PipelineBlock struct {
	Seconds        float64 `json:"seconds"` // DiT + bank + VAE
	CPUSeconds     float64 `json:"cpu_seconds"`
	DiTSeconds     float64 `json:"dit_seconds"` // the forward calls without the bank update
	BankSeconds    float64 `json:"bank_update_seconds"`
	VAESeconds     float64 `json:"vae_seconds"`
	VideoFrames    int     `json:"video_frames"`  // frames the block adds to the video (4 per latent frame)
	VideoSeconds   float64 `json:"video_seconds"` // at 16 fps
	SecondsPerSec  float64 `json:"seconds_per_video_second"`
	Video30sSecond float64 `json:"seconds_30s_video_extrapolated"` // 30 s of video = 40 blocks of this one
}

// PipelineResult is what RunPipeline measured.
type PipelineResult struct {
	// Device is where the models ran: "cpu" or a Vulkan device's label
	// (the memory policy on the host either way).
	Device string          `json:"device"`
	Stages []PipelineStage `json:"stages"`
	// The generation stage at full depth: measured when the last depth run
	// is the full one, else extrapolated from the last two depths L1 < L2,
	// peak(L) = peak(L1) + (L − L1)·(peak(L2) − peak(L1))/(L2 − L1) (zero
	// with a single, smaller depth).
	Layers       int   `json:"layers"`
	Extrapolated bool  `json:"extrapolated"`
	GenPeakRSS   int64 `json:"generation_peak_rss_bytes_full_model"`
	GenPeakHeap  int64 `json:"generation_peak_heap_bytes_full_model"`
	GenLive      int64 `json:"generation_live_heap_bytes_full_model"`
	PerLayerRSS  int64 `json:"rss_bytes_per_layer"`
	PerLayerHeap int64 `json:"heap_bytes_per_layer"`
	PerLayerLive int64 `json:"live_heap_bytes_per_layer"`
	// PeakRSS is the larger of the text stage's and the extrapolated
	// generation stage's: the run's peak (the text encoder is released
	// before the DiT loads).
	PeakRSS int64 `json:"peak_rss_bytes_full_run"`
	// Live is the larger of the text stage's and the extrapolated
	// generation stage's live heap.
	Live    int64 `json:"live_heap_bytes_full_run"`
	Threads int   `json:"threads"`
	// Block is the measured block's time when the generation stage ran
	// the whole model (nil otherwise).
	Block *PipelineBlock `json:"block,omitempty"`
}

// RunPipeline measures the memory of a run's stages with random weights:
// the text stage (umT5 built, one prompt encoded, the encoder released),
// then the generation stage at each of o.Layers DiT depths (the DiT, the
// memory policy over o.Blocks blocks of the real latent size, the VAE
// decoder decoding o.VAEFrames latent frames in the last block, all alive
// together as in a run), each released before the next.
func RunPipeline(o PipelineOptions) (PipelineResult, error) {
	if o.TextTokens <= 0 {
		o.TextTokens = 128
	}
	if len(o.Layers) == 0 {
		o.Layers = []int{o.Model.Layers}
	}
	if o.Blocks <= 0 {
		o.Blocks = 4
	}
	if o.WarmSteps <= 0 {
		o.WarmSteps = 1
	}
	if o.Policy == "" {
		o.Policy = memory.NameDensityKV
	}
	if o.VAEFrames <= 0 || o.VAEFrames > 3 {
		o.VAEFrames = 3
	}
	res := PipelineResult{Layers: o.Model.Layers, Threads: runtime.GOMAXPROCS(0), Device: "cpu"}
	if o.Backend != nil {
		res.Device = o.Device
	}
	stopped := func() error {
		if o.Context != nil && o.Context.Err() != nil {
			return fmt.Errorf("bench: pipeline: stopped: %w", o.Context.Err())
		}
		return nil
	}
	stage := func(name string, layers int, fn func(live *int64, steps *[]PipelineStep) error) error {
		if err := stopped(); err != nil {
			return err
		}
		if o.Stage != nil {
			o.Stage(name)
		}
		release()
		base := liveHeap()
		rs, hs := startRSS(), startHeapSampler()
		t0, c0 := time.Now(), cputime.Process()
		var live int64
		var steps []PipelineStep
		err := fn(&live, &steps)
		st := PipelineStage{Name: name, Layers: layers, Seconds: time.Since(t0).Seconds(), CPUSeconds: (cputime.Process() - c0).Seconds(), Live: live - base, Steps: steps}
		release()
		st.PeakRSS, st.PeakHeap = rs.done(), int64(hs.done())
		res.Stages = append(res.Stages, st)
		return err
	}
	// The text stage.
	var err error
	if !o.SkipText {
		err = stage("text", 0, func(live *int64, _ *[]PipelineStep) error {
			m, err := t5.NewRandom(o.Text, o.Seed)
			if err != nil {
				return err
			}
			m.Precision = o.Precision
			if o.Backend != nil {
				m.UseBackend(o.Backend)
				defer m.UseBackend(nil) // the encoder leaves the device before the DiT
			}
			r := rand.New(rand.NewPCG(o.Seed, 4))
			ids, mask := make([]int32, o.TextTokens), make([]int32, o.TextTokens)
			for i := range ids {
				ids[i], mask[i] = int32(2+r.IntN(o.Text.Vocab-2)), 1
			}
			_, err = m.Encode(ids, mask)
			*live = liveHeap()
			runtime.KeepAlive(m)
			return err
		})
	}
	if err != nil {
		return res, err
	}
	// The generation stage at each depth.
	for _, L := range o.Layers {
		err := stage(fmt.Sprintf("generation, %d DiT layers", L), L, func(live *int64, steps *[]PipelineStep) error { return o.generate(L, live, steps) })
		if err != nil {
			return res, err
		}
	}
	n := len(res.Stages)
	if last := res.Stages[n-1]; last.Layers == o.Model.Layers {
		// Measured at full depth: nothing to extrapolate.
		res.GenPeakRSS, res.GenPeakHeap, res.GenLive = last.PeakRSS, last.PeakHeap, last.Live
		res.Block = blockOf(last.Steps)
	} else if n >= 2 && res.Stages[n-2].Layers > 0 {
		a, b := res.Stages[n-2], res.Stages[n-1]
		dl := int64(b.Layers - a.Layers)
		res.PerLayerRSS, res.PerLayerHeap, res.PerLayerLive = (b.PeakRSS-a.PeakRSS)/dl, (b.PeakHeap-a.PeakHeap)/dl, (b.Live-a.Live)/dl
		more := int64(o.Model.Layers - a.Layers)
		res.Extrapolated = true
		res.GenPeakRSS = a.PeakRSS + more*res.PerLayerRSS
		res.GenPeakHeap = a.PeakHeap + more*res.PerLayerHeap
		res.GenLive = a.Live + more*res.PerLayerLive
	}
	res.PeakRSS, res.Live = res.GenPeakRSS, res.GenLive
	if !o.SkipText {
		res.PeakRSS, res.Live = max(res.Stages[0].PeakRSS, res.GenPeakRSS), max(res.Stages[0].Live, res.GenLive)
	}
	return res, nil
}

// liveHeap is the heap in use right after a full collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// blockOf sums the measured block's steps (the block's DiT calls and
// its VAE decode) of a full-depth generation stage.
func blockOf(steps []PipelineStep) *PipelineBlock {
	var b PipelineBlock
	for _, s := range steps {
		switch {
		case s.Calls > 0 && s.Name == stepBlock:
			b.Seconds += s.Seconds
			b.CPUSeconds += s.CPUSeconds
			b.BankSeconds += s.BankSeconds
			b.DiTSeconds += s.Seconds - s.BankSeconds
		case s.Name == stepVAE:
			b.Seconds += s.Seconds
			b.CPUSeconds += s.CPUSeconds
			b.VAESeconds += s.Seconds
			b.VideoFrames += s.VideoFrames
		}
	}
	if b.Seconds == 0 {
		return nil
	}
	b.VideoSeconds = float64(b.VideoFrames) / 16
	if b.VideoSeconds > 0 {
		b.SecondsPerSec = b.Seconds / b.VideoSeconds
		b.Video30sSecond = 30 * b.SecondsPerSec
	}
	return &b
}

// The generation stage's step names.
const (
	stepLoad   = "build the DiT, the memory policy and the VAE decoder"
	stepWarm   = "warm-up blocks"
	stepBlock  = "measured block: DiT calls and the bank update"
	stepVAE    = "measured block: VAE decode"
	stepVAEPre = "VAE warm-up frame"
)

// timed runs fn as one step of the generation stage.
func timed(steps *[]PipelineStep, st PipelineStep, fn func(st *PipelineStep) error) error {
	rs := startRSS()
	t0, c0 := time.Now(), cputime.Process()
	err := fn(&st)
	st.Seconds, st.CPUSeconds, st.PeakRSS = time.Since(t0).Seconds(), (cputime.Process() - c0).Seconds(), rs.done()
	*steps = append(*steps, st)
	return err
}

// generate is the generation stage with L DiT layers: the models built,
// the warm-up blocks, then the measured block (its DiT calls with the
// bank update, then its VAE decode); live receives the live heap after
// the decode, steps each part's time.
func (o PipelineOptions) generate(L int, live *int64, steps *[]PipelineStep) error {
	cfg := o.Model
	cfg.Layers = L
	const fpb = 3
	var (
		m   *wan.Model
		vm  *vae.Model
		pol memory.Policy
		dec *vae.Decoder
		txt *wan.Text
	)
	var banks []*bank.Bank
	defer func() {
		for _, b := range banks {
			if f, ok := b.Passes().(interface{ Free() }); ok {
				f.Free()
			}
		}
	}()
	if o.Backend != nil {
		defer func() { // this depth's weights leave the device before the next
			if m != nil {
				m.UseBackend(nil)
			}
			if vm != nil {
				vm.UseBackend(nil)
			}
		}()
	}
	err := timed(steps, PipelineStep{Name: stepLoad}, func(*PipelineStep) error {
		var err error
		if m, err = wan.Random(cfg, o.Seed, o.Precision); err != nil {
			return err
		}
		if o.Backend != nil {
			m.UseBackend(o.Backend)
		}
		mc, err := cfg.Memory(memory.Config{}, o.Height, o.Width, fpb)
		if err != nil {
			return err
		}
		opt := memory.Options{}
		if o.NewBank != nil {
			opt.NewBank = func(c bank.Config) (*bank.Bank, error) {
				b, err := o.NewBank(c)
				if err == nil {
					banks = append(banks, b)
				}
				return b, err
			}
		}
		if pol, err = memory.NewWith(o.Policy, mc, opt); err != nil {
			return err
		}
		if vm, err = vae.Random(o.VAE, o.Seed); err != nil {
			return err
		}
		if o.Backend != nil {
			vm.UseBackend(o.Backend)
		}
		if dec, err = vm.NewDecoder(vae.Options{Precision: o.Precision}); err != nil {
			return err
		}
		r := rand.New(rand.NewPCG(o.Seed, 5))
		ctx := make([]float32, o.TextTokens*cfg.TextDim)
		for i := range ctx {
			ctx[i] = float32(r.NormFloat64())
		}
		txt, err = m.EmbedText(ctx, o.TextTokens)
		return err
	})
	if err != nil {
		return err
	}
	main := rollout.DefaultSchedule()
	warm, _, err := rollout.ScheduleOptions{Steps: rollout.DefaultSteps[:min(o.WarmSteps, len(rollout.DefaultSteps))], Shift: 5}.Build()
	if err != nil {
		return err
	}
	calls := func(s *rollout.Schedule) int { return L * (len(s.Timesteps) + 1) } // the denoising calls and the clean pass
	total := (o.Blocks-1)*calls(warm) + calls(main)
	done := 0
	errStop := errors.New("stop")
	var last []float32 // the last block's latents, [F][C][H][W]
	run := func(st *PipelineStep, sch *rollout.Schedule, start, end int) error {
		err := rollout.Run(m, pol, rollout.Options{Start: start, Blocks: end, FramesPerBlock: fpb, Height: o.Height, Width: o.Width, Schedule: sch,
			Noise: rollout.Seeded{Seed: o.Seed, StepsPerBlock: len(sch.Timesteps) - 1}, Prompts: []rollout.Prompt{{Text: txt}}, Context: o.Context,
			Progress: func(rollout.Progress) {
				done += L
				if o.Progress != nil {
					o.Progress(min(done, total), total)
				}
			},
			BlockDone: func(b int, latents []float32, log rollout.BlockLog) error {
				st.Calls += calls(sch)
				st.BankSeconds += log.UpdateSeconds
				last = append(last[:0], latents...)
				return nil
			}})
		if o.Context != nil && o.Context.Err() != nil {
			return fmt.Errorf("bench: pipeline: stopped: %w", o.Context.Err())
		}
		return err
	}
	if o.Blocks > 1 {
		name := fmt.Sprintf("%s 0–%d (%d denoising step each)", stepWarm, o.Blocks-2, o.WarmSteps)
		if err := timed(steps, PipelineStep{Name: name}, func(st *PipelineStep) error { return run(st, warm, 0, o.Blocks-1) }); err != nil {
			return err
		}
	}
	n := cfg.OutDim * o.Height * o.Width
	decode := func(st *PipelineStep, frames []float32, k int) error {
		for f := 0; f < k; f++ {
			if o.Context != nil && o.Context.Err() != nil {
				return errStop
			}
			if err := dec.DecodeFunc(frames[f*n:(f+1)*n], 1, cfg.OutDim, o.Height, o.Width, func(int, []float32) error { st.VideoFrames++; return nil }); err != nil {
				return err
			}
			st.VAEFrames++
		}
		return nil
	}
	if o.Blocks > 1 {
		// The decoder's first frame (one video frame), as the video's
		// first latent frame is in a run; the measured frames then decode
		// as every later frame does.
		if err := timed(steps, PipelineStep{Name: stepVAEPre}, func(st *PipelineStep) error { return decode(st, last[(fpb-1)*n:], 1) }); err != nil {
			return stopErr(o, err, errStop)
		}
	}
	if err := timed(steps, PipelineStep{Name: stepBlock}, func(st *PipelineStep) error { return run(st, main, o.Blocks-1, o.Blocks) }); err != nil {
		return err
	}
	if err := timed(steps, PipelineStep{Name: stepVAE}, func(st *PipelineStep) error { return decode(st, last, o.VAEFrames) }); err != nil {
		return stopErr(o, err, errStop)
	}
	*live = liveHeap() // the model, the policy, the prompt and the decoder, all alive
	runtime.KeepAlive(dec)
	runtime.KeepAlive(pol)
	runtime.KeepAlive(m)
	return nil
}

// stopErr names an interrupt as such.
func stopErr(o PipelineOptions, err, errStop error) error {
	if errors.Is(err, errStop) {
		return fmt.Errorf("bench: pipeline: stopped: %w", o.Context.Err())
	}
	return err
}
