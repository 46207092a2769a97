package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/cputime"
	"github.com/densitykv/densitykv/riesz"
)

// BankOptions is the shape of a steady-state bank benchmark. The zero value
// of a field selects the paper-scale default.
type BankOptions struct {
	Heads      int    // H (default 12)
	Candidates int    // N per update (default 4680)
	Capacity   int    // M (default 9360)
	Dim        int    // d_k = d_v (default 128)
	Repeats    int    // timed updates (default 5)
	Workers    int    // parallel heads (0 = GOMAXPROCS)
	Seed       uint64 // stream seed
	// Float32Kernel turns off the bfloat16 dot-product kernel for the
	// whole run (gemm.SetBF16), to compare against the float32 one; the
	// results are bit-identical either way.
	Float32Kernel bool
	// Config overrides the bank configuration when non-nil (its Heads,
	// Capacity, KeyDim and ValueDim are replaced by the fields above).
	Config *bank.Config
	// NewBank, when set, builds the bank (e.g. gpu.NewBank on a Vulkan
	// device, whose passes run there), and Device names where in the
	// result; nil: bank.New on the CPU. The standalone interaction passes
	// are the CPU's either way.
	NewBank func(bank.Config) (*bank.Bank, error)
	Device  string
	// Context stops the benchmark between its steps when cancelled (nil =
	// never); RunBank then returns an error wrapping ctx.Err().
	Context context.Context
	// Progress, when set, is called after every step (the fill, the
	// warm-up, each timed update and each timed pass: Steps() in all) with
	// the steps done and their total.
	Progress func(done, total int)
}

// BankResult reports a bank benchmark. Times are wall-clock seconds.
// JSON field names are snake_case (update_seconds_median, …) so that a
// command can print the struct directly.
type BankResult struct {
	Heads      int `json:"heads"`
	Candidates int `json:"candidates"`
	Capacity   int `json:"capacity"`
	// Device is where the updates ran: "cpu" or a Vulkan device's label.
	Device  string `json:"device"`
	Dim     int    `json:"dim"`
	Workers int    `json:"workers"`

	UpdateSeconds       []float64 `json:"update_seconds"` // every timed update (full bank, steady state)
	UpdateSecondsMedian float64   `json:"update_seconds_median"`
	// PassSeconds are the timings of one fused interaction pass (the
	// scoring pass: N×M interactions with row statistics) over all heads.
	PassSeconds       []float64 `json:"pass_seconds"`
	PassSecondsMedian float64   `json:"pass_seconds_median"`
	// UpdateCPUSeconds and PassCPUSeconds are the process CPU time (all
	// threads) of each timed update and pass: on a machine shared with
	// other work, CPU time / workers estimates the uncontended wall time.
	UpdateCPUSeconds       []float64 `json:"update_cpu_seconds"`
	UpdateCPUSecondsMedian float64   `json:"update_cpu_seconds_median"`
	PassCPUSecondsMedian   float64   `json:"pass_cpu_seconds_median"`
	// PassGFLOPSPerCore is 2·N·M·d·H / PassCPUSecondsMedian: the pass rate
	// per busy core, independent of contention.
	PassGFLOPSPerCore float64 `json:"pass_gflops_per_core"`
	// PairsPerSecond is N·M·H / PassSecondsMedian.
	PairsPerSecond float64 `json:"pairs_per_second"`
	// PassGFLOPS is the interaction pass's effective rate, counting
	// 2·N·M·d flops per head (the dot products alone).
	PassGFLOPS float64 `json:"pass_gflops"`
	// UpdateGFLOPS is 2·N·M·d·H / UpdateSecondsMedian: one pass-equivalent
	// per update.
	UpdateGFLOPS float64 `json:"update_gflops"`
	// PeakExtraBytes is the largest transient workspace of an update
	// (per-head scratch, tile buffers, packed operands and the interaction
	// cache), beyond the bank's own storage.
	PeakExtraBytes int64        `json:"peak_extra_bytes"`
	BankBytes      int64        `json:"bank_bytes"` // persistent bytes of the full bank (paper accounting)
	Accepted       []int        `json:"accepted"`   // r* of every timed update
	Steps          bank.Timings `json:"step_means"` // mean time per Algorithm 1 step
	SIMD           bool         `json:"simd"`       // AVX-512 epilogues in use
	// BF16 reports whether products of the bank's bfloat16 keys ran on the
	// AVX512_BF16 kernel (gemm.BF16); its results equal the float32
	// kernel's bit for bit.
	BF16 bool `json:"bf16"`
	// PassFloat32SecondsMedian and PassFloat32GFLOPS time the same pass on
	// the float32 kernel (BF16 only; else zero), and BF16Speedup is the
	// ratio of the two pass medians.
	PassFloat32SecondsMedian float64 `json:"pass_float32_seconds_median,omitempty"`
	PassFloat32GFLOPS        float64 `json:"pass_float32_gflops,omitempty"`
	BF16Speedup              float64 `json:"bf16_speedup,omitempty"`
}

