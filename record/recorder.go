package record

import (
	"fmt"

	"github.com/densitykv/densitykv/memory"
)

// Recorder is a memory.Policy that records the clean passes of a rollout to
// a Writer and otherwise behaves exactly as the policy it wraps. Wrap the
// policy handed to any backbone's rollout; the recorded file replays through
// FileReader. Non-clean calls are passed through unrecorded.
type Recorder struct {
	Inner memory.Policy
	W     *Writer

	recording bool
}

// NewRecorder wraps inner; w's layout must equal inner's.
func NewRecorder(inner memory.Policy, w *Writer) (*Recorder, error) {
	if inner.Layout() != w.Header().Layout {
		return nil, fmt.Errorf("record: recorder: policy %s layout %+v differs from writer layout %+v", inner.Name(), inner.Layout(), w.Header().Layout)
	}
	return &Recorder{Inner: inner, W: w}, nil
}

// Name implements memory.Policy (the inner name).
func (r *Recorder) Name() string { return r.Inner.Name() }

// Layout implements memory.Policy.
func (r *Recorder) Layout() memory.Layout { return r.Inner.Layout() }

// Bytes implements memory.Policy (the inner policy's storage).
func (r *Recorder) Bytes() int64 { return r.Inner.Bytes() }

// LatentShape infers (F, C, H', W') of a Call.Latent for layout l, assuming
// latents at twice the token resolution per axis (Wan's 2×2 patches); other
// sizes are recorded as a flat (1, 1, 1, n) shape.
func LatentShape(l memory.Layout, n int) [4]int {
	if n == 0 {
		return [4]int{}
	}
	plane := l.FramesPerBlock * 4 * l.TokensPerFrame()
	if plane > 0 && n%plane == 0 {
		return [4]int{l.FramesPerBlock, n / plane, 2 * l.Height, 2 * l.Width}
	}
	return [4]int{1, 1, 1, n}
}

// Begin implements memory.Policy; on a clean pass it starts a block record.
func (r *Recorder) Begin(c memory.Call) error {
	r.recording = false
	if c.Clean {
		if err := r.W.BeginBlock(c.Block, c.Latent, LatentShape(r.Layout(), len(c.Latent))); err != nil {
			return fmt.Errorf("record: recorder: %w", err)
		}
		r.recording = true
	}
	return r.Inner.Begin(c)
}

// Attend implements memory.Policy; on a clean pass it records q, k, v first.
func (r *Recorder) Attend(layer int, q, k, v []float32) (memory.Context, error) {
	if r.recording {
		if err := r.W.WriteLayer(layer, q, k, v); err != nil {
			return memory.Context{}, fmt.Errorf("record: recorder: %w", err)
		}
	}
	return r.Inner.Attend(layer, q, k, v)
}

// End implements memory.Policy.
func (r *Recorder) End() error {
	r.recording = false
	return r.Inner.End()
}
