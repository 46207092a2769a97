package rollout

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/internal/finite"
)

// The noise file holds every random draw of a rollout, so that a run can
// be replayed draw for draw by densitykv (generate --noise) or by the
// authors' pipeline, which can write one with torch.save (docs/parity.md
// gives the few lines). It is a safetensors file (generate --save-noise
// writes one) or a PyTorch zip checkpoint whose top level is a dictionary
// of these tensors, of any floating-point dtype (bfloat16, as the authors
// draw it, is read exactly):
//
//	initial  [N][C][H][W] or [1][N][C][H][W]: the initial noise of latent
//	         frames 0..N−1 (the authors' sampled_noise, [B, F, C, H, W]
//	         with B = 1); frame f starts block f / F
//	renoise  [blocks][D][F][C][H][W]: renoise[b][s] is the draw that
//	         re-noises block b after its denoising step s (the authors'
//	         torch.randn_like(denoised_pred.flatten(0, 1)) of step s), for
//	         s < the block's steps − 1; D is the largest number of draws of
//	         a block (steps − 1 of the longer of the step lists), and a
//	         block with fewer (block 0 with its own first-chunk list) leaves
//	         the rest zero. Absent when the update draws no noise
//	         (flow_euler).
//
// A file with more frames or blocks than a run needs serves its first
// ones; fewer, another frame shape, block length or number of draws per
// block, another tensor, or a NaN or ±Inf anywhere is refused. Files that
// --save-noise writes carry __metadata__ format = densitykv_noise_v1,
// blocks, frames_per_block, draws_per_block, first_block_draws and the
// source of the draws (seed N, or the noise file replayed).
const (
	NoiseInitial = "initial"
	NoiseRenoise = "renoise"
	// NoiseFormat is the format metadata of the files SaveNoise writes.
	NoiseFormat = "densitykv_noise_v1"
)

// NoiseLayout is the shape of a rollout's draws: Blocks blocks of
// FramesPerBlock latent frames [Channels][Height][Width], and Draws
// re-noise draws per block (FirstDraws for block 0).
type NoiseLayout struct {
	Blocks, FramesPerBlock  int
	Channels, Height, Width int
	Draws, FirstDraws       int
}

// NewNoiseLayout is the layout of a rollout of blocks blocks of F frames
// [C][H][W] with schedule sch (first: block 0's, or nil) and update u:
// x0_renoise draws steps − 1 times per block, flow_euler never.
func NewNoiseLayout(blocks, F, C, H, W int, sch, first *Schedule, u Update) NoiseLayout {
	l := NoiseLayout{Blocks: blocks, FramesPerBlock: F, Channels: C, Height: H, Width: W}
	if u == UpdateFlowEuler || sch == nil {
		return l
	}
	l.Draws = len(sch.Timesteps) - 1
	l.FirstDraws = l.Draws
	if first != nil {
		l.FirstDraws = len(first.Timesteps) - 1
		l.Draws = max(l.Draws, l.FirstDraws)
	}
	return l
}

// NoiseLayout is the layout of the draws of rollout o of g.
func (g *Generator) NoiseLayout(o RunOptions) NoiseLayout {
	F := o.FramesPerBlock
	if F == 0 {
		F = 3
	}
	return NewNoiseLayout(o.Blocks, F, g.Model.Cfg.OutDim, o.Height, o.Width, g.Schedule, g.FirstSchedule, g.Update)
}

// drawsOf is the number of re-noise draws block b makes.
func (l NoiseLayout) drawsOf(b int) int {
	if b == 0 {
		return l.FirstDraws
	}
	return l.Draws
}

func (l NoiseLayout) frameSize() int { return l.Channels * l.Height * l.Width }

// NoiseFile is a noise file opened for a run (OpenNoise): a Noise that
// reads each draw from the file when the rollout asks for it, holding one
// block's worth at most. Draws are read most cheaply in order (a block
// before the next); an earlier one reopens its tensor. It is not safe for
// concurrent use.
type NoiseFile struct {
	Path string
	// Frames is the number of initial-noise frames the file holds, Blocks
	// the number of blocks of re-noise draws (0 without renoise).
	Frames, Blocks int
	lay            NoiseLayout
	rf             *checkpoint.RawFile
	initial        *noiseCursor
	renoise        *noiseCursor // nil without draws
}

// OpenNoise opens the noise file at path for a rollout of layout need and
// checks it whole before any draw is used: the tensors, their shapes
// against need (see the format above), and every value finite. Errors
// name the file and what is wrong. Close releases it.
func OpenNoise(path string, need NoiseLayout) (*NoiseFile, error) {
	rf, err := checkpoint.OpenRaw(path, checkpoint.TorchOptions{})
	if err != nil {
		return nil, fmt.Errorf("rollout: noise file %s: %w", path, err)
	}
	n, err := openNoise(path, rf, need)
	if err != nil {
		rf.Close()
		return nil, fmt.Errorf("rollout: noise file %s: %w", path, err)
	}
	return n, nil
}