// Steps returns the number of progress steps RunBank reports: the fill,
// the warm-up, the timed updates and passes, and with the bfloat16 kernel
// the float32 passes it is compared with.
func (c BankOptions) Steps() int {
	c = c.withDefaults()
	n := 2 + 2*c.Repeats
	if !c.Float32Kernel && gemm.HardwareBF16() {
		n += c.Repeats
	}
	return n
}

func (c BankOptions) withDefaults() BankOptions {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Heads, 12)
	def(&c.Candidates, 4680)
	def(&c.Capacity, 9360)
	def(&c.Dim, 128)
	def(&c.Repeats, 5)
	return c
}

// VideoStream generates the bank benchmark's blocks: video-like per-head
// keys (a static background per spatial position, a few moving objects,
// slow drift, and a scene change every 8 blocks) and random values,
// head-major as bank.Block wants them. It is deterministic for a seed.
type VideoStream struct {
	rng      *rand.Rand
	H, N, D  int
	bg, objs [][]float32 // per head: [N][D] background, [4][D] object codes
	drift    [][]float32
	block    int
}

// NewVideoStream returns a stream of blocks of N candidates for H heads of
// dimension D.
func NewVideoStream(H, N, D int, seed uint64) *VideoStream {
	v := &VideoStream{rng: rand.New(rand.NewPCG(seed, 0x5eed)), H: H, N: N, D: D}
	v.bg = make([][]float32, H)
	v.objs = make([][]float32, H)
	v.drift = make([][]float32, H)
	for h := 0; h < H; h++ {
		v.newScene(h)
		v.drift[h] = make([]float32, D)
	}
	return v
}

func (v *VideoStream) newScene(h int) {
	v.bg[h] = make([]float32, v.N*v.D)
	// Smooth background: a few spatial modes.
	modes := make([]float32, 6*v.D)
	for i := range modes {
		modes[i] = float32(v.rng.NormFloat64() * 1.5)
	}
	for x := 0; x < v.N; x++ {
		u := float64(x) / float64(v.N)
		for i := 0; i < v.D; i++ {
			var s float32
			for k := 0; k < 6; k++ {
				s += modes[k*v.D+i] * float32(math.Cos(math.Pi*float64(k+1)*u*3))
			}
			v.bg[h][x*v.D+i] = s + float32(v.rng.NormFloat64()*0.3)
		}
	}
	v.objs[h] = make([]float32, 4*v.D)
	for i := range v.objs[h] {
		v.objs[h][i] = float32(v.rng.NormFloat64() * 2)
	}
}

// Next returns the next block (head-major keys and values, no sources).
func (v *VideoStream) Next() bank.Block {
	H, N, D := v.H, v.N, v.D
	blk := bank.Block{Keys: make([]float32, H*N*D), Values: make([]float32, H*N*D)}
	for h := 0; h < H; h++ {
		if v.block > 0 && v.block%8 == 0 {
			v.newScene(h)
		}
		for i := range v.drift[h] {
			v.drift[h][i] += float32(v.rng.NormFloat64() * 0.05)
		}
		keys := blk.Keys[h*N*D : (h+1)*N*D]
		for x := 0; x < N; x++ {
			k := keys[x*D : (x+1)*D]
			copy(k, v.bg[h][x*D:(x+1)*D])
			// Moving objects cover a window that shifts every block.
			obj := -1
			for o := 0; o < 4; o++ {
				c := (o*N/4 + v.block*N/40) % N
				if x >= c && x < c+N/20 {
					obj = o
				}
			}
			for i := range k {
				k[i] += v.drift[h][i] + float32(v.rng.NormFloat64()*0.2)
				if obj >= 0 {
					k[i] = 0.3*k[i] + v.objs[h][obj*D+i]
				}
			}
		}
		vals := blk.Values[h*N*D : (h+1)*N*D]
		for i := range vals {
			vals[i] = float32(v.rng.NormFloat64())
		}
	}
	v.block++
	return blk
}

