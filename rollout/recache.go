package rollout

import (
	"fmt"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/wan"
)

// recacheWindow returns the frames whose latents a recache may need after
// the frames before end are finished: [end − CacheFrames, end) and the sink
// frames, from the policy's configuration (every frame when it reports
// none).
func (r *blockRunner) recacheWindow(end int) (first, sink int) {
	pc, ok := r.opt.Recacher.(interface{ Config() memory.Config })
	if !ok {
		return 0, 0
	}
	c := pc.Config()
	return end - c.CacheFrames, c.SinkFrames
}

// keepLatents records block b's finished latents x0 and drops the frames
// no recache can need any more.
func (r *blockRunner) keepLatents(b int, x0 []float32) {
	for f := 0; f < r.F; f++ {
		r.lat[b*r.F+f] = append([]float32(nil), x0[f*r.frameSize:(f+1)*r.frameSize]...)
	}
	first, sink := r.recacheWindow((b + 1) * r.F)
	for id := range r.lat {
		if id < first && id >= sink {
			delete(r.lat, id)
		}
	}
}

// reloadLatents reads the latents of the blocks before start that a
// recache may need from the writer's folder (a resumed rollout).
func (r *blockRunner) reloadLatents(start int) error {
	w := r.opt.Writer
	if w == nil {
		return fmt.Errorf("rollout: start block %d with a recacher needs the writer holding the earlier blocks' latents", start)
	}
	first, sink := r.recacheWindow(start * r.F)
	for b := 0; b < start; b++ {
		lo, hi := b*r.F, (b+1)*r.F
		if hi <= first && lo >= sink {
			continue
		}
		x, err := ReadBlock(w.dir, w.man, b)
		if err != nil {
			return fmt.Errorf("rollout: recache latents: %w", err)
		}
		r.keepLatents(b, x)
	}
	return nil
}

// recache runs LongLive's recache before block b under prompt: the frames
// the policy recomputes, in one forward call of their latents at t = 0
// (context_noise), the policy reading it through recachePolicy. It returns
// the frames recomputed.
func (r *blockRunner) recache(b int, prompt Prompt) ([]int, error) {
	rc := r.opt.Recacher
	frames := rc.RecacheFrames(b)
	if len(frames) == 0 {
		return nil, nil
	}
	n := len(frames)
	lat := make([]float32, n*r.frameSize)
	for i, id := range frames {
		x, ok := r.lat[id]
		if !ok {
			return nil, fmt.Errorf("rollout: recache before block %d: no latents of frame %d", b, id)
		}
		copy(lat[i*r.frameSize:], x)
	}
	lay := r.pol.Layout()
	lay.FramesPerBlock = n
	pol := recachePolicy{rc: rc, name: r.pol.Name(), lay: lay, block: b}
	if pc, ok := rc.(interface{ Config() memory.Config }); ok {
		pol.cfg, pol.hasCfg = pc.Config(), true
	}
	var run memory.Policy = pol
	if pol.hasCfg {
		run = recacheConfig{pol}
	}
	flow := make([]float32, n*r.frameSize)
	err := r.m.Forward(flow, wan.Call{Latent: lat, Height: r.opt.Height, Width: r.opt.Width, Timesteps: make([]float32, n), Text: prompt.Text,
		Mem: memory.Call{Block: b}}, run)
	if err != nil {
		return nil, fmt.Errorf("rollout: recache before block %d (frames %v): %w", b, frames, err)
	}
	return frames, nil
}

// recachePolicy presents a recache to the model as one forward call of
// the recached frames: its layout has that many frames per block.
type recachePolicy struct {
	rc     memory.Recacher
	name   string
	lay    memory.Layout
	block  int
	cfg    memory.Config
	hasCfg bool
}

func (p recachePolicy) Name() string            { return p.name + " (recache)" }
func (p recachePolicy) Layout() memory.Layout   { return p.lay }
func (p recachePolicy) Begin(memory.Call) error { return p.rc.BeginRecache(p.block) }
func (p recachePolicy) Attend(layer int, q, k, v []float32) (memory.Context, error) {
	return p.rc.AttendRecache(layer, q, k, v)
}
func (p recachePolicy) End() error   { return p.rc.EndRecache() }
func (p recachePolicy) Bytes() int64 { return 0 }

// recacheConfig is a recachePolicy that reports the policy's configuration
// (the model checks its RoPE base).
type recacheConfig struct{ recachePolicy }

func (p recacheConfig) Config() memory.Config { return p.cfg }
