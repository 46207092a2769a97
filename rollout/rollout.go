package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/wan"
)

// Prompt is one entry of a prompt schedule: Text is used from block
// FromBlock on (until the next entry).
type Prompt struct {
	FromBlock int
	Text      *wan.Text
	Name      string // label for logs and the manifest
}

// Progress reports one finished forward call.
type Progress struct {
	Block, Blocks int
	Step, Steps   int // Step == Steps for the clean pass
	Elapsed       time.Duration
}

// StepRecord is one forward call's input and output, for observers.
// Slices are only valid during the callback.
type StepRecord struct {
	Block, Step int
	Clean       bool
	Timestep    float32
	Input       []float32 // [F][C][H][W]
	Flow        []float32 // flow prediction
	X0          []float32 // x − σ·flow (nil for the clean pass)
}

// Options configures Run.
type Options struct {
	Blocks         int // number of blocks to generate
	FramesPerBlock int // latent frames per block (default 3)
	Height, Width  int // latent size (e.g. 60×104 for 480×832 video)
	Schedule       *Schedule
	// FirstSchedule, when set, is the schedule of block 0 (the authors'
	// denoising_step_list_first_chunk); Schedule serves every other block.
	FirstSchedule *Schedule
	// Update is how a denoising step reaches the next timestep (x0
	// re-noise by default, or a flow Euler step).
	Update Update
	// Recacher, when set, recomputes the cached K/V of the most recent
	// frames under the new prompt at every prompt switch, before the
	// switching block (LongLive's recache, see memory.Recacher): one
	// forward call of those frames' latents at t = 0. Nil (the DensityKV
	// authors' pipeline) switches the cross-attention only. It must be the
	// policy the rollout runs (or the one a wrapper of it forwards to).
	Recacher memory.Recacher
	Noise    Noise
	Prompts  []Prompt // the first must start at block 0
	// Writer, when set, receives each block's latents as it finishes.
	Writer *Writer
	// MemLog, when set, receives one JSON line per block (BlockLog).
	MemLog io.Writer
	// Progress and Observe are optional callbacks.
	Progress func(Progress)
	Observe  func(StepRecord)
	// BlockDone, when set, receives every finished block once its latents
	// are final (x0, [F][C][H][W], valid only during the call) and Writer and
	// MemLog have it: the hook for whatever a caller makes of a block
	// (shards, previews, decoded video, logs). Its error stops the rollout
	// and is returned wrapped.
	BlockDone func(block int, latents []float32, log BlockLog) error
	// Context cancels the rollout between forward calls (nil = never).
	Context context.Context
	// Stop, when set, ends the rollout between blocks: it is checked before
	// every block, and once it is done Run returns its error (wrapped)
	// without starting the block. Unlike Context it never interrupts a
	// block, so the policy is left at a block boundary, where it can be
	// snapshotted (memory.Snapshotter) and the rollout resumed with Start.
	Stop context.Context
	// Start is the first block to generate (0 = from the beginning). A
	// rollout started at block b > 0 continues one that completed blocks
	// 0..b−1: the policy must hold the state it had after block b−1 (for
	// instance restored with memory.Snapshotter), Writer must expect block
	// b (ResumeWriter) and MemLog must end after block b−1's line. Nothing
	// else carries over between blocks: Noise is addressed by frame and
	// draw index (Initial(frame), Renoise(block, step)), the prompt is
	// chosen by block index, and each Text's cross-attention K/V are fixed
	// once embedded. So blocks b.. are bit-identical to those of the
	// uninterrupted rollout.
	Start int
}

// BlockLog is the per-block memory record (one JSON line of the memory
// log): the policy's statistics of the block's first call (where memory
// updates happen) and of its clean pass (what later blocks will see).
type BlockLog struct {
	Block   int     `json:"block"`
	Frames  [2]int  `json:"frames"` // [start, end)
	Policy  string  `json:"policy"`
	Prompt  string  `json:"prompt,omitempty"`
	Seconds float64 `json:"seconds"`
	// Offered and Admitted count tokens per head per layer on the first call.
	Offered  []int `json:"offered,omitempty"`
	Admitted []int `json:"admitted,omitempty"`
	// EvictedMandatory/EvictedCapacity per layer (summed over heads).
	EvictedMandatory []int `json:"evicted_mandatory,omitempty"`
	EvictedCapacity  []int `json:"evicted_capacity,omitempty"`
	// Occupancy per layer and head, and the attention key counts per layer
	// (sink, memory, local) of the clean pass.
	Occupancy     [][]int        `json:"occupancy,omitempty"`
	Attention     []memory.Parts `json:"attention,omitempty"`
	UpdateSeconds float64        `json:"update_seconds"`
	Bytes         int64          `json:"bytes"`
	// Recached lists the frames whose K/V a recache recomputed under this
	// block's new prompt before the block (Options.Recacher).
	Recached []int `json:"recached,omitempty"`
}

