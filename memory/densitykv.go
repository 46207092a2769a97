package memory

import (
	"bytes"
	"fmt"
	"math"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/compute"
)

// DensityKV is the paper's policy: attention reads
// [sink (t = 0) | per-layer density bank (keys at t = 0) | local window]
// (a multi-frame sink is all at t = 0 once committed, see windowed), and the
// frames leaving the window are offered, one block of N = F·P candidates
// per head, to each layer's bank (Algorithm 1) before the first call of the
// next block ("logical precommit"); that call, the block's later denoising
// calls and its clean pass all read the updated bank.
//
// Candidate keys are the clean keys rotated at temporal position 0 and their
// native spatial position; values are the raw clean values; candidate
// sources are global token indices f·TokensPerFrame + h·Width + w (the Wan
// golden rollout's source_token is Source − SinkFrames·TokensPerFrame).
type DensityKV struct {
	windowed
	s *bankSelector
}

type bankSelector struct {
	c     *core
	cfg   BankConfig
	banks []*bank.Bank
	last  []bank.Decision // latest decision per layer (zero before any update)
	// memN is each layer's memory length (the largest head's), headN the
	// heads' lengths.
	memN  []int
	headN [][]int
	// blocks[u] is the block whose first call ran bank update u.
	blocks []int
	// ready: frames waiting to be offered are kept as the bank reads them
	// (readyFrame).
	ready bool
	// broken is the failure of a bank update that failed on its device
	// after some layers were updated: the policy is unusable from then on
	// (every Begin and Save returns it).
	broken error
}

// bankConfig maps the policy configuration onto the bank package.
func bankConfig(c Config) (bank.Config, error) {
	b := c.Bank
	bc := bank.Config{Heads: c.Layout.Heads, KeyDim: c.Layout.HeadDim, ValueDim: c.Layout.HeadDim,
		DescDim: b.Descriptor.Dim(c.Layout.HeadDim), Capacity: c.Capacity,
		Tau: b.Tau, Sigma: b.Sigma, P: b.P, Eps: b.Eps, Delta: b.Delta,
		Ordering: b.Ordering, Baselines: b.Baselines, Eviction: b.Eviction, Prefix: b.Prefix, Admission: b.Admission,
		Payload: b.Payload, Density: b.Densities, Workers: b.Workers}
	if err := bc.Validate(); err != nil {
		return bc, fmt.Errorf("memory: densitykv: %w", err)
	}
	return bc, nil
}

// DensityKVBankConfig returns the bank configuration of each layer of the
// DensityKV policy of cfg (after Resolve).
func DensityKVBankConfig(cfg Config) (bank.Config, error) {
	c, err := cfg.Resolve()
	if err != nil {
		return bank.Config{}, err
	}
	return bankConfig(c)
}

func newDensityKV(cfg Config, opt Options) (Policy, error) {
	c, err := newCore(NameDensityKV, cfg)
	if err != nil {
		return nil, err
	}
	bc, err := bankConfig(cfg)
	if err != nil {
		return nil, err
	}
	L := cfg.Layout.Layers
	c.compactFrames = true
	s := &bankSelector{c: c, cfg: cfg.Bank, banks: make([]*bank.Bank, L), last: make([]bank.Decision, L),
		memN: make([]int, L), headN: make([][]int, L),
		ready: cfg.Bank.Payload == bank.PayloadBF16 && cfg.Bank.Descriptor == bank.DescPostRoPEKey}
	newBank := bank.New
	if opt.NewBank != nil {
		newBank = opt.NewBank
	}
	for l := range s.banks {
		if s.banks[l], err = newBank(bc); err != nil {
			return nil, fmt.Errorf("memory: densitykv: layer %d: %w", l, err)
		}
		s.headN[l] = make([]int, cfg.Layout.Heads)
	}
	return &DensityKV{windowed{core: c, sel: s}, s}, nil
}

// Banks returns the per-layer banks (live; do not update them directly).
func (p *DensityKV) Banks() []*bank.Bank { return p.s.banks }

