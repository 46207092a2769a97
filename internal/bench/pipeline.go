package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/t5"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/wan"
)

// PipelineOptions configures RunPipeline: the memory of a real-size run
// (prompt → umT5 → DiT rollout with a memory policy → VAE) measured with
// random weights of the real shapes.
type PipelineOptions struct {
	Text       t5.Config  // the text encoder (UMT5XXL)
	TextTokens int        // prompt length (0 = 128)
	SkipText   bool       // no text stage (the generation stage alone)
	Model      wan.Config // the DiT (Layers: the full depth)
	// Layers are the DiT depths run (0 = {1, 2}): the generation stage is
	// measured at each, and its peak extrapolated linearly to Model.Layers
	// (every layer holds the same: its weights, its policy state, its
	// prompt's K/V).
	Layers        []int
	Height, Width int    // latent size (60×104)
	Blocks        int    // rollout blocks (0 = 5: the DensityKV bank is full from block 3 on)
	Policy        string // memory policy (paper settings; "" = densitykv)
	VAE           vae.Config
	// VAEFrames is the number of latent frames the VAE decodes, in the
	// last block (0 = 2: frame 0, then one steady frame, after which every
	// feature cache has its full size).
	VAEFrames int
	// Precision is the models' precision (the text encoder's compute, the
	// DiT's weights and products, the VAE's products), as generate's
	// --precision: bf16 for the real-size models.
	Precision gemm.Precision
	Seed      uint64
	Context   context.Context
	// Stage reports each stage as it starts.
	Stage func(name string)
}

// PipelineStage is one stage's measurement.
type PipelineStage struct {
	Name     string  `json:"name"`
	Layers   int     `json:"layers,omitempty"` // DiT layers run
	Seconds  float64 `json:"seconds"`
	PeakRSS  int64   `json:"peak_rss_bytes"`  // resident set, sampled every 20 ms
	PeakHeap int64   `json:"peak_heap_bytes"` // heap objects, live and not yet swept (runtime/metrics), sampled every 25 ms
	// Live is the heap the stage holds when everything is alive (after a
	// forced GC at its end: the text encoder after its prompt; the DiT,
	// policy, prompt and VAE decoder after the last block's decode): the
	// memory it needs. RSS exceeds it by the collector's slack (GOGC=100
	// lets the heap grow to twice the live heap until a memory limit is
	// near; densitykv sets one at 3/4 of the machine's memory).
	Live int64 `json:"live_heap_bytes"`
}

// PipelineResult is what RunPipeline measured.
type PipelineResult struct {
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
		o.Layers = []int{1, 2}
	}
	if o.Blocks <= 0 {
		o.Blocks = 5
	}
	if o.Policy == "" {
		o.Policy = memory.NameDensityKV
	}
	if o.VAEFrames <= 0 {
		o.VAEFrames = 2
	}
	res := PipelineResult{Layers: o.Model.Layers, Threads: runtime.GOMAXPROCS(0)}
	stopped := func() error {
		if o.Context != nil && o.Context.Err() != nil {
			return fmt.Errorf("bench: pipeline: stopped: %w", o.Context.Err())
		}
		return nil
	}
	stage := func(name string, layers int, fn func(live *int64) error) error {
		if err := stopped(); err != nil {
			return err
		}
		if o.Stage != nil {
			o.Stage(name)
		}
		release()
		base := liveHeap()
		rs, hs := startRSS(), startHeapSampler()
		t0 := time.Now()
		var live int64
		err := fn(&live)
		st := PipelineStage{Name: name, Layers: layers, Seconds: time.Since(t0).Seconds(), Live: live - base}
		release()
		st.PeakRSS, st.PeakHeap = rs.done(), int64(hs.done())
		res.Stages = append(res.Stages, st)
		return err
	}
	// The text stage.
	var err error
	if !o.SkipText {
		err = stage("text", 0, func(live *int64) error {
			m, err := t5.NewRandom(o.Text, o.Seed)
			if err != nil {
				return err
			}
			m.Precision = o.Precision
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
		err := stage(fmt.Sprintf("generation, %d DiT layers", L), L, func(live *int64) error { return o.generate(L, live) })
		if err != nil {
			return res, err
		}
	}
	n := len(res.Stages)
	if last := res.Stages[n-1]; last.Layers == o.Model.Layers {
		// Measured at full depth: nothing to extrapolate.
		res.GenPeakRSS, res.GenPeakHeap, res.GenLive = last.PeakRSS, last.PeakHeap, last.Live
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

// generate is the generation stage with L DiT layers; live receives the
// live heap after the last block's decode.
func (o PipelineOptions) generate(L int, live *int64) error {
	cfg := o.Model
	cfg.Layers = L
	m, err := wan.Random(cfg, o.Seed, o.Precision)
	if err != nil {
		return err
	}
	mc, err := cfg.Memory(memory.Config{}, o.Height, o.Width, 3)
	if err != nil {
		return err
	}
	pol, err := memory.New(o.Policy, mc)
	if err != nil {
		return err
	}
	vm, err := vae.Random(o.VAE, o.Seed)
	if err != nil {
		return err
	}
	dec, err := vm.NewDecoder(vae.Options{Precision: o.Precision})
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(o.Seed, 5))
	ctx := make([]float32, o.TextTokens*cfg.TextDim)
	for i := range ctx {
		ctx[i] = float32(r.NormFloat64())
	}
	txt, err := m.EmbedText(ctx, o.TextTokens)
	if err != nil {
		return err
	}
	sch := rollout.DefaultSchedule()
	errStop := errors.New("stop")
	err = rollout.Run(m, pol, rollout.Options{Blocks: o.Blocks, FramesPerBlock: 3, Height: o.Height, Width: o.Width, Schedule: sch,
		Noise: rollout.Seeded{Seed: o.Seed, StepsPerBlock: len(sch.Timesteps) - 1}, Prompts: []rollout.Prompt{{Text: txt}}, Context: o.Context,
		BlockDone: func(b int, latents []float32, _ rollout.BlockLog) error {
			if b < o.Blocks-1 {
				return nil
			}
			n := cfg.OutDim * o.Height * o.Width
			for k := 0; k < o.VAEFrames && k < 3; k++ {
				if o.Context != nil && o.Context.Err() != nil {
					return errStop
				}
				if err := dec.DecodeFunc(latents[k*n:(k+1)*n], 1, cfg.OutDim, o.Height, o.Width, func(int, []float32) error { return nil }); err != nil {
					return err
				}
			}
			*live = liveHeap() // the model, the policy, the prompt and the decoder, all alive
			runtime.KeepAlive(dec)
			return nil
		}})
	if errors.Is(err, errStop) {
		return fmt.Errorf("bench: pipeline: stopped: %w", o.Context.Err())
	}
	runtime.KeepAlive(pol)
	return err
}
