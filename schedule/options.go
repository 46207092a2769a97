package schedule

import (
	"fmt"

	"github.com/densitykv/densitykv/internal/vocab"
)

// Update is how a denoising step moves the block to the next timestep: the
// authors' denoising_update_mode (pipeline CausalInferencePipeline). Its
// names are x0_renoise and flow_euler (String, MarshalText,
// UnmarshalText).
type Update uint8

const (
	// UpdateX0Renoise converts the flow prediction to x0 = x − σ_s·v and
	// re-noises it to the next timestep with a fresh draw, x = (1 −
	// σ_{s+1})·x0 + σ_{s+1}·ε (scheduler.add_noise); the block's latents
	// are the last step's x0. The released few-step models' rollout and
	// the default.
	UpdateX0Renoise Update = iota
	// UpdateFlowEuler integrates the flow to the next timestep, x = x +
	// v·(σ_{s+1} − σ_s) in float32 (scheduler.step_to, σ = 0 for a
	// timestep ≤ 0), with no fresh noise; the block's latents are the last
	// step's x + v·(0 − σ_S−1).
	UpdateFlowEuler
)

var updateNames = vocab.List{Pkg: "rollout", Kind: "denoising update", Names: []string{"x0_renoise", "flow_euler"}}

func (u Update) String() string               { return updateNames.String(uint8(u), "Update") }
func (u Update) MarshalText() ([]byte, error) { return updateNames.Marshal(uint8(u)) }
func (u *Update) UnmarshalText(b []byte) error {
	x, err := updateNames.Parse(b)
	if err == nil {
		*u = Update(x)
	}
	return err
}

// Names lists the updates' names: x0_renoise, flow_euler.
func (Update) Names() []string { return updateNames.All() }

// Options is the authors' schedule configuration: every option of
// their rollout that decides the timesteps and the update.
type Options struct {
	// Steps is denoising_step_list (nil: DefaultSteps).
	Steps []int
	// FirstChunkSteps is denoising_step_list_first_chunk: the list of
	// generated block 0 only (nil: Steps).
	FirstChunkSteps []int
	// Unwarped is warp_denoising_step: false, the raw steps as timesteps
	// (false: warped onto the shifted scheduler table, the released
	// setting).
	Unwarped bool
	// Shift is timestep_shift (0: 5).
	Shift float64
	// Update is denoising_update_mode.
	Update Update
}

// DefaultOptions is the released models' schedule: steps 1000,
// 750, 500, 250 warped with shift 5, x0 re-noise, no first-chunk list.
func DefaultOptions() Options {
	return Options{Steps: append([]int(nil), DefaultSteps...), Shift: 5}
}

// Build returns the schedule of every block and, when FirstChunkSteps is
// set, that of block 0 (nil otherwise).
func (o Options) Build() (main, first *Schedule, err error) {
	steps, shift := o.Steps, o.Shift
	if steps == nil {
		steps = DefaultSteps
	}
	if shift == 0 {
		shift = 5
	}
	if _, err := o.Update.MarshalText(); err != nil {
		return nil, nil, err
	}
	if main, err = Build(steps, shift, 1000, !o.Unwarped); err != nil {
		return nil, nil, err
	}
	if o.FirstChunkSteps != nil {
		if first, err = Build(o.FirstChunkSteps, shift, 1000, !o.Unwarped); err != nil {
			return nil, nil, fmt.Errorf("first chunk: %w", err)
		}
	}
	return main, first, nil
}

// MaxSteps returns the longest step list of o (the denoising calls of its
// longest block).
func (o Options) MaxSteps() int {
	n := len(o.Steps)
	if o.Steps == nil {
		n = len(DefaultSteps)
	}
	return max(n, len(o.FirstChunkSteps))
}
