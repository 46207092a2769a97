// Package schedule is the few-step flow-matching schedule of the causal
// Wan rollouts: the warped timesteps and their σ (Schedule: New, Build,
// Default), the denoising update (Update), and the authors' options that
// decide them (Options, Options.Build). Plain data and arithmetic on
// numbers: package rollout runs it, package config holds Options.
package schedule

import (
	"fmt"
	"math"
)

// Schedule is the few-step flow-matching schedule: the warped denoising
// timesteps, their σ, and the full scheduler table used to find σ(t) for an
// arbitrary t (nearest entry), all float32 as in the reference
// FlowMatchScheduler(shift, sigma_min = 0, extra_one_step = true) with
// num_train_timesteps entries.
type Schedule struct {
	Timesteps []float32 // per denoising step
	Sigmas    []float32 // per denoising step
	tableT    []float32 // scheduler timesteps (descending)
	tableS    []float32 // scheduler sigmas
}

// DefaultSteps is the 4-step list of the released models.
var DefaultSteps = []int{1000, 750, 500, 250}

// New warps steps (values in [0, numTrain]) with σ' = shift·σ/(1 +
// (shift−1)·σ) on a numTrain-entry table (Build with warp on).
// Default gives timesteps [1000, 937.5, 833.3333, 625] and σ [1,
// 0.9375, 0.8333333, 0.625].
func New(steps []int, shift float64, numTrain int) (*Schedule, error) {
	return Build(steps, shift, numTrain, true)
}

// Build is the authors' denoising schedule (pipeline
// CausalInferencePipeline): the scheduler table of FlowMatchScheduler(shift,
// sigma_min = 0, extra_one_step = true) with numTrain entries, and the step
// list steps (values in [0, numTrain], strictly decreasing). With warp
// (warp_denoising_step: true) step s becomes the table's timestep
// numTrain − s (step 0 the extra terminal value 0); without it the raw step
// is the timestep. Either way σ_s is the table's σ at the entry nearest to
// the timestep (Sigma), as the authors' flow-to-x0 conversion and re-noise
// look it up, so an unwarped step 500 with shift 5 has σ ≈ 0.5006.
func Build(steps []int, shift float64, numTrain int, warp bool) (*Schedule, error) {
	if numTrain < 2 || !(shift > 0) || math.IsInf(shift, 0) {
		return nil, fmt.Errorf("rollout: schedule: num_train %d must be ≥ 2 and shift %v positive", numTrain, shift)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("rollout: schedule: no denoising steps")
	}
	s := &Schedule{tableT: make([]float32, numTrain), tableS: make([]float32, numTrain)}
	// torch.linspace(1, 0, numTrain+1)[:-1] in float32: the first half counts
	// up from start, the second half down from end.
	n := numTrain + 1
	step := float32(0-1) / float32(n-1)
	sh := float32(shift)
	for i := 0; i < numTrain; i++ {
		var lin float32
		if i < n/2 {
			lin = 1 + step*float32(i)
		} else {
			lin = 0 - step*float32(n-1-i)
		}
		sig := sh * lin / (1 + (sh-1)*lin)
		s.tableS[i] = sig
		s.tableT[i] = sig * float32(numTrain)
	}
	for i, st := range steps {
		if st < 0 || st > numTrain {
			return nil, fmt.Errorf("rollout: schedule: step %d is %d, want 0..%d", i, st, numTrain)
		}
		if i > 0 && st >= steps[i-1] {
			return nil, fmt.Errorf("rollout: schedule: steps %v must decrease", steps)
		}
		t := float32(st)
		if warp {
			t = 0 // the terminal value appended by extra_one_step
			if st > 0 {
				t = s.tableT[numTrain-st]
			}
		}
		s.Timesteps = append(s.Timesteps, t)
		s.Sigmas = append(s.Sigmas, s.Sigma(t))
	}
	return s, nil
}

// Default is New(DefaultSteps, 5, 1000).
func Default() *Schedule {
	s, err := New(DefaultSteps, 5, 1000)
	if err != nil {
		panic(err)
	}
	return s
}

// Sigma returns σ at the scheduler entry nearest to t (the first on ties):
// Sigma(0) is 0.00498…, not 0.
func (s *Schedule) Sigma(t float32) float32 {
	best, bd := 0, math.Inf(1)
	for i, v := range s.tableT {
		if d := math.Abs(float64(v) - float64(t)); d < bd {
			best, bd = i, d
		}
	}
	return s.tableS[best]
}
