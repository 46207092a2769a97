package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/riesz"
	"github.com/densitykv/densitykv/vulkan"
)

// BankPasses are bank.Passes on a Vulkan device in exact mode: every head's
// bank — its keys and values (float32, widened from bfloat16 with a BF16
// payload; KV), descriptors and norms — lives on the device between
// updates (only candidates are uploaded; Commit rebuilds the bank there
// from the survivors and the admitted candidates), and the passes run there with
// the CPU's bits — the scoring pass (RieszRowStatsCached, keeping the
// candidate×bank interactions on the device), the prefix scan over them
// (RieszScanRows), the subtraction of the evicted states (RieszRowSums) and
// the admitted states' self densities (their interactions by
// RieszRowStatsCached, reduced on the host in riesz.SelfSums's order by
// riesz.SelfSumsMatrix). The host reads back only the vectors it decides
// from (external densities, scores, crossing points, prefix sums, density
// updates) and the admitted states' r×r interactions. Build a bank on them
// with NewBank.
//
// The scratch of an update (the candidates, the candidate×bank
// interactions, the scan's checkpoints, the evicted and fresh states) is
// shared by every bank of one device, head by head (bankScratch): the
// banks of a model's layers update one at a time, so the device holds one
// update's scratch, not one per layer. The banks of a device share one
// lock; a pass that finds its head's scratch last written by another
// bank's update (two banks of one device updating at once) fails, naming
// it, rather than read another bank's data.
type BankPasses struct {
	dev   *vulkan.Device
	k     riesz.Kernel
	dd    int
	dk    int
	dv    int
	bf16  bool
	sh    *bankScratch // the device's shared scratch; sh.mu guards the passes
	freed bool
	err   error
	heads []bankHead
}

// bankHead is one head's device state.
type bankHead struct {
	desc, norms [2]*vulkan.Buffer // the bank [M][dd] float32 and [M] norms; cur is live
	keys, vals  [2]*vulkan.Buffer // [M][dk], [M][dv] float32
	cur, n      int
	nc          int // candidates of the update
	scanned     int // rows of the last Scan
	every       int
	ne, nf      int          // evicted and fresh states of the last Commit
	sc          *headScratch // this head's scratch, shared with the device's other banks
}

// NewBank returns an empty bank of configuration cfg whose passes run on
// dev (BankPasses). It refuses, naming it, a variant without a device
// path: a Soft-Riesz exponent other than 1, 2 and 4, sequential admission,
// a descriptor wider than RieszMaxD; and a device without shaderFloat64 or
// failing the exactness probe.
func NewBank(dev *vulkan.Device, cfg bank.Config) (*bank.Bank, error) {
	p, err := NewBankPasses(dev, cfg)
	if err != nil {
		return nil, err
	}
	return bank.NewWithPasses(cfg, p)
}

// NewBankPasses returns the device passes of a bank of configuration cfg
// (see NewBank).
func NewBankPasses(dev *vulkan.Device, cfg bank.Config) (*BankPasses, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gpu: NewBank: %w", err)
	}
	switch {
	case cfg.P != 1 && cfg.P != 2 && cfg.P != 4:
		return nil, fmt.Errorf("gpu: NewBank: Soft-Riesz exponent P = %v has no exact kernel on the device (p = 1, 2 and 4 do)", cfg.P)
	case cfg.Admission == bank.AdmitSequential:
		return nil, fmt.Errorf("gpu: NewBank: Admission = AdmitSequential (single-candidate steps) has no device path")
	}
	dd := cfg.KeyDim
	if cfg.DescDim > 0 {
		dd = cfg.DescDim
	}
	if dd > RieszMaxD {
		return nil, fmt.Errorf("gpu: NewBank: descriptor dimension %d exceeds the Soft-Riesz passes' %d", dd, RieszMaxD)
	}
	if !dev.Info().Float64 {
		return nil, fmt.Errorf("gpu: NewBank: device %v lacks shaderFloat64 (the densities are float64 sums)", dev)
	}
	if _, err := CheckExact(dev); err != nil {
		return nil, fmt.Errorf("gpu: NewBank: %w", err)
	}
	k, err := riesz.New(cfg.Sigma, cfg.P, cfg.Eps)
	if err != nil {
		return nil, fmt.Errorf("gpu: NewBank: %w", err)
	}
	p := &BankPasses{dev: dev, k: k, dd: dd, dk: cfg.KeyDim, dv: cfg.ValueDim, bf16: cfg.Payload == bank.PayloadBF16 && cfg.DescDim == 0}
	p.heads = make([]bankHead, cfg.Heads)
	p.sh = joinScratch(dev, p)
	for h := range p.heads {
		hd := &p.heads[h]
		hd.sc = p.sh.heads[h]
		M := int64(cfg.Capacity)
		for i := range 2 {
			for _, a := range []struct {
				b    **vulkan.Buffer
				size int64
			}{{&hd.desc[i], M * int64(dd) * 4}, {&hd.norms[i], M * 4}, {&hd.keys[i], M * int64(p.dk) * 4}, {&hd.vals[i], M * int64(p.dv) * 4}} {
				if *a.b, err = dev.Alloc(a.size); err != nil {
					p.Free()
					return nil, fmt.Errorf("gpu: NewBank: head %d: %w", h, err)
				}
			}
		}
	}
	return p, nil
}

