// Package drift computes model-free statistics of a long video as it is
// generated, one record per block, that show the video going wrong while
// the run goes on: the block against the first block (mean-frame
// difference, colour-histogram distance), the change from frame to frame
// inside the block against the change across the seam with the block
// before (seam flicker), and the size of the block's latents.
//
// They are proxies, not VBench scores: cheap numbers with no model behind
// them, meant to catch a run that drifts (colours washing out, a scene
// that freezes or jumps at every block seam, latents growing) hours before
// it ends.
//
// A run's comparisons (the first block's histogram and mean frame, the
// previous block's last frame, the first block's latent size) live in a
// State, which a run saves in its checkpoint: a resumed run writes the
// records an uninterrupted one does. Every statistic is computed in
// integers or in float64 in a fixed order, so records are deterministic.
package drift

import (
	"errors"
	"fmt"
	"math"
)

const (
	// Bins is the number of histogram bins per colour channel (of 256/Bins
	// levels each).
	Bins = 32
	// Thumb is the largest side of the thumbnails the frame differences are
	// computed on: a frame is averaged over s×s cells, s = ⌈max(h, w)/Thumb⌉.
	Thumb = 64
	// FlickerFloor (levels) is the smallest in-block change seam_flicker
	// divides by, so that a still video has a finite ratio.
	FlickerFloor = 0.5
)

// State is what a run's records compare against. The zero State is a run
// before its first block. It is JSON-encoded into the run's checkpoint.
type State struct {
	// Blocks is the number of blocks seen (the next block's index).
	Blocks int `json:"blocks"`
	// FirstLatentRMS is the first block's latent RMS.
	FirstLatentRMS float64 `json:"first_latent_rms"`
	// Pixels is true when the blocks came with frames (a run with a VAE).
	Pixels bool `json:"pixels,omitempty"`
	// H, W are the frames' size; TH, TW the thumbnails'.
	H  int `json:"h,omitempty"`
	W  int `json:"w,omitempty"`
	TH int `json:"th,omitempty"`
	TW int `json:"tw,omitempty"`
	// FirstHist is the first block's histogram, [3][Bins] counts.
	FirstHist []int64 `json:"first_hist,omitempty"`
	// FirstMean is the first block's mean thumbnail [TH][TW][3].
	FirstMean []byte `json:"first_mean,omitempty"`
	// Last is the previous block's last thumbnail [TH][TW][3].
	Last []byte `json:"last,omitempty"`
}

// Record is one block's statistics, one line of drift.jsonl. Fields that do
// not apply are absent: pixel statistics without a VAE, seam statistics of
// the first block, in-block change of a block of one frame.
type Record struct {
	Block int `json:"block"`
	// Frames is the block's number of pixel frames (0: latents only).
	Frames int `json:"frames,omitempty"`
	// LatentRMS is the root mean square of the block's latents;
	// LatentRMSRatio the same over the first block's.
	LatentRMS      float64  `json:"latent_rms"`
	LatentRMSRatio *float64 `json:"latent_rms_ratio,omitempty"`
	// FirstDiff is the mean absolute difference (levels 0–255) of the
	// block's mean thumbnail from the first block's.
	FirstDiff *float64 `json:"first_diff,omitempty"`
	// HistDist is the colour-histogram distance from the first block: the
	// total variation ½Σ|p−q| of the normalised Bins-bin histograms,
	// averaged over R, G, B (0: the same colours, 1: none in common).
	HistDist *float64 `json:"hist_dist,omitempty"`
	// IntraChange is the mean absolute difference (levels) between
	// consecutive thumbnails inside the block, averaged over the pairs.
	IntraChange *float64 `json:"intra_change,omitempty"`
	// SeamChange is the mean absolute difference (levels) between the
	// previous block's last thumbnail and this block's first.
	SeamChange *float64 `json:"seam_change,omitempty"`
	// SeamFlicker is SeamChange / max(IntraChange, FlickerFloor): about 1
	// for a seam that moves like the frames around it, large for a jump.
	SeamFlicker *float64 `json:"seam_flicker,omitempty"`
}

