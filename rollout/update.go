package rollout

import (
	"github.com/densitykv/densitykv/schedule"
)

// The schedule (timesteps, σ, the denoising update and the authors'
// options that decide them) is package schedule's, plain data that
// configurations hold too; rollout keeps its names for it.
type (
	Schedule        = schedule.Schedule
	ScheduleOptions = schedule.Options
	Update          = schedule.Update
)

// The denoising updates (schedule.Update).
const (
	UpdateX0Renoise = schedule.UpdateX0Renoise
	UpdateFlowEuler = schedule.UpdateFlowEuler
)

// DefaultSteps is the 4-step list of the released models
// (schedule.DefaultSteps).
var DefaultSteps = schedule.DefaultSteps

// NewSchedule is schedule.New.
func NewSchedule(steps []int, shift float64, numTrain int) (*Schedule, error) {
	return schedule.New(steps, shift, numTrain)
}

// BuildSchedule is schedule.Build.
func BuildSchedule(steps []int, shift float64, numTrain int, warp bool) (*Schedule, error) {
	return schedule.Build(steps, shift, numTrain, warp)
}

// DefaultSchedule is schedule.Default: the released models' schedule.
func DefaultSchedule() *Schedule { return schedule.Default() }

// DefaultScheduleOptions is schedule.DefaultOptions.
func DefaultScheduleOptions() ScheduleOptions { return schedule.DefaultOptions() }

// EulerStep writes x = x + flow·(next − sigma) in float32, the difference of
// the σ taken first (the authors' scheduler.step_to).
func EulerStep(x, flow []float32, sigma, next float32) {
	d := next - sigma
	for i := range x {
		x[i] += float32(flow[i] * d) // the conversion keeps the product rounded (no fused multiply-add)
	}
}

// nextSigma is σ of the timestep after step s of sch, as the update that
// leaves step s uses it: the table's nearest entry for x0 re-noise (which
// never reaches 0), and for the flow Euler step 0 after the last step or at
// a timestep ≤ 0.
func nextSigma(sch *Schedule, s int, u Update) float32 {
	if s+1 >= len(sch.Timesteps) {
		return 0
	}
	t := sch.Timesteps[s+1]
	if u == UpdateFlowEuler && t <= 0 {
		return 0
	}
	return sch.Sigmas[s+1]
}

// ToX0 writes x0 = x − σ·flow (computed in float64, rounded to float32).
func ToX0(x0, x, flow []float32, sigma float32) {
	sg := float64(sigma)
	for i := range x0 {
		x0[i] = float32(float64(x[i]) - sg*float64(flow[i]))
	}
}

// Renoise writes x = (1 − σ)·x0 + σ·noise in float32 (the authors'
// x0_renoise update, scheduler.add_noise).
func Renoise(x, x0, noise []float32, sigma float32) {
	for i := range x {
		x[i] = (1-sigma)*x0[i] + sigma*noise[i]
	}
}
