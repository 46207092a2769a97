package memory

import (
	"fmt"
	"math"
	"sort"

	"github.com/densitykv/densitykv/storage"
)

// Describer computes LongLive-RAG's retrieval descriptor of one latent frame
// from its clean latent [C][H'][W'] (nil when the caller gives none) and
// its clean raw keys per layer ([layer] → [TokensPerFrame][H][D]).
type Describer interface {
	// Dim is the descriptor length.
	Dim() int
	// NeedsLatent reports whether Describe needs the latent (clean passes
	// without Call.Latent are then rejected at Begin).
	NeedsLatent() bool
	// Describe returns the descriptor of frame (a fresh slice of length Dim).
	Describe(frame int, latent []float32, keys [][]float32) ([]float32, error)
}

// LatentMean is the built-in descriptor: the spatial mean of the frame's
// latent per channel, L2-normalised (a zero mean stays zero).
type LatentMean struct{ Channels int }

// Dim returns the channel count.
func (d LatentMean) Dim() int { return d.Channels }

// NeedsLatent returns true.
func (LatentMean) NeedsLatent() bool { return true }

// Describe averages each channel of latent [C][H'][W'] and normalises.
func (d LatentMean) Describe(frame int, latent []float32, _ [][]float32) ([]float32, error) {
	if d.Channels <= 0 || len(latent) == 0 || len(latent)%d.Channels != 0 {
		return nil, fmt.Errorf("memory: longlive-rag: frame %d latent has %d values, not a positive multiple of %d channels", frame, len(latent), d.Channels)
	}
	hw := len(latent) / d.Channels
	out := make([]float32, d.Channels)
	for c := range out {
		var s float64
		for _, v := range latent[c*hw : (c+1)*hw] {
			s += float64(v)
		}
		out[c] = float32(s / float64(hw))
	}
	normalise(out)
	return out, nil
}

// KeyMean describes a frame by the mean of its layer-0 raw keys over tokens
// ([H·D] values), L2-normalised; it needs no latent (synthetic streams).
type KeyMean struct{ Heads, HeadDim int }

// Dim returns H·D.
func (d KeyMean) Dim() int { return d.Heads * d.HeadDim }

// NeedsLatent returns false.
func (KeyMean) NeedsLatent() bool { return false }

// Describe averages the layer-0 keys over the frame's tokens.
func (d KeyMean) Describe(frame int, _ []float32, keys [][]float32) ([]float32, error) {
	row := d.Heads * d.HeadDim
	if len(keys) == 0 || row == 0 || len(keys[0]) == 0 || len(keys[0])%row != 0 {
		return nil, fmt.Errorf("memory: longlive-rag: frame %d has no layer-0 keys of %d values per token", frame, row)
	}
	acc := make([]float64, row)
	n := len(keys[0]) / row
	for t := 0; t < n; t++ {
		for i, v := range keys[0][t*row : (t+1)*row] {
			acc[i] += float64(v)
		}
	}
	out := make([]float32, row)
	for i, v := range acc {
		out[i] = float32(v / float64(n))
	}
	normalise(out)
	return out, nil
}

func normalise(x []float32) {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	if s == 0 {
		return
	}
	inv := 1 / math.Sqrt(s)
	for i, v := range x {
		x[i] = float32(float64(v) * inv)
	}
}

// LongLiveRAG keeps every evicted frame in an unbounded pool with one
// descriptor per committed frame; at the first call of every block it
// retrieves the TopK pool frames most cosine-similar to the last generated
// frame's descriptor, excluding the ExcludeRecent most recent evictions, and
// attends [sink | retrieved frames (t = 0, chronological order) | window].
// Similarity ties go to the more recent frame.
//
// The pool (LongLiveRAGConfig.Pool) is, by default, the authors' (their
// causal_model_latentmem.py and pipeline/causal_inference.py): the frames
// evicted from the physical cache of CacheFrames frames (sink included),
// which evicts at the first call of a block b the non-sink frames below
// (b+1)·F − (CacheFrames − SinkFrames); retrieval for block b, before that
// eviction, sees the non-sink frames below b·F − (CacheFrames −
// SinkFrames) (frames 1 … 3b−12 for the paper's 12-frame cache, sink 1
// and 3-frame blocks, so frames ≤ 3b−17 after excluding the 5 most
// recent). Frames between the window and the pool are held (the physical
// cache) but neither attended nor retrievable. With pool window, frames
// join the pool as they leave the local window (≤ 3b−8 retrievable).
//
// Bytes counts every committed frame's K/V and its descriptor as actually
// kept (see DescriptorDim).
type LongLiveRAG struct {
	windowed
	s *ragSelector
}