// Names lists the statistics in their order in a record.
var Names = []string{"latent_rms", "latent_rms_ratio", "first_diff", "hist_dist", "intra_change", "seam_change", "seam_flicker"}

// Stat returns the statistic called name and whether the record has it.
func (r Record) Stat(name string) (float64, bool) {
	var p *float64
	switch name {
	case "latent_rms":
		return r.LatentRMS, true
	case "latent_rms_ratio":
		p = r.LatentRMSRatio
	case "first_diff":
		p = r.FirstDiff
	case "hist_dist":
		p = r.HistDist
	case "intra_change":
		p = r.IntraChange
	case "seam_change":
		p = r.SeamChange
	case "seam_flicker":
		p = r.SeamFlicker
	}
	if p == nil {
		return 0, false
	}
	return *p, true
}

func knownStat(name string) bool {
	for _, n := range Names {
		if n == name {
			return true
		}
	}
	return false
}

// Next computes block b's record from its latents and, with a VAE, its
// pixel frames ([t][h][w][3] bytes, ffmpeg's rgb24; nil without frames),
// and moves the state past the block. Blocks come in order. An error
// leaves the state unchanged.
func (s *State) Next(b int, latents []float32, frames []byte, t, h, w int) (Record, error) {
	if b != s.Blocks {
		return Record{}, fmt.Errorf("drift: block %d after %d blocks, want block %d", b, s.Blocks, s.Blocks)
	}
	if len(latents) == 0 {
		return Record{}, fmt.Errorf("drift: block %d has no latents", b)
	}
	var sum float64
	for i, v := range latents {
		x := float64(v)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Record{}, fmt.Errorf("drift: block %d: latent %d is %v", b, i, v)
		}
		sum += x * x
	}
	rec := Record{Block: b, LatentRMS: math.Sqrt(sum / float64(len(latents)))}
	next := *s
	next.Blocks = b + 1
	if b == 0 {
		next.FirstLatentRMS = rec.LatentRMS
	}
	if next.FirstLatentRMS > 0 {
		rec.LatentRMSRatio = ptr(rec.LatentRMS / next.FirstLatentRMS)
	}
	pixels := frames != nil
	if b > 0 && pixels != s.Pixels {
		return Record{}, fmt.Errorf("drift: block %d %s frames and the first block %s", b, has(pixels), has(s.Pixels))
	}
	if pixels {
		if t <= 0 || h <= 0 || w <= 0 || int64(t)*int64(h)*int64(w)*3 != int64(len(frames)) {
			return Record{}, fmt.Errorf("drift: block %d: %d bytes of frames for %d×%d×%d×3", b, len(frames), t, h, w)
		}
		if b > 0 && (h != s.H || w != s.W) {
			return Record{}, fmt.Errorf("drift: block %d: frames of %d×%d, the first block's %d×%d", b, h, w, s.H, s.W)
		}
		if err := next.pixels(&rec, frames, t, h, w); err != nil {
			return Record{}, err
		}
	}
	*s = next
	return rec, nil
}

func has(b bool) string {
	if b {
		return "has"
	}
	return "has no"
}

func ptr(v float64) *float64 { return &v }

