package rollout

import (
	"fmt"
	"math/rand/v2"
)

// Noise supplies the rollout's Gaussian draws: the initial noise of every
// latent frame (drawn up front, in frame order) and one re-noise draw of a
// whole block after each non-final denoising step.
//
// Implementations must be addressable by index: Initial(f) returns the f-th
// frame of the up-front draw whatever the order of calls.
type Noise interface {
	// Initial fills dst ([C][H][W]) with frame's initial noise.
	Initial(frame int, dst []float32) error
	// Renoise fills dst ([F][C][H][W]) with the draw used after denoising
	// step of block.
	Renoise(block, step int, dst []float32) error
}

// Seeded is a deterministic Gaussian source: every draw comes from its own
// PCG stream keyed by (seed, kind, index), so frame f's initial noise is the
// same whether frames are drawn up front or lazily, and a rollout is
// reproducible for a seed regardless of thread count.
type Seeded struct {
	Seed uint64
	// StepsPerBlock is the number of re-noise draws per block (steps − 1),
	// used to index draws k = block·StepsPerBlock + step.
	StepsPerBlock int
}

func (s Seeded) fill(kind, idx uint64, dst []float32) {
	r := rand.New(rand.NewPCG(s.Seed, kind<<56|idx))
	for i := range dst {
		dst[i] = float32(r.NormFloat64())
	}
}

// Initial fills frame's initial noise.
func (s Seeded) Initial(frame int, dst []float32) error {
	if frame < 0 {
		return fmt.Errorf("rollout: noise: frame %d is negative", frame)
	}
	s.fill(1, uint64(frame), dst)
	return nil
}

// Renoise fills the draw after step of block.
func (s Seeded) Renoise(block, step int, dst []float32) error {
	if block < 0 || step < 0 || (s.StepsPerBlock > 0 && step >= s.StepsPerBlock) {
		return fmt.Errorf("rollout: noise: renoise block %d step %d out of range", block, step)
	}
	s.fill(2, uint64(block*max(s.StepsPerBlock, 1)+step), dst)
	return nil
}

// Sequence replays a supplied noise sequence in draw order: Initial holds
// every frame's initial noise [frames][C][H][W]; Renoise holds the re-noise
// draws [k][F][C][H][W] with k = block·PerBlock + step.
type Sequence struct {
	InitialValues []float32
	RenoiseValues []float32
	FrameSize     int // C·H·W
	BlockSize     int // F·C·H·W
	PerBlock      int // re-noise draws per block (steps − 1)
}

// Initial copies frame's initial noise.
func (s *Sequence) Initial(frame int, dst []float32) error {
	lo := frame * s.FrameSize
	if frame < 0 || len(dst) != s.FrameSize || lo+s.FrameSize > len(s.InitialValues) {
		return fmt.Errorf("rollout: noise sequence: initial frame %d (%d values) beyond the %d supplied values", frame, len(dst), len(s.InitialValues))
	}
	copy(dst, s.InitialValues[lo:lo+s.FrameSize])
	return nil
}

// Renoise copies the draw after step of block.
func (s *Sequence) Renoise(block, step int, dst []float32) error {
	k := block*s.PerBlock + step
	lo := k * s.BlockSize
	if block < 0 || step < 0 || step >= s.PerBlock || len(dst) != s.BlockSize || lo+s.BlockSize > len(s.RenoiseValues) {
		return fmt.Errorf("rollout: noise sequence: renoise block %d step %d (draw %d) beyond the %d supplied values", block, step, k, len(s.RenoiseValues))
	}
	copy(dst, s.RenoiseValues[lo:lo+s.BlockSize])
	return nil
}