// RunBank measures steady-state updates of a full bank on a video-like
// stream: it fills the bank (capacity states), runs one untimed update of
// Candidates (the first with a full bank allocates the per-update
// workspaces and the interaction caches), then times Repeats updates of
// Candidates each, and Repeats standalone interaction passes.
func RunBank(bc BankOptions) (BankResult, error) {
	bc = bc.withDefaults()
	if bc.Heads < 1 || bc.Candidates < 1 || bc.Capacity < 1 || bc.Dim < 1 || bc.Repeats < 1 {
		return BankResult{}, fmt.Errorf("bench: bank: heads %d, candidates %d, capacity %d, dim %d, repeats %d must all be ≥ 1",
			bc.Heads, bc.Candidates, bc.Capacity, bc.Dim, bc.Repeats)
	}
	cfg := bank.DefaultConfig()
	if bc.Config != nil {
		cfg = *bc.Config
	}
	cfg.Heads, cfg.Capacity, cfg.KeyDim, cfg.ValueDim, cfg.Workers = bc.Heads, bc.Capacity, bc.Dim, bc.Dim, bc.Workers
	if cfg.DescDim > 0 {
		return BankResult{}, fmt.Errorf("bench: bank: separate descriptors (DescDim %d) are not supported", cfg.DescDim)
	}
	newBank := bank.New
	if bc.NewBank != nil {
		newBank = bc.NewBank
	}
	b, err := newBank(cfg)
	if err != nil {
		return BankResult{}, fmt.Errorf("bench: bank: %w", err)
	}
	steps, done := bc.Steps(), 0
	if bc.Float32Kernel {
		defer gemm.SetBF16(gemm.SetBF16(false))
	}
	res := BankResult{Heads: bc.Heads, Candidates: bc.Candidates, Capacity: bc.Capacity, Dim: bc.Dim, Device: "cpu",
		Workers: cfg.WorkerCount(), SIMD: riesz.SIMD(), BF16: gemm.HardwareBF16()}
	if bc.NewBank != nil {
		res.Device = bc.Device
	}
	// next reports the finished step (if any) and checks the context
	// before the following one.
	next := func(finished bool, what string) error {
		if finished {
			done++
			if bc.Progress != nil {
				bc.Progress(done, steps)
			}
		}
		if bc.Context != nil && bc.Context.Err() != nil {
			return fmt.Errorf("bench: bank: stopped before %s (%d of %d steps done): %w", what, done, steps, bc.Context.Err())
		}
		return nil
	}
	if err := next(false, "the fill"); err != nil {
		return res, err
	}
	// Fill: blocks until the bank is full (the first admits min(N, M)).
	fill := NewVideoStream(bc.Heads, bc.Capacity, bc.Dim, bc.Seed)
	if _, err := b.Update(fill.Next()); err != nil {
		return res, err
	}
	if err := next(true, "the warm-up update"); err != nil {
		return res, err
	}
	vs := NewVideoStream(bc.Heads, bc.Candidates, bc.Dim, bc.Seed+1)
	if _, err := b.Update(vs.Next()); err != nil { // warm-up, untimed
		return res, err
	}
	for i := 0; i < bc.Repeats; i++ {
		if err := next(true, fmt.Sprintf("timed update %d", i+1)); err != nil {
			return res, err
		}
		blk := vs.Next()
		c0 := cputime.Process()
		dec, err := b.Update(blk)
		if err != nil {
			return res, err
		}
		res.UpdateCPUSeconds = append(res.UpdateCPUSeconds, (cputime.Process() - c0).Seconds())
		res.UpdateSeconds = append(res.UpdateSeconds, dec.Timings.Total.Seconds())
		res.Accepted = append(res.Accepted, dec.Accepted)
		res.Steps.Validate += dec.Timings.Validate / time.Duration(bc.Repeats)
		res.Steps.Score += dec.Timings.Score / time.Duration(bc.Repeats)
		res.Steps.Scan += dec.Timings.Scan / time.Duration(bc.Repeats)
		res.Steps.Evict += dec.Timings.Evict / time.Duration(bc.Repeats)
		res.Steps.Commit += dec.Timings.Commit / time.Duration(bc.Repeats)
		res.Steps.Total += dec.Timings.Total / time.Duration(bc.Repeats)
	}
	res.UpdateSecondsMedian = Median(res.UpdateSeconds)
	res.UpdateCPUSecondsMedian = Median(res.UpdateCPUSeconds)
	res.PeakExtraBytes = b.PeakScratchBytes()
	res.BankBytes = b.Bytes()
	// Standalone interaction passes over the full bank: the scoring pass of
	// an update (candidates in their stored form, so bfloat16-rounded with
	// a BF16 payload), then the same passes on the float32 kernel.
	blk := vs.Next()
	pass := newScoringPass(b, blk.Keys, bc.Candidates, res.Workers)
	timed := func(what string) (wall, cpu []float64, err error) {
		for i := 0; i < bc.Repeats; i++ {
			if err := next(true, fmt.Sprintf("timed %s %d", what, i+1)); err != nil {
				return nil, nil, err
			}
			t := time.Now()
			c0 := cputime.Process()
			pass.run()
			wall = append(wall, time.Since(t).Seconds())
			cpu = append(cpu, (cputime.Process() - c0).Seconds())
		}
		return wall, cpu, nil
	}
	var passCPU []float64
	if res.PassSeconds, passCPU, err = timed("pass"); err != nil {
		return res, err
	}
	N := bc.Candidates
	pairs := float64(N) * float64(b.Len()) * float64(bc.Heads)
	if res.BF16 {
		prev := gemm.SetBF16(false)
		f32, _, err := timed("float32 pass")
		gemm.SetBF16(prev)
		if err != nil {
			return res, err
		}
		res.PassFloat32SecondsMedian = Median(f32)
		res.PassFloat32GFLOPS = 2 * pairs * float64(bc.Dim) / res.PassFloat32SecondsMedian / 1e9
	}
	_ = next(true, "") // the last pass: report it; nothing follows
	res.PassCPUSecondsMedian = Median(passCPU)
	res.PassSecondsMedian = Median(res.PassSeconds)
	if res.BF16 {
		res.BF16Speedup = res.PassFloat32SecondsMedian / res.PassSecondsMedian
	}
	res.PairsPerSecond = pairs / res.PassSecondsMedian
	res.PassGFLOPS = 2 * pairs * float64(bc.Dim) / res.PassSecondsMedian / 1e9
	if res.PassCPUSecondsMedian > 0 {
		res.PassGFLOPSPerCore = 2 * pairs * float64(bc.Dim) / res.PassCPUSecondsMedian / 1e9
	}
	res.UpdateGFLOPS = 2 * float64(N) * float64(bc.Capacity) * float64(bc.Heads) * float64(bc.Dim) / res.UpdateSecondsMedian / 1e9
	return res, nil
}