// Run generates blocks opt.Start..opt.Blocks−1 with model m reading its
// history through pol. It returns the first error of the model, the
// policy, the noise source or the writer.
func Run(m *wan.Model, pol memory.Policy, opt Options) error {
	F := opt.FramesPerBlock
	if F == 0 {
		F = 3
	}
	if opt.Blocks <= 0 {
		return fmt.Errorf("rollout: %d blocks requested", opt.Blocks)
	}
	if opt.Start < 0 || opt.Start > opt.Blocks {
		return fmt.Errorf("rollout: start block %d outside [0, %d]", opt.Start, opt.Blocks)
	}
	if opt.Writer != nil && opt.Writer.Next() != opt.Start {
		return fmt.Errorf("rollout: the writer expects block %d, the rollout starts at block %d", opt.Writer.Next(), opt.Start)
	}
	if opt.Schedule == nil || len(opt.Schedule.Timesteps) == 0 || opt.FirstSchedule != nil && len(opt.FirstSchedule.Timesteps) == 0 {
		return fmt.Errorf("rollout: no schedule")
	}
	if _, err := opt.Update.MarshalText(); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	if opt.Noise == nil {
		return fmt.Errorf("rollout: no noise source")
	}
	if len(opt.Prompts) == 0 || opt.Prompts[0].FromBlock != 0 {
		return fmt.Errorf("rollout: the prompt schedule must start at block 0")
	}
	for i, p := range opt.Prompts {
		if p.Text == nil || (i > 0 && p.FromBlock <= opt.Prompts[i-1].FromBlock) {
			return fmt.Errorf("rollout: prompt %d (from block %d) has no text or is out of order", i, p.FromBlock)
		}
	}
	cfg := m.Cfg
	if want := cfg.Layout(opt.Height, opt.Width, F); pol.Layout() != want {
		return fmt.Errorf("rollout: policy %s layout %+v does not match the model's %+v", pol.Name(), pol.Layout(), want)
	}
	if opt.Height%cfg.Patch[1] != 0 || opt.Width%cfg.Patch[2] != 0 || opt.Height <= 0 || opt.Width <= 0 {
		return fmt.Errorf("rollout: latent %d×%d is not a positive multiple of the patch", opt.Height, opt.Width)
	}
	if cfg.InDim != cfg.OutDim {
		return fmt.Errorf("rollout: in_dim %d ≠ out_dim %d", cfg.InDim, cfg.OutDim)
	}
	ctx := opt.Context
	if ctx == nil {
		ctx = context.Background()
	}
	r := newBlockRunner(m, pol, opt, F)
	if opt.Recacher != nil && opt.Start > 0 {
		if err := r.reloadLatents(opt.Start); err != nil {
			return err
		}
	}
	for b := opt.Start; b < opt.Blocks; b++ {
		if opt.Stop != nil {
			if err := opt.Stop.Err(); err != nil {
				return fmt.Errorf("rollout: stopped before block %d: %w", b, err)
			}
		}
		log, err := r.runBlock(ctx, b)
		if err != nil {
			return err
		}
		if opt.Writer != nil {
			if err := opt.Writer.WriteBlock(b, r.x0, log.Seconds); err != nil {
				return err
			}
		}
		if opt.MemLog != nil {
			line, err := json.Marshal(log)
			if err != nil {
				return fmt.Errorf("rollout: block %d: memory log: %w", b, err)
			}
			if _, err := opt.MemLog.Write(append(line, '\n')); err != nil {
				return fmt.Errorf("rollout: block %d: memory log: %w", b, err)
			}
		}
		if opt.BlockDone != nil {
			if err := opt.BlockDone(b, r.x0, log); err != nil {
				return fmt.Errorf("rollout: block %d: %w", b, err)
			}
		}
	}
	return nil
}

// blockRunner holds a rollout's per-block state: the block's latents and
// the buffers of its forward calls.
type blockRunner struct {
	m           *wan.Model
	pol         memory.Policy
	sr          memory.StatsReporter // pol's statistics, nil when it reports none
	opt         Options
	F           int
	frameSize   int
	x, x0, flow []float32 // [F][C][H][W]
	eps         []float32
	ts          []float32 // [F] timesteps of a call
	start       time.Time
	// lat holds the finished latents [C][H][W] of the frames a recache may
	// recompute (with Options.Recacher): the last CacheFrames frames and
	// the sink frames.
	lat map[int][]float32
}

