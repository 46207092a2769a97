package config

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// Size limits of a run, checked by Resolve before anything is allocated:
// every size-like value (a flag, a YAML key) and every product of them that
// a run allocates is computed in int64 with overflow checks and compared
// with these, so that an absurd value (--seconds 1e12, --heads 1e9) is a
// configuration error naming the value and the limit, never a panic in
// make or an out-of-memory kill.
const (
	// MaxFrames is the most latent frames a run may have (≈ 72.8 hours of
	// video at 4 latent frames/s).
	MaxFrames = 1 << 20
	// MaxTokens bounds frames × tokens per frame: the run's per-token
	// admission counts (admissions.json) hold one int32 each.
	MaxTokens = 1 << 28
	// MaxDim bounds every single layout value (height, width, frames per
	// block, layers, heads, head dimension), the capacity and the worker
	// count, so that their products cannot overflow.
	MaxDim = 1 << 24
	// MaxBlockBytes bounds one block's float32 q, k and v of every layer
	// (tokens per block × layers × heads × head dim × 3 × 4 bytes): what
	// the stream and the policies hold for a block at once.
	MaxBlockBytes = 1 << 36
	// MaxWorkers bounds memory.bank.workers (goroutines per bank update).
	MaxWorkers = 4096
	// maxErrors is the most validation errors one message lists (a YAML
	// file of 500,000 bad entries gives a short error).
	maxErrors = 10
)

// mul64 returns the product of vs and whether it stayed within int64 (all
// of vs non-negative).
func mul64(vs ...int64) (int64, bool) {
	p := uint64(1)
	for _, v := range vs {
		if v < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(p, uint64(v))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		p = lo
	}
	return int64(p), true
}

// streamFrames returns the latent frames of seconds at fps, rounded up to
// whole blocks of fpb frames, computed in float64 and refused above
// MaxFrames (so that no int conversion overflows).
func streamFrames(seconds, fps float64, fpb int) (int64, error) {
	if !(seconds > 0) || !(fps > 0) || math.IsInf(seconds, 0) || math.IsInf(fps, 0) || fpb <= 0 {
		return 0, nil // reported by the field checks
	}
	f := math.Ceil(seconds*fps - 1e-9)
	if !(f <= MaxFrames) {
		return 0, fmt.Errorf("%s %g at %s %g is %.4g latent frames, more than the %d a run may have (%.1f hours at %g frames/s); shorten the run",
			Named("stream.seconds"), seconds, Named("stream.fps"), fps, f, MaxFrames, MaxFrames/fps/3600, fps)
	}
	frames := int64(f)
	blocks := (frames + int64(fpb) - 1) / int64(fpb)
	return blocks * int64(fpb), nil
}

// checkLimits checks c's layout and length against the size limits; frames
// is the run's latent frame count (0 when not yet known).
func checkLimits(c Config, frames int64) error {
	var errs errList
	l := c.Memory.Layout
	for _, f := range []struct {
		path string
		v    int
		max  int
	}{
		{"memory.layout.height", l.Height, MaxDim}, {"memory.layout.width", l.Width, MaxDim},
		{"memory.layout.frames_per_block", l.FramesPerBlock, MaxDim}, {"memory.layout.layers", l.Layers, MaxDim},
		{"memory.layout.heads", l.Heads, MaxDim}, {"memory.layout.head_dim", l.HeadDim, MaxDim},
		{"memory.sink_frames", c.Memory.SinkFrames, MaxFrames}, {"memory.cache_frames", c.Memory.CacheFrames, MaxFrames},
		{"memory.window_frames", c.Memory.WindowFrames, MaxFrames}, {"memory.capacity", c.Memory.Capacity, MaxTokens},
		{"memory.bank.workers", c.Memory.Bank.Workers, MaxWorkers},
		{"memory.deep_forcing.recent_frames", c.Memory.DeepForcing.RecentFrames, MaxFrames},
		{"memory.deep_forcing.max_reuse", c.Memory.DeepForcing.MaxReuse, MaxDim},
		{"memory.longlive_rag.top_k", c.Memory.LongLiveRAG.TopK, MaxFrames},
		{"memory.longlive_rag.exclude_recent", c.Memory.LongLiveRAG.ExcludeRecent, MaxFrames},
		{"memory.longlive_rag.latent_channels", c.Memory.LongLiveRAG.LatentChannels, MaxDim},
		{"memory.longlive_rag.descriptor_storage_dim", c.Memory.LongLiveRAG.DescriptorStorageDim, MaxDim},
		{"stream.first_layer", c.Stream.FirstLayer, MaxDim},
		{"run.snapshot_every", c.Run.SnapshotEvery, MaxFrames},
	} {
		if f.v > f.max {
			errs.add(fmt.Errorf("%s is %d, want at most %d", Named(f.path), f.v, f.max))
		}
	}
	if len(errs) > 0 {
		return errs.err()
	}
	if l.Height <= 0 || l.Width <= 0 || l.FramesPerBlock <= 0 || l.Layers <= 0 || l.Heads <= 0 || l.HeadDim <= 0 {
		return nil // memory's validation names the value
	}
	layout := "memory.layout (--height, --width, --frames-per-block, --layers, --heads, --head-dim)"
	P := int64(l.Height) * int64(l.Width) // both ≤ 2^24: no overflow
	if frames > 0 {
		if n, ok := mul64(frames, P); !ok || n > MaxTokens {
			errs.add(fmt.Errorf("%d latent frames of %d×%d tokens are %s tokens, more than the %d a run may count (%s, stream.seconds (--seconds)); shorten the run or use a smaller layout",
				frames, l.Height, l.Width, sizeStr(n, ok), MaxTokens, layout))
		}
		if n, ok := mul64(frames, int64(l.Layers)); !ok || n > MaxTokens {
			errs.add(fmt.Errorf("%d latent frames × %d layers is %s, more than %d (memory.layout.layers (--layers), stream.seconds (--seconds))", frames, l.Layers, sizeStr(n, ok), MaxTokens))
		}
	}
	if n, ok := mul64(int64(l.FramesPerBlock), P, int64(l.Layers), int64(l.Heads), int64(l.HeadDim), 3*4); !ok || n > MaxBlockBytes {
		errs.add(fmt.Errorf("one block's q, k and v are %s bytes (%d frames × %d×%d tokens × %d layers × %d heads × %d dims × 3 × 4 bytes), more than the %d GiB a run may hold (%s)",
			sizeStr(n, ok), l.FramesPerBlock, l.Height, l.Width, l.Layers, l.Heads, l.HeadDim, MaxBlockBytes>>30, layout))
	}
	return errs.err()
}