// scoringPass is an update's scoring pass on its own: every head's N
// candidates against the head's whole bank, with the external densities
// and mean scores of Algorithm 1's ordering step (the bank's kernel and
// descriptors, baselines taken as 1), heads in parallel on the bank's
// worker count with one tile workspace per worker.
type scoringPass struct {
	kern       riesz.Kernel
	n, d       int
	keys       []float32   // [H][N][d], in the bank's payload rounding
	banks      []riesz.Set // per head: the bank's descriptors
	norms      [][]float32 // per head: candidate norms
	inv        [][]float32 // per head: 1/baseline (all 1)
	ext, score [][]float64 // per head
	ws         []riesz.Workspace
	bf16       bool // the descriptors are bfloat16 values (gemm's bfloat16 product)
}

func newScoringPass(b *bank.Bank, keys []float32, n, workers int) *scoringPass {
	cfg := b.Config()
	d := cfg.KeyDim
	if cfg.Payload == bank.PayloadBF16 {
		r := make([]float32, len(keys))
		for i, v := range keys {
			r[i] = bank.RoundBF16(v)
		}
		keys = r
	}
	p := &scoringPass{kern: b.Kernel(), n: n, d: d, keys: keys, ws: make([]riesz.Workspace, max(1, workers)),
		bf16: cfg.Payload == bank.PayloadBF16 && cfg.DescDim == 0}
	for h := 0; h < cfg.Heads; h++ {
		m := b.HeadLen(h)
		bs := riesz.NewSet(b.Descriptors(h), m, d, nil)
		bs.BF16 = p.bf16
		p.banks = append(p.banks, bs)
		p.norms = append(p.norms, make([]float32, n))
		inv := make([]float32, m)
		for j := range inv {
			inv[j] = 1
		}
		p.inv = append(p.inv, inv)
		p.ext = append(p.ext, make([]float64, n))
		p.score = append(p.score, make([]float64, n))
	}
	return p
}

// run is one pass over every head.
func (p *scoringPass) run() {
	H, W := len(p.banks), len(p.ws)
	head := func(h int, ws *riesz.Workspace) {
		cs := riesz.NewSet(p.keys[h*p.n*p.d:(h+1)*p.n*p.d], p.n, p.d, p.norms[h])
		cs.BF16 = p.bf16
		clear(p.ext[h])
		p.kern.RowStats(cs, p.banks[h], p.inv[h], p.ext[h], p.score[h], nil, ws)
	}
	if W <= 1 || H == 1 {
		for h := 0; h < H; h++ {
			head(h, &p.ws[0])
		}
		return
	}
	var next atomic.Int32
	var wg sync.WaitGroup
	for w := 0; w < W; w++ {
		wg.Go(func() {
			for {
				h := int(next.Add(1)) - 1
				if h >= H {
					return
				}
				head(h, &p.ws[w])
			}
		})
	}
	wg.Wait()
}