// LastDecisions returns each layer's latest bank decision (the zero
// Decision for a layer that has not been updated yet). The decisions of the
// current block are available after its first Begin.
func (p *DensityKV) LastDecisions() []bank.Decision {
	return append([]bank.Decision(nil), p.s.last...)
}

// UpdateBlock returns the block whose first call ran bank update u (the
// bank.Entry.Admitted and bank.Decision.Update index), or −1 if u is out of
// range. Frames leaving the window at block b are admitted by that update.
func (p *DensityKV) UpdateBlock(u int) int {
	if u < 0 || u >= len(p.s.blocks) {
		return -1
	}
	return p.s.blocks[u]
}

// HeadMemory returns the bank occupancy of each head of layer; heads differ
// only with the per-head prefix variant, in which case Context.Parts.Memory
// is the largest and shorter heads are padded (see Context).
func (p *DensityKV) HeadMemory(layer int) []int { return append([]int(nil), p.s.headN[layer]...) }

// offer builds one bank.Block per layer from the leaving frames and updates
// every layer's bank. Every layer's block is checked (bank.Bank.Check) before
// any bank changes, so an error leaves every layer's bank as it was.
func (s *bankSelector) offer(block int, frames []*frame, st *Stats) error {
	if s.broken != nil {
		return s.broken
	}
	if len(frames) == 0 {
		return nil
	}
	c := s.c
	H, D, P := c.lay.Heads, c.lay.HeadDim, c.tpf
	N := len(frames) * P
	src := make([]int64, N)
	for i, f := range frames {
		for p := 0; p < P; p++ {
			src[i*P+p] = int64(f.ID*P + p)
		}
	}
	keys := make([]float32, H*N*D)
	vals := make([]float32, H*N*D)
	var desc []float32
	descDim := s.cfg.Descriptor.Dim(D)
	if descDim > 0 {
		desc = make([]float32, H*N*descDim)
	}
	kr := make([]float32, P*H*D) // one frame's keys, rotated at t = 0
	vr := make([]float32, P*H*D) // its values
	var raw []float32            // its raw keys, for pre-RoPE descriptors
	if s.cfg.Descriptor == bank.DescPreRoPEKey || s.cfg.Descriptor == bank.DescPreRoPEKeyValue {
		raw = make([]float32, P*H*D)
	}
	// build fills keys, vals and desc with layer l's candidates: head-major
	// [H][N][·], candidate row n = frame index i·P + in-frame token p. A
	// Ready frame holds the rotated keys and values rounded to bfloat16,
	// which the bank (bfloat16 payload, post-RoPE-key descriptor) rounds
	// to themselves.
	build := func(l int) bank.Block {
		for i, f := range frames {
			if f.Ready {
				f.K[l].into(kr)
			} else {
				c.memKeysInto(kr, f, l)
			}
			f.V[l].into(vr)
			if raw != nil {
				f.K[l].into(raw)
			}
			for p := 0; p < P; p++ {
				n := i*P + p
				for h := 0; h < H; h++ {
					o := (p*H + h) * D
					copy(keys[(h*N+n)*D:(h*N+n+1)*D], kr[o:o+D])
					copy(vals[(h*N+n)*D:(h*N+n+1)*D], vr[o:o+D])
					switch s.cfg.Descriptor {
					case bank.DescPreRoPEKey:
						copy(desc[(h*N+n)*D:(h*N+n+1)*D], raw[o:o+D])
					case bank.DescKeyValue:
						copy(desc[(h*N+n)*2*D:], kr[o:o+D])
						copy(desc[(h*N+n)*2*D+D:(h*N+n+1)*2*D], vr[o:o+D])
					case bank.DescPreRoPEKeyValue:
						copy(desc[(h*N+n)*2*D:], raw[o:o+D])
						copy(desc[(h*N+n)*2*D+D:(h*N+n+1)*2*D], vr[o:o+D])
					}
				}
			}
		}
		return bank.Block{Keys: keys, Values: vals, Desc: desc, Source: src}
	}
	// Check every layer before updating any: a block that one layer's bank
	// would reject must not leave the layers before it updated.
	for l := 0; l < c.lay.Layers; l++ {
		if err := s.banks[l].Check(build(l)); err != nil {
			return fmt.Errorf("memory: densitykv: block %d layer %d: offered frames %d…%d (bank row r is token r mod %d of frame %d + ⌊r/%d⌋): %w",
				block, l, frames[0].ID, frames[len(frames)-1].ID, P, frames[0].ID, P, err)
		}
	}
	decs := make([]bank.Decision, c.lay.Layers)
	for l := 0; l < c.lay.Layers; l++ {
		dec, err := s.banks[l].Update(build(l))
		if err != nil {
			// On the host bank.Update fails only where bank.Check does; a
			// bank on a device fails where the device does (lost, out of
			// memory), and the layers before l are updated already.
			s.broken = fmt.Errorf("memory: densitykv: block %d layer %d: bank update failed after every layer's check passed, with layers 0…%d updated: the policy is unusable (resume the run from its last checkpoint): %w", block, l, l-1, err)
			return s.broken
		}
		decs[l] = dec
		st.Offered[l] = N
		for _, hd := range dec.Heads {
			st.Admitted[l] = max(st.Admitted[l], hd.Accepted)
			st.EvictedMandatory[l] += hd.Mandatory
			st.EvictedCapacity[l] += hd.Capacity
		}
		s.refresh(l)
	}
	copy(s.last, decs)
	s.blocks = append(s.blocks, block)
	return nil
}