type ragSelector struct {
	c       *core
	cfg     LongLiveRAGConfig
	desc    Describer
	descs   map[int][]float32 // descriptor of every committed frame
	pool    []*frame          // evicted frames, keys rotated at t = 0 (in memory)
	arch    *archive          // or the pool in a file (UseArchive)
	picked  []int             // pool indices retrieved for the current block
	lastSim []float64
}

func newLongLiveRAG(cfg Config) (Policy, error) {
	c, err := newCore(NameLongLiveRAG, cfg)
	if err != nil {
		return nil, err
	}
	c.compactFrames = true
	s := &ragSelector{c: c, cfg: cfg.LongLiveRAG, descs: map[int][]float32{}}
	switch cfg.LongLiveRAG.Descriptor {
	case RAGKeyMean:
		s.desc = KeyMean{Heads: cfg.Layout.Heads, HeadDim: cfg.Layout.HeadDim}
	case RAGAE:
		s.desc = noAE{}
	default:
		s.desc = LatentMean{Channels: cfg.LongLiveRAG.LatentChannels}
	}
	p := &LongLiveRAG{windowed{core: c, sel: s}, s}
	p.describe = s.describeFrames
	return p, nil
}

// noAE stands for the autoencoder descriptor (RAGAE) until SetDescriber
// sets it; Begin refuses to run without it.
type noAE struct{}

func (noAE) Dim() int          { return 0 }
func (noAE) NeedsLatent() bool { return true }
func (noAE) Describe(frame int, _ []float32, _ [][]float32) ([]float32, error) {
	return nil, fmt.Errorf("memory: longlive-rag: frame %d: descriptor ae has no autoencoder (SetDescriber)", frame)
}

// SetDescriber replaces the frame descriptor (before the first call). With
// descriptor ae (RAGAE) it must be called: it sets the autoencoder.
func (p *LongLiveRAG) SetDescriber(d Describer) error {
	if p.started > 0 {
		return fmt.Errorf("memory: longlive-rag: descriptor changed after block %d began", p.started-1)
	}
	if d == nil || d.Dim() <= 0 {
		return fmt.Errorf("memory: longlive-rag: descriptor must be non-nil with a positive dimension")
	}
	p.s.desc = d
	return nil
}

// Retrieved returns the frame ids retrieved for the current block, in
// context order.
func (p *LongLiveRAG) Retrieved() []int {
	out := make([]int, len(p.s.picked))
	for i, j := range p.s.picked {
		out[i] = p.s.poolID(j)
	}
	return out
}

// PoolFrames returns the number of frames in the retrieval pool (the
// authors' num_evicted): after a block's first call, the pool that
// block retrieved from, its ExcludeRecent newest frames included.
func (p *LongLiveRAG) PoolFrames() int { return p.s.poolLen() }

// Begin checks that clean passes carry the latent the descriptor needs.
func (p *LongLiveRAG) Begin(c Call) error {
	if _, ok := p.s.desc.(noAE); ok {
		return fmt.Errorf("memory: longlive-rag: block %d: descriptor ae needs the autoencoder (load ae_latent_mem.pt with package ragae and SetDescriber before the first call)", c.Block)
	}
	if c.Clean && p.s.desc.NeedsLatent() {
		F := p.lay.FramesPerBlock
		if c.Latent == nil {
			return fmt.Errorf("memory: longlive-rag: clean pass of block %d has no latent (the %T descriptor needs Call.Latent; use descriptor key-mean for streams without latents)", c.Block, p.s.desc)
		}
		if len(c.Latent)%(F*p.cfg.LongLiveRAG.LatentChannels) != 0 {
			return fmt.Errorf("memory: longlive-rag: block %d latent has %d values, not a multiple of %d frames × %d channels", c.Block, len(c.Latent), F, p.cfg.LongLiveRAG.LatentChannels)
		}
	}
	return p.windowed.Begin(c)
}

// describeFrames computes the descriptors of a committed block.
func (s *ragSelector) describeFrames(fr []*frame, latent []float32) error {
	per := 0
	if latent != nil {
		per = len(latent) / len(fr)
	}
	out := make([][]float32, len(fr))
	for i, f := range fr {
		var lat []float32
		if latent != nil {
			lat = latent[i*per : (i+1)*per]
		}
		keys := make([][]float32, len(f.K))
		for l := range keys {
			keys[l] = f.keys(l)
		}
		d, err := s.desc.Describe(f.ID, lat, keys)
		if err != nil {
			return err
		}
		if len(d) != s.desc.Dim() {
			return fmt.Errorf("memory: longlive-rag: frame %d descriptor has %d values, want %d", f.ID, len(d), s.desc.Dim())
		}
		out[i] = d
	}
	for i, f := range fr {
		s.descs[f.ID] = out[i]
	}
	return nil
}