func sizeStr(n int64, ok bool) string {
	if !ok {
		return "more than 9.2e18"
	}
	return fmt.Sprint(n)
}

// errList collects validation errors and joins at most maxErrors of them,
// counting the rest.
type errList []error

func (e *errList) add(err error) { *e = append(*e, err) }

func (e errList) err() error {
	if len(e) == 0 {
		return nil
	}
	if len(e) == 1 {
		return e[0]
	}
	n := min(len(e), maxErrors)
	msgs := make([]string, n)
	for i := range n {
		msgs[i] = e[i].Error()
	}
	s := strings.Join(msgs, "\n")
	if len(e) > n {
		s += fmt.Sprintf("\n(%d more errors)", len(e)-n)
	}
	return &listError{msg: s, errs: e[:n]}
}

// listError is errList's joined error; it unwraps to the errors it lists.
type listError struct {
	msg  string
	errs []error
}

func (e *listError) Error() string   { return e.msg }
func (e *listError) Unwrap() []error { return e.errs }

// checkTau rejects a τ that memory would call "not positive" with τ's own
// rule (DensityKV's density-growth threshold is > 1; 0 selects the
// default). 0 < τ ≤ 1 is left to the bank's check, which applies only when
// DensityKV runs.
func checkTau(tau float64) error {
	if tau < 0 || math.IsNaN(tau) || math.IsInf(tau, 0) {
		return fmt.Errorf("%s is %v, want a finite number > 1 (DensityKV's density-growth threshold τ)", Named("memory.bank.tau"), tau)
	}
	return nil
}

// checkGenerateSizes bounds a generate run's length and latent size before
// anything derives from them, and checks that every prompt switch falls
// inside the run.
func checkGenerateSizes(G *GenerateSection) error {
	if G.FramesPerBlock > MaxDim {
		return fmt.Errorf("--frames-per-block (generate.frames_per_block) is %d, want at most %d", G.FramesPerBlock, MaxDim)
	}
	if frames := int64(G.Blocks) * int64(G.BlockFrames()); frames > MaxFrames {
		return fmt.Errorf("--blocks (generate.blocks) %d × %d frames per block is %d latent frames, more than the %d a run may have", G.Blocks, G.BlockFrames(), frames, MaxFrames)
	}
	if G.LatentHeight > MaxDim || G.LatentWidth > MaxDim {
		return fmt.Errorf("--latent-height/--latent-width %d×%d, want each at most %d", G.LatentHeight, G.LatentWidth, MaxDim)
	}
	for _, ts := range G.Texts {
		if ts.FromBlock >= G.Blocks {
			return fmt.Errorf("--text %s@%d (generate.texts): the prompt would start at block %d, but the run has blocks 0..%d; drop it or lengthen the run",
				ts.Path, ts.FromBlock, ts.FromBlock, G.Blocks-1)
		}
	}
	return nil
}

// GenerateBlocks returns the blocks of a generate run of seconds at 4
// latent frames/s in blocks of fpb frames (rounded up), or an error when
// seconds is not a finite positive number or gives more than MaxFrames.
func GenerateBlocks(seconds float64, fpb int) (int, error) {
	if !(seconds > 0) || math.IsInf(seconds, 0) {
		return 0, fmt.Errorf("--seconds (stream.seconds) is %v, want > 0", seconds)
	}
	if fpb <= 0 {
		return 0, fmt.Errorf("--frames-per-block (generate.frames_per_block) is %d, want >= 1", fpb)
	}
	if f := seconds * 4; !(f <= MaxFrames) {
		return 0, fmt.Errorf("--seconds (stream.seconds) %g is %.4g latent frames at 4 frames/s, more than the %d a run may have", seconds, f, MaxFrames)
	}
	return int(math.Ceil(seconds*4/float64(fpb) - 1e-9)), nil
}