func newBlockRunner(m *wan.Model, pol memory.Policy, opt Options, F int) *blockRunner {
	frameSize := m.Cfg.InDim * opt.Height * opt.Width
	blockSize := F * frameSize
	// The initial noise of every frame is drawn "up front": Noise.Initial is
	// indexed by frame and independent of call order (Seeded uses one stream
	// per frame, Sequence indexes the supplied draws), so reading each
	// block's frames when the block starts gives exactly the up-front draw
	// while holding one block, not the whole video.
	r := &blockRunner{m: m, pol: pol, opt: opt, F: F, frameSize: frameSize,
		x: make([]float32, blockSize), x0: make([]float32, blockSize), flow: make([]float32, blockSize),
		eps: make([]float32, blockSize), ts: make([]float32, F), start: time.Now()}
	r.sr, _ = pol.(memory.StatsReporter)
	r.lat = map[int][]float32{}
	return r
}

// runBlock generates block b (frames [bF, bF+F)) into r.x0: its S
// denoising calls, then the clean pass that commits its K/V to the
// policy. It returns the block's memory record.
func (r *blockRunner) runBlock(ctx context.Context, b int) (BlockLog, error) {
	opt, F, sch := r.opt, r.F, r.opt.Schedule
	if b == 0 && opt.FirstSchedule != nil {
		sch = opt.FirstSchedule
	}
	S := len(sch.Timesteps)
	bt := time.Now()
	prompt := opt.Prompts[0]
	switched := false
	for _, p := range opt.Prompts {
		if p.FromBlock <= b {
			prompt, switched = p, p.FromBlock == b && b > 0
		}
	}
	var recached []int
	if switched && opt.Recacher != nil {
		var err error
		if recached, err = r.recache(b, prompt); err != nil {
			return BlockLog{}, err
		}
	}
	for f := 0; f < F; f++ {
		if err := opt.Noise.Initial(b*F+f, r.x[f*r.frameSize:(f+1)*r.frameSize]); err != nil {
			return BlockLog{}, err
		}
	}
	log := BlockLog{Block: b, Frames: [2]int{b * F, (b + 1) * F}, Policy: r.pol.Name(), Prompt: prompt.Name, Recached: recached}
	for s := 0; s <= S; s++ {
		if err := ctx.Err(); err != nil {
			return log, fmt.Errorf("rollout: block %d step %d: %w", b, s, err)
		}
		clean := s == S
		var t float32
		in := r.x
		if clean {
			in = r.x0
		} else {
			t = sch.Timesteps[s]
		}
		for i := range r.ts {
			r.ts[i] = t
		}
		call := memory.Call{Block: b, Step: s, Clean: clean, First: s == 0}
		if clean {
			call.Latent = r.x0
		}
		err := r.m.Forward(r.flow, wan.Call{Latent: in, Height: opt.Height, Width: opt.Width, Timesteps: r.ts, Text: prompt.Text, Mem: call}, r.pol)
		if err != nil {
			return log, fmt.Errorf("rollout: block %d step %d: %w", b, s, err)
		}
		if r.sr != nil {
			st := r.sr.LastStats()
			if s == 0 {
				log.Offered, log.Admitted = st.Offered, st.Admitted
				log.EvictedMandatory, log.EvictedCapacity = st.EvictedMandatory, st.EvictedCapacity
			}
			log.UpdateSeconds += st.UpdateSeconds
			if clean {
				log.Occupancy, log.Attention, log.Bytes = st.Occupancy, st.Parts, st.Bytes
			}
		}
		if !clean {
			ToX0(r.x0, r.x, r.flow, sch.Sigmas[s])
			if opt.Update == UpdateFlowEuler && s == S-1 {
				// The block's latents: the Euler step from the last
				// timestep to σ = 0 (step_to(…, 0)), not x − σ·v in float64.
				copy(r.x0, r.x)
				EulerStep(r.x0, r.flow, sch.Sigmas[s], 0)
			}
		}
		if opt.Observe != nil {
			rec := StepRecord{Block: b, Step: s, Clean: clean, Timestep: t, Input: in, Flow: r.flow}
			if !clean {
				rec.X0 = r.x0
			}
			opt.Observe(rec)
		}
		if !clean && s < S-1 {
			switch opt.Update {
			case UpdateFlowEuler:
				EulerStep(r.x, r.flow, sch.Sigmas[s], nextSigma(sch, s, opt.Update))
			default:
				if err := opt.Noise.Renoise(b, s, r.eps); err != nil {
					return log, err
				}
				Renoise(r.x, r.x0, r.eps, nextSigma(sch, s, opt.Update))
			}
		}
		if opt.Progress != nil {
			opt.Progress(Progress{Block: b, Blocks: opt.Blocks, Step: s, Steps: S, Elapsed: time.Since(r.start)})
		}
	}
	if r.sr == nil {
		log.Bytes = r.pol.Bytes()
	}
	if opt.Recacher != nil {
		r.keepLatents(b, r.x0)
	}
	log.Seconds = time.Since(bt).Seconds()
	return log, nil
}