func openNoise(path string, rf *checkpoint.RawFile, need NoiseLayout) (*NoiseFile, error) {
	if f := rf.Metadata["format"]; f != "" && f != NoiseFormat {
		return nil, fmt.Errorf("format %q, want %s (or no format: a torch.save of initial and renoise)", f, NoiseFormat)
	}
	n := &NoiseFile{Path: path, lay: need, rf: rf}
	var ini, ren *checkpoint.RawTensor
	for i := range rf.Tensors {
		t := &rf.Tensors[i]
		switch t.Name {
		case NoiseInitial:
			ini = t
		case NoiseRenoise:
			ren = t
		default:
			return nil, fmt.Errorf("tensor %q is not one of %s, %s", t.Name, NoiseInitial, NoiseRenoise)
		}
		if !t.DType.IsFloat() {
			return nil, fmt.Errorf("tensor %s has dtype %s, want a floating-point type", t.Name, t.DType)
		}
	}
	frame := []int{need.Channels, need.Height, need.Width}
	if ini == nil {
		return nil, fmt.Errorf("no %s tensor (the initial noise [frames][C][H][W])", NoiseInitial)
	}
	sh := ini.Shape
	if len(sh) == 5 && sh[0] == 1 {
		sh = sh[1:]
	}
	if len(sh) != 4 || !equalInts(sh[1:], frame) {
		return nil, fmt.Errorf("%s has shape %v, want [frames, %d, %d, %d] (or with a leading batch of 1): the run's latent frames are [C, H, W] = %v",
			NoiseInitial, ini.Shape, frame[0], frame[1], frame[2], frame)
	}
	n.Frames = sh[0]
	if want := need.Blocks * need.FramesPerBlock; n.Frames < want {
		return nil, fmt.Errorf("%s holds %d frames, the run needs %d (%d blocks of %d frames)", NoiseInitial, n.Frames, want, need.Blocks, need.FramesPerBlock)
	}
	if need.Draws > 0 {
		if ren == nil {
			return nil, fmt.Errorf("no %s tensor: the run re-noises each block %d times (x0_renoise), [blocks][%d][%d][%d][%d][%d]",
				NoiseRenoise, need.Draws, need.Draws, need.FramesPerBlock, frame[0], frame[1], frame[2])
		}
		sh := ren.Shape
		want := append([]int{need.Draws, need.FramesPerBlock}, frame...)
		if len(sh) != 6 || !equalInts(sh[1:], want) {
			return nil, fmt.Errorf("%s has shape %v, want [blocks, %d, %d, %d, %d, %d]: %d draws per block (the run's steps − 1) of %d frames %v",
				NoiseRenoise, sh, want[0], want[1], want[2], want[3], want[4], need.Draws, need.FramesPerBlock, frame)
		}
		n.Blocks = sh[0]
		if n.Blocks < need.Blocks {
			return nil, fmt.Errorf("%s holds the draws of %d blocks, the run needs %d", NoiseRenoise, n.Blocks, need.Blocks)
		}
	}
	fs := int64(need.frameSize())
	n.initial = &noiseCursor{t: *ini}
	if err := n.initial.check(fs, "frame", 1); err != nil {
		return nil, err
	}
	if need.Draws > 0 {
		n.renoise = &noiseCursor{t: *ren}
		if err := n.renoise.check(fs, "block", int64(need.Draws*need.FramesPerBlock)); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Close releases the file.
func (n *NoiseFile) Close() error { return n.rf.Close() }

// Initial reads frame's initial noise.
func (n *NoiseFile) Initial(frame int, dst []float32) error {
	fs := n.lay.frameSize()
	if frame < 0 || frame >= n.Frames || len(dst) != fs {
		return fmt.Errorf("rollout: noise file %s: initial frame %d (%d values) beyond its %d frames of %d values", n.Path, frame, len(dst), n.Frames, fs)
	}
	if err := n.initial.read(int64(frame)*int64(fs), dst); err != nil {
		return fmt.Errorf("rollout: noise file %s: initial frame %d: %w", n.Path, frame, err)
	}
	return nil
}

// Renoise reads the draw after step of block.
func (n *NoiseFile) Renoise(block, step int, dst []float32) error {
	l := n.lay
	bs := l.FramesPerBlock * l.frameSize()
	if n.renoise == nil || block < 0 || block >= n.Blocks || step < 0 || step >= l.drawsOf(block) || len(dst) != bs {
		return fmt.Errorf("rollout: noise file %s: renoise block %d step %d (%d values) beyond its draws (%d blocks of %d draws of %d values)",
			n.Path, block, step, len(dst), n.Blocks, l.Draws, bs)
	}
	if err := n.renoise.read((int64(block)*int64(l.Draws)+int64(step))*int64(bs), dst); err != nil {
		return fmt.Errorf("rollout: noise file %s: renoise block %d step %d: %w", n.Path, block, step, err)
	}
	return nil
}

// noiseCursor reads a tensor's values in order, reopening it to go back.
type noiseCursor struct {
	t   checkpoint.RawTensor
	r   io.Reader
	pos int64 // the element r reads next
	buf []byte
}

// read fills dst with the values from element lo on.
func (c *noiseCursor) read(lo int64, dst []float32) error {
	es := int64(c.t.DType.Size())
	if c.r == nil || lo < c.pos {
		r, err := c.t.Reader()
		if err != nil {
			return err
		}
		c.r, c.pos = r, 0
	}
	if lo > c.pos {
		if _, err := io.CopyN(io.Discard, c.r, (lo-c.pos)*es); err != nil {
			c.r = nil
			return err
		}
		c.pos = lo
	}
	if len(c.buf) == 0 {
		c.buf = make([]byte, 1<<20)
	}
	for i := 0; i < len(dst); {
		b := c.buf[:min(int64(len(c.buf))/es, int64(len(dst)-i))*es]
		if _, err := io.ReadFull(c.r, b); err != nil {
			c.r = nil
			return err
		}
		d := dst[i : i+len(b)/int(es)]
		c.t.DType.Decode(d, b)
		i += len(d)
		c.pos += int64(len(d))
	}
	return nil
}

// check reads the whole tensor (its CRC-32 too, for a PyTorch file) and
// refuses a NaN or ±Inf, naming its unit (unit values each: a frame, or a
// block of draws).
func (c *noiseCursor) check(frameSize int64, unit string, framesPerUnit int64) error {
	per := frameSize * framesPerUnit
	total := c.t.Elems()
	v := make([]float32, min(total, max(per, 1<<16)))
	for lo := int64(0); lo < total; {
		d := v[:min(int64(len(v)), total-lo)]
		if err := c.read(lo, d); err != nil {
			return err
		}
		if j := finite.First(d); j >= 0 {
			at := lo + int64(j)
			return fmt.Errorf("%s holds %v at %s %d (element %d): noise must be finite", c.t.Name, d[j], unit, at/per, at)
		}
		lo += int64(len(d))
	}
	c.r = nil
	return nil
}

// SaveNoise writes every draw of a rollout of layout l from src to path
// atomically (the format above: initial [Blocks·F][C][H][W] and, when the
// rollout re-noises, renoise [Blocks][Draws][F][C][H][W], float32; the
// draws a block does not make are zero). source says where the draws come
// from (metadata "source", e.g. "seed 1"). The file does not depend on the
// order in which the rollout asked for the draws: src is addressed by
// frame and draw index.
func SaveNoise(path string, src Noise, l NoiseLayout, source string) error {
	fs := l.frameSize()
	if l.Blocks <= 0 || l.FramesPerBlock <= 0 || fs <= 0 || l.Draws < 0 || l.FirstDraws < 0 || l.FirstDraws > l.Draws {
		return fmt.Errorf("rollout: save noise %s: layout %+v", path, l)
	}
	F := l.FramesPerBlock
	frame := []int{l.Channels, l.Height, l.Width}
	buf := make([]float32, F*fs)
	raw := make([]byte, 4*len(buf))
	put := func(w io.Writer, v []float32) error {
		b := raw[:4*len(v)]
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		_, err := w.Write(b)
		return err
	}
	ts := []checkpoint.StreamTensor{{Name: NoiseInitial, DType: checkpoint.F32, Shape: append([]int{l.Blocks * F}, frame...),
		Write: func(w io.Writer) error {
			for f := 0; f < l.Blocks*F; f++ {
				if err := src.Initial(f, buf[:fs]); err != nil {
					return err
				}
				if err := put(w, buf[:fs]); err != nil {
					return err
				}
			}
			return nil
		}}}
	if l.Draws > 0 {
		ts = append(ts, checkpoint.StreamTensor{Name: NoiseRenoise, DType: checkpoint.F32, Shape: append([]int{l.Blocks, l.Draws, F}, frame...),
			Write: func(w io.Writer) error {
				for b := 0; b < l.Blocks; b++ {
					for s := 0; s < l.Draws; s++ {
						if s < l.drawsOf(b) {
							if err := src.Renoise(b, s, buf); err != nil {
								return err
							}
						} else {
							clear(buf)
						}
						if err := put(w, buf); err != nil {
							return err
						}
					}
				}
				return nil
			}})
	}
	meta := map[string]string{"format": NoiseFormat, "blocks": strconv.Itoa(l.Blocks), "frames_per_block": strconv.Itoa(F),
		"draws_per_block": strconv.Itoa(l.Draws), "first_block_draws": strconv.Itoa(l.FirstDraws), "source": source}
	if err := atomicfile.Write(path, func(w io.Writer) error { return checkpoint.WriteSafetensorsStream(w, ts, meta) }); err != nil {
		return fmt.Errorf("rollout: save noise %s: %w", path, err)
	}
	return nil
}