// pixels fills rec's pixel statistics and moves s (a copy) past the block.
func (s *State) pixels(rec *Record, frames []byte, t, h, w int) error {
	rec.Frames = t
	hist := Histogram(frames)
	sc := (max(h, w) + Thumb - 1) / Thumb
	th, tw := (h+sc-1)/sc, (w+sc-1)/sc
	n := th * tw * 3
	thumbs := make([]byte, t*n)
	for i := 0; i < t; i++ {
		thumbnail(thumbs[i*n:(i+1)*n], frames[i*h*w*3:(i+1)*h*w*3], h, w, sc)
	}
	mean := meanThumb(thumbs, t, n)
	if rec.Block == 0 {
		s.Pixels, s.H, s.W, s.TH, s.TW = true, h, w, th, tw
		s.FirstHist, s.FirstMean = hist, mean
	} else if len(s.FirstMean) != n || len(s.Last) != n || len(s.FirstHist) != 3*Bins {
		return errors.New("drift: the state's thumbnails do not match its frame size (a damaged checkpoint)")
	}
	rec.FirstDiff = ptr(MeanAbsDiff(mean, s.FirstMean))
	rec.HistDist = ptr(HistDistance(hist, s.FirstHist))
	if t > 1 {
		var c float64
		for i := 1; i < t; i++ {
			c += MeanAbsDiff(thumbs[(i-1)*n:i*n], thumbs[i*n:(i+1)*n])
		}
		rec.IntraChange = ptr(c / float64(t-1))
	}
	if rec.Block > 0 {
		seam := MeanAbsDiff(s.Last, thumbs[:n])
		rec.SeamChange = ptr(seam)
		intra := 0.0
		if rec.IntraChange != nil {
			intra = *rec.IntraChange
		}
		rec.SeamFlicker = ptr(seam / max(intra, FlickerFloor))
	}
	s.Last = append([]byte(nil), thumbs[(t-1)*n:]...)
	return nil
}

// Histogram returns the [3][Bins] colour histogram of rgb24 bytes.
func Histogram(rgb []byte) []int64 {
	h := make([]int64, 3*Bins)
	for i := 0; i+2 < len(rgb); i += 3 {
		for c := 0; c < 3; c++ {
			h[c*Bins+int(rgb[i+c])*Bins/256]++
		}
	}
	return h
}

// HistDistance is the total variation ½Σ|p−q| between the normalised
// histograms a and b ([3][Bins] counts), averaged over the channels.
func HistDistance(a, b []int64) float64 {
	var d float64
	for c := 0; c < 3; c++ {
		var na, nb int64
		for i := 0; i < Bins; i++ {
			na += a[c*Bins+i]
			nb += b[c*Bins+i]
		}
		if na == 0 || nb == 0 {
			continue
		}
		var tv float64
		for i := 0; i < Bins; i++ {
			tv += math.Abs(float64(a[c*Bins+i])/float64(na) - float64(b[c*Bins+i])/float64(nb))
		}
		d += tv / 2
	}
	return d / 3
}

// MeanAbsDiff is the mean absolute difference of two equal-length byte
// slices, in levels.
func MeanAbsDiff(a, b []byte) float64 {
	var s int64
	for i := range a {
		d := int64(a[i]) - int64(b[i])
		if d < 0 {
			d = -d
		}
		s += d
	}
	return float64(s) / float64(len(a))
}

// thumbnail averages the frame src [h][w][3] over sc×sc cells (the last
// row and column of cells over the pixels they have) into dst, rounding.
func thumbnail(dst, src []byte, h, w, sc int) {
	tw := (w + sc - 1) / sc
	for ty := 0; ty*sc < h; ty++ {
		for tx := 0; tx*sc < w; tx++ {
			var sum [3]int
			n := 0
			for y := ty * sc; y < min(h, (ty+1)*sc); y++ {
				for x := tx * sc; x < min(w, (tx+1)*sc); x++ {
					p := src[(y*w+x)*3:]
					sum[0], sum[1], sum[2] = sum[0]+int(p[0]), sum[1]+int(p[1]), sum[2]+int(p[2])
					n++
				}
			}
			for c := 0; c < 3; c++ {
				dst[(ty*tw+tx)*3+c] = byte((sum[c] + n/2) / n)
			}
		}
	}
}

// meanThumb averages t thumbnails of n bytes, rounding.
func meanThumb(thumbs []byte, t, n int) []byte {
	out := make([]byte, n)
	for i := 0; i < n; i++ {
		s := 0
		for f := 0; f < t; f++ {
			s += int(thumbs[f*n+i])
		}
		out[i] = byte((s + t/2) / t)
	}
	return out
}