// offerBefore returns the first frame that is not offered to the pool at
// block's first call: with the physical pool, frames join once the
// physical cache evicts them, at the first call of the block before
// (b·F − (CacheFrames − SinkFrames)); with the window pool, as they leave
// the window (b·F + F − WindowFrames, windowed's rule).
func (s *ragSelector) offerBefore(block int) int {
	c, F := s.c.cfg, s.c.lay.FramesPerBlock
	if s.cfg.Pool == RAGPoolWindow {
		return block*F + F - c.WindowFrames
	}
	return block*F - (c.CacheFrames - c.SinkFrames)
}

// poolLen returns the number of pool frames.
func (s *ragSelector) poolLen() int {
	if s.arch != nil {
		return s.arch.len()
	}
	return len(s.pool)
}

// poolID returns pool frame i's id.
func (s *ragSelector) poolID(i int) int {
	if s.arch != nil {
		return s.arch.ids[i]
	}
	return s.pool[i].ID
}

func (s *ragSelector) offer(block int, frames []*frame, st *Stats) error {
	c := s.c
	if s.arch != nil {
		kbuf := make([]float32, c.tpf*c.row)
		err := s.arch.add(frames, func(f *frame, l int) []float32 { return c.memKeysInto(kbuf, f, l) }, (*frame).values)
		if err != nil {
			return fmt.Errorf("memory: longlive-rag: block %d: %w", block, err)
		}
	} else {
		for _, f := range frames {
			for l := range f.K {
				k := f.K[l].float32s()
				c.rot.Frame(k, c.lay.Heads, 0)
				f.K[l] = f32Tensor(k)
			}
		}
		s.pool = append(s.pool, frames...)
	}
	// Retrieval for this block.
	s.picked = s.picked[:0]
	eligible := s.poolLen() - s.cfg.ExcludeRecent
	last := block*c.lay.FramesPerBlock - 1
	q := s.descs[last]
	if eligible > 0 && q != nil && s.cfg.TopK > 0 {
		idx := make([]int, eligible)
		sim := make([]float64, eligible)
		for i := range idx {
			idx[i] = i
			sim[i] = cosine(q, s.descs[s.poolID(i)])
		}
		sort.SliceStable(idx, func(a, b int) bool {
			if sim[idx[a]] != sim[idx[b]] {
				return sim[idx[a]] > sim[idx[b]]
			}
			return idx[a] > idx[b]
		})
		s.picked = append(s.picked, idx[:min(s.cfg.TopK, eligible)]...)
		sort.Ints(s.picked)
		s.lastSim = sim
	}
	for l := range st.Offered {
		st.Offered[l] = len(frames) * c.tpf
		st.Admitted[l] = len(s.picked) * c.tpf
	}
	return nil
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// memory schedules the retrieved frames of layer l, in context order.
func (s *ragSelector) memory(l int) int {
	for _, j := range s.picked {
		if s.arch != nil {
			s.c.ctxFill(s.c.tpf, s.c.tpf, func(dk, dv []float32, _, _ int) error { return s.arch.read(j, l, dk, dv) })
			continue
		}
		s.c.ctxFrame(s.pool[j].K[l], s.pool[j].V[l], -1)
	}
	return len(s.picked) * s.c.tpf
}

func (s *ragSelector) occupancy(_ int, dst []int) {
	for h := range dst {
		dst[h] = len(s.picked) * s.c.tpf
	}
}

// DescriptorDim returns the descriptor size, in BF16 values per committed
// frame, that Bytes counts: the descriptor the policy keeps (16 for the
// default latent-mean descriptor), or LongLiveRAGConfig.DescriptorStorageDim
// when set. Bytes equals storage.Config.LongLiveRAG(frames) evaluated with
// this DescriptorDim (the paper's storage table uses 1,024-d descriptors).
func (p *LongLiveRAG) DescriptorDim() int { return p.s.descDim() }

func (s *ragSelector) descDim() int {
	if s.cfg.DescriptorStorageDim > 0 {
		return s.cfg.DescriptorStorageDim
	}
	return s.desc.Dim()
}

// bytes counts the pool's K/V and one BF16 descriptor of descDim values
// per committed frame.
func (s *ragSelector) bytes() int64 {
	return s.c.model().KVFrames(int64(s.poolLen())) + storage.Descriptors(int64(len(s.descs)), s.descDim())
}

// UseArchive keeps the pool (every frame that left the window) in the file
// at path (see Archiver).
func (p *LongLiveRAG) UseArchive(path string) error {
	if p.started > 0 || p.s.arch != nil {
		return fmt.Errorf("memory: longlive-rag: archive %s: set it before the first call, once", path)
	}
	a, err := openArchive(path, p.lay.Layers, p.tpf*p.row)
	if err != nil {
		return err
	}
	p.s.arch = a
	return nil
}

// CloseArchive closes the pool's file (Archiver).
func (p *LongLiveRAG) CloseArchive(remove bool) error {
	if p.s.arch == nil {
		return nil
	}
	return p.s.arch.close(remove)
}