// Free releases the bank's device buffers, and the device's shared scratch
// with its last bank; the bank must not be updated after. Freeing twice
// is a no-op.
func (p *BankPasses) Free() {
	bankScratches.Lock() // before sh.mu, as joinScratch
	defer bankScratches.Unlock()
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	if p.freed {
		return
	}
	p.freed = true
	for h := range p.heads {
		hd := &p.heads[h]
		for _, b := range []*vulkan.Buffer{hd.desc[0], hd.desc[1], hd.norms[0], hd.norms[1], hd.keys[0], hd.keys[1], hd.vals[0], hd.vals[1]} {
			if b != nil {
				b.Free()
			}
		}
	}
	p.sh.leave(p)
}

// KV returns head h's stored keys [n][KeyDim] and values [n][ValueDim] on
// the device, float32 in storage order (the bank's Keys and Values), and
// n; they are valid until the next update or Free.
func (p *BankPasses) KV(h int) (keys, values *vulkan.Buffer, n int) {
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	hd := &p.heads[h]
	return hd.keys[hd.cur], hd.vals[hd.cur], hd.n
}

// Err returns the first device error of a pass.
func (p *BankPasses) Err() error {
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	return p.err
}

// fail keeps the first error; later passes do nothing.
func (p *BankPasses) fail(op string, h int, err error) {
	if p.err == nil && err != nil {
		p.err = fmt.Errorf("gpu: bank %s, head %d: %w", op, h, err)
	}
}

// buf returns the head's scratch buffer name with at least size bytes.
func (p *BankPasses) buf(hd *bankHead, name string, size int64) *vulkan.Buffer {
	size = max(size, 16)
	bufs := hd.sc.bufs
	if b := bufs[name]; b != nil && b.Size() >= size {
		return b
	}
	if b := bufs[name]; b != nil {
		b.Free()
		delete(bufs, name)
	}
	b, err := p.dev.Alloc(size + size/8)
	if err != nil {
		panic(bankErr{fmt.Errorf("%d bytes for %s: %w", size, name, err)})
	}
	bufs[name] = b
	return b
}

// bankErr carries a device error out of a pass's helpers (see run).
type bankErr struct{ err error }

// run runs fn under the lock unless a pass failed, turning a bankErr panic
// into the passes' error.
func (p *BankPasses) run(op string, h int, fn func(hd *bankHead)) {
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	if p.err != nil {
		return
	}
	if p.freed {
		p.fail(op, h, fmt.Errorf("the bank's device buffers were freed"))
		return
	}
	defer func() {
		if r := recover(); r != nil {
			be, ok := r.(bankErr)
			if !ok {
				panic(r)
			}
			p.fail(op, h, be.err)
		}
	}()
	fn(&p.heads[h])
}

// check panics with a bankErr for err.
func check(err error) {
	if err != nil {
		panic(bankErr{err})
	}
}

// bankSet returns head h's first n live states.
func (p *BankPasses) bankSet(hd *bankHead, n int) RieszSet {
	return RieszSet{X: hd.desc[hd.cur], Norms: hd.norms[hd.cur], N: n, D: p.dd, BF16: p.bf16}
}

// set returns scratch buffers xName, nName as a set of n rows.
func (p *BankPasses) set(hd *bankHead, xName, nName string, n int) RieszSet {
	return RieszSet{X: p.buf(hd, xName, int64(n)*int64(p.dd)*4), Norms: p.buf(hd, nName, int64(n)*4), N: n, D: p.dd, BF16: p.bf16}
}

// upSet uploads a host set's vectors (widened from bfloat16 bits when held
// in X16) and norms to dst at row off.
func (p *BankPasses) upSet(dst RieszSet, off int, s riesz.Set) {
	if s.N == 0 {
		return
	}
	x := s.X
	if x == nil {
		x = make([]float32, s.N*s.D)
		for i, v := range s.X16[:s.N*s.D] {
			x[i] = math.Float32frombits(uint32(v) << 16)
		}
	}
	check(p.dev.UploadFloat32s(dst.X, int64(off)*int64(p.dd)*4, x[:s.N*s.D]))
	check(p.dev.UploadFloat32s(dst.Norms, int64(off)*4, s.Norms[:s.N]))
}

// upF64 uploads v to buf.
func (p *BankPasses) upF64(buf *vulkan.Buffer, v []float64) {
	if len(v) == 0 {
		return
	}
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	check(p.dev.Upload(buf, 0, b))
}

// downF64 downloads len(dst) float64 from buf at value offset off.
func (p *BankPasses) downF64(dst []float64, buf *vulkan.Buffer, off int64) {
	if len(dst) == 0 {
		return
	}
	b := make([]byte, 8*len(dst))
	check(p.dev.Download(buf, 8*off, b))
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
}

// runBatch runs a batch.
func runBatch(b *vulkan.Batch) { check(b.Run()) }

// sameN checks that the bank's host view has the device's occupancy.
func sameN(what string, host, dev int) {
	if host != dev {
		check(fmt.Errorf("%s has %d states on the host, %d on the device", what, host, dev))
	}
}
