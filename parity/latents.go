package parity

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/rollout"
)

// latentSource reads a side's latents frame by frame.
type latentSource interface {
	shape() [3]int // C, H, W
	frames() int
	// read returns frames [lo, hi) ([hi−lo][C][H][W]).
	read(lo, hi int) ([]float32, error)
}

// runLatents are a run folder's shards (one per block).
type runLatents struct {
	dir    string
	man    rollout.Manifest
	cached int // block of vals (−1: none)
	vals   []float32
}

func (r *runLatents) shape() [3]int { return [3]int{r.man.Channels, r.man.Height, r.man.Width} }
func (r *runLatents) frames() int   { return len(r.man.Shards) * r.man.FramesPerBlock }

func (r *runLatents) read(lo, hi int) ([]float32, error) {
	F, fs := r.man.FramesPerBlock, r.man.Channels*r.man.Height*r.man.Width
	out := make([]float32, 0, (hi-lo)*fs)
	for f := lo; f < hi; {
		b := f / F
		if r.cached != b {
			v, err := rollout.ReadBlock(r.dir, r.man, b)
			if err != nil {
				return nil, err
			}
			r.vals, r.cached = v, b
		}
		end := min(hi, (b+1)*F)
		out = append(out, r.vals[(f-b*F)*fs:(end-b*F)*fs]...)
		f = end
	}
	return out, nil
}

// authorsShard is one file of the authors' LatentShardWriter.
type authorsShard struct {
	path       string
	start, end int // frames [start, end)
}

// authorsLatents are the authors' latents: shards read one at a time, or
// one file held whole (shards nil).
type authorsLatents struct {
	shards []authorsShard
	shp    [3]int
	n      int
	cached int // shard of vals (−1: none)
	vals   []float32
}

func (a *authorsLatents) shape() [3]int { return a.shp }
func (a *authorsLatents) frames() int   { return a.n }

// latentTensor returns the [1, F, C, H, W] or [F, C, H, W] tensor of a
// torch.save'd dictionary's "latents" entry as [F][C][H][W] values.
func latentTensor(path string) (vals []float32, shape []int, top map[string]any, err error) {
	tree, err := checkpoint.TorchTreeFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	top, _ = tree.(map[string]any)
	t, ok := top["latents"].(*checkpoint.TorchTensor)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%s: no tensor \"latents\" at the top level (a torch.save of {\"latents\": latents})", path)
	}
	sh := t.Shape
	if len(sh) == 5 {
		if sh[0] != 1 {
			return nil, nil, nil, fmt.Errorf("%s: latents of shape %v hold a batch of %d; save one sample ([1, F, C, H, W])", path, t.Shape, sh[0])
		}
		sh = sh[1:]
	}
	if len(sh) != 4 || !t.DType.IsFloat() {
		return nil, nil, nil, fmt.Errorf("%s: latents of shape %v and dtype %s, want [1, F, C, H, W] or [F, C, H, W] floating point", path, t.Shape, t.DType)
	}
	f64 := t.Float64()
	vals = make([]float32, len(f64))
	for i, v := range f64 {
		vals[i] = float32(v)
	}
	return vals, sh, top, nil
}

// readAuthorsLatents reads one latents file whole.
func readAuthorsLatents(path string) (*authorsLatents, error) {
	v, sh, _, err := latentTensor(path)
	if err != nil {
		return nil, err
	}
	return &authorsLatents{shp: [3]int{sh[1], sh[2], sh[3]}, n: sh[0], vals: v, cached: -1}, nil
}

// openAuthorsShards lists the shards of dir (their start and end frames
// from the files, which must follow each other from frame 0) and reads the
// first for the frame shape.
func openAuthorsShards(dir string) (*authorsLatents, error) {
	fs, _ := filepath.Glob(filepath.Join(dir, "latent_*.pt"))
	a := &authorsLatents{cached: -1}
	for _, f := range fs {
		var s, e int
		if _, err := fmt.Sscanf(filepath.Base(f), "latent_%06d_%06d.pt", &s, &e); err != nil {
			return nil, fmt.Errorf("%s: not a latent shard's name (latent_START_END.pt)", f)
		}
		a.shards = append(a.shards, authorsShard{path: f, start: s, end: e + 1})
	}
	sort.Slice(a.shards, func(i, j int) bool { return a.shards[i].start < a.shards[j].start })
	next := 0
	for _, s := range a.shards {
		if s.start != next || s.end <= s.start {
			return nil, fmt.Errorf("%s: frames [%d, %d), the shards before it end at frame %d", s.path, s.start, s.end, next)
		}
		next = s.end
	}
	a.n = next
	if err := a.load(0); err != nil {
		return nil, err
	}
	return a, nil
}

// load reads shard i into vals, checking it against its name and the
// first shard's frame shape.
func (a *authorsLatents) load(i int) error {
	s := a.shards[i]
	v, sh, top, err := latentTensor(s.path)
	if err != nil {
		return err
	}
	if st, ok := top["start_frame"].(int64); ok && int(st) != s.start {
		return fmt.Errorf("%s: start_frame %d, its name says %d", s.path, st, s.start)
	}
	if sh[0] != s.end-s.start {
		return fmt.Errorf("%s: %d frames, its name says %d", s.path, sh[0], s.end-s.start)
	}
	shp := [3]int{sh[1], sh[2], sh[3]}
	if i == 0 {
		a.shp = shp
	} else if shp != a.shp {
		return fmt.Errorf("%s: frames of %v, the first shard's are %v", s.path, shp, a.shp)
	}
	a.vals, a.cached = v, i
	return nil
}

func (a *authorsLatents) read(lo, hi int) ([]float32, error) {
	fs := a.shp[0] * a.shp[1] * a.shp[2]
	if a.shards == nil {
		return a.vals[lo*fs : hi*fs], nil
	}
	out := make([]float32, 0, (hi-lo)*fs)
	for f := lo; f < hi; {
		i := sort.Search(len(a.shards), func(i int) bool { return a.shards[i].end > f })
		if a.cached != i {
			if err := a.load(i); err != nil {
				return nil, err
			}
		}
		s := a.shards[i]
		end := min(hi, s.end)
		out = append(out, a.vals[(f-s.start)*fs:(end-s.start)*fs]...)
		f = end
	}
	return out, nil
}