// adopt makes loaded (read from a snapshot into host banks, checked)
// the policy's banks. A host bank is replaced; a bank built on another
// backend (Options.NewBank, e.g. a device) reads the loaded bank's
// snapshot into itself, so its passes hold the states. A backend's error
// while loading is returned; the layers before it have their loaded
// states then, and the policy must not go on (the run stops; its
// checkpoint on disk is untouched).
func (s *bankSelector) adopt(loaded []*bank.Bank) error {
	var buf bytes.Buffer
	for l, b := range loaded {
		if _, host := s.banks[l].Passes().(bank.CPUPasses); host {
			s.banks[l] = b
			continue
		}
		buf.Reset()
		if _, err := b.WriteTo(&buf); err != nil {
			return fmt.Errorf("memory: densitykv: load: layer %d bank: %w", l, err)
		}
		if _, err := s.banks[l].ReadFrom(&buf); err != nil {
			return fmt.Errorf("memory: densitykv: load: layer %d bank: %w", l, err)
		}
	}
	return nil
}

// refresh records layer l's occupancy per head and the memory length (the
// largest head's; shorter heads read zero rows, see Context.HeadMemory).
func (s *bankSelector) refresh(l int) {
	b := s.banks[l]
	n := 0
	for h := range s.headN[l] {
		s.headN[l][h] = b.HeadLen(h)
		n = max(n, s.headN[l][h])
	}
	s.memN[l] = n
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// memory schedules layer l's bank as [n][H][D] memory rows, decoded from
// the bank's storage straight into the context (bank.Bank.Interleaved);
// when planning with the bank's states on a device (its Passes write the
// rows there: gpu.BankPasses), as the Plan's SegDevice rows instead.
func (s *bankSelector) memory(l int) int {
	b := s.banks[l]
	if d, ok := b.Passes().(deviceRowsPasses); ok && s.c.planning {
		s.c.ctxDevice(s.memN[l], bankRows{b, d})
		return s.memN[l]
	}
	s.c.ctxFill(s.memN[l], 0, func(dk, dv []float32, r0, r1 int) error {
		b.Interleaved(dk, dv, r0, r1)
		return nil
	})
	return s.memN[l]
}

// deviceRowsPasses is a bank's passes that keep its states on a device
// and copy them into a context there (gpu.BankPasses).
type deviceRowsPasses interface {
	WriteRows(be compute.Backend, k, v compute.Tensor, row0, rows int) error
}

// bankRows is a bank's memory rows on its device (DeviceRows).
type bankRows struct {
	b *bank.Bank
	d deviceRowsPasses
}

func (r bankRows) WriteRows(be compute.Backend, k, v compute.Tensor, row0, rows int) error {
	return r.d.WriteRows(be, k, v, row0, rows)
}

func (r bankRows) HostRows(dk, dv []float32, rows int) { r.b.Interleaved(dk, dv, 0, rows) }

// waiting keeps a frame that has left the window as the bank will read
// it, when the bank reads only that (a bfloat16 payload and the post-RoPE
// key as descriptor): its keys rotated at temporal position 0 and rounded
// to bfloat16, its values rounded, half the bytes of the float32 frame.
// Offering it gives the bank bit-identical candidates (rounding a
// bfloat16 value is exact).
func (s *bankSelector) waiting(f *frame) {
	if !s.ready || f.Ready {
		return
	}
	buf := make([]float32, s.c.tpf*s.c.row)
	for l := range f.K {
		f.K[l] = rounded(s.c.memKeysInto(buf, f, l))
		f.V[l] = rounded(f.V[l].into(buf))
	}
	f.Ready = true
}

func (s *bankSelector) occupancy(l int, dst []int) { copy(dst, s.headN[l]) }

func (s *bankSelector) bytes() int64 {
	var n int64
	for _, b := range s.banks {
		n += b.Bytes()
	}
	return n
}

// ragged returns the per-head memory lengths of layer l when they differ.
func (s *bankSelector) ragged(l int) []int {
	for _, n := range s.headN[l] {
		if n != s.memN[l] {
			return append([]int(nil), s.headN[l]...)
		}
	}
	return nil
}

// maxNorm2 is the largest squared norm per head vector a clean pass may
// write: half the bank's bound (bank.MaxNorm2), leaving room for the RoPE
// rotation's and the bfloat16 payload's rounding, so that a committed block
// can never make a later bank update fail.
const maxNorm2 = bank.MaxNorm2 / 2

// checkClean rejects a clean pass whose K/V a later bank update would
// reject: keys (and values, when they enter the density descriptor) whose
// per-head squared norm would overflow the bank's distance computations,
// and, with a bfloat16 payload, finite float32 values that overflow
// bfloat16. Bad data is refused when it is written, not blocks later when
// the frames leave the window.
func (s *bankSelector) checkClean(layer int, k, v []float32) error {
	if err := s.storable(k, v); err != nil {
		return fmt.Errorf("memory: densitykv: block %d layer %d: clean %w", s.c.call.Block, layer, err)
	}
	return nil
}

// storable checks K/V rows [n][H][D] (raw keys, values) against what the
// bank accepts once the keys are rotated; the error names the first bad
// token, head and value.
func (s *bankSelector) storable(k, v []float32) error {
	D, H := s.c.lay.HeadDim, s.c.lay.Heads
	withV := s.cfg.Descriptor.WithValues()
	bf := s.cfg.Payload == bank.PayloadBF16
	for i := 0; i < len(k)/D; i++ {
		var n2 float64
		for _, x := range k[i*D : (i+1)*D] {
			n2 += float64(x) * float64(x)
		}
		if withV {
			for _, x := range v[i*D : (i+1)*D] {
				n2 += float64(x) * float64(x)
			}
		}
		if n2 > maxNorm2 {
			return fmt.Errorf("key at token %d head %d has |x|² = %.3g > %.3g (bank distances would overflow)", i/H, i%H, n2, maxNorm2)
		}
		if bf {
			for j, x := range v[i*D : (i+1)*D] {
				if math.IsInf(float64(bank.RoundBF16(x)), 0) {
					return fmt.Errorf("value at token %d head %d dim %d is %v, which overflows the bfloat16 bank payload", i/H, i%H, j, x)
				}
			}
		}
	}
	return nil
}
