package memory

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"reflect"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/internal/finite"
)

// Snapshotter saves and restores a policy's whole persistent state between
// blocks (for resuming long runs). After Load, the policy continues exactly
// as the saved one would have. Every policy of this package implements it.
//
// Format: the magic "DKVMEM01", a uint64 payload length, a CRC-32 (IEEE) of
// the payload, then the payload: a gob stream of the header (policy name,
// resolved Config, blocks begun and committed) and the policy state. The
// DensityKV banks are embedded as the bank package's own snapshots
// (bank.Bank.WriteTo / bank.Load).
// Not saved: stats and the last bank decisions (they describe past calls)
// and a custom LongLive-RAG Describer (set it again before Load).
type Snapshotter interface {
	Save(w io.Writer) error
	Load(r io.Reader) error
}

const snapMagic = "DKVMEM01"

// maxSnapshot bounds the payload read by Load (64 GiB).
const maxSnapshot = 64 << 30

// ErrSnapshot is wrapped by every error about a malformed snapshot.
var ErrSnapshot = errors.New("memory: bad snapshot")

type snapHeader struct {
	Policy             string
	Config             storedConfig
	Started, Committed int
}

// storedConfig is Config as a snapshot stores it: gob matches struct fields
// by name, and the variants are their names (strings), as in the
// snapshots written before they were typed values, which therefore keep
// reading (testdata/snapshot-v1).
type storedConfig struct {
	Layout                                Layout
	SinkFrames, CacheFrames, WindowFrames int
	Capacity                              int
	RoPETheta                             float64
	Bank                                  storedBankConfig
	DeepForcing                           DeepForcingConfig
	LongLiveRAG                           storedRAGConfig
}

type storedBankConfig struct {
	Tau, Sigma, P, Eps, Delta                                                        float64
	Ordering, Baselines, Eviction, Prefix, Admission, Payload, Densities, Descriptor string
	Workers                                                                          int
}

type storedRAGConfig struct {
	TopK, ExcludeRecent  int
	Descriptor           string
	LatentChannels       int
	DescriptorStorageDim int
}

func toStored(c Config) storedConfig {
	b, r := c.Bank, c.LongLiveRAG
	return storedConfig{Layout: c.Layout, SinkFrames: c.SinkFrames, CacheFrames: c.CacheFrames, WindowFrames: c.WindowFrames,
		Capacity: c.Capacity, RoPETheta: c.RoPETheta, DeepForcing: c.DeepForcing,
		Bank: storedBankConfig{Tau: b.Tau, Sigma: b.Sigma, P: b.P, Eps: b.Eps, Delta: b.Delta,
			Ordering: b.Ordering.String(), Baselines: b.Baselines.String(), Eviction: b.Eviction.String(), Prefix: b.Prefix.String(),
			Admission: b.Admission.String(), Payload: b.Payload.String(), Densities: b.Densities.String(), Descriptor: b.Descriptor.String(),
			Workers: b.Workers},
		LongLiveRAG: storedRAGConfig{TopK: r.TopK, ExcludeRecent: r.ExcludeRecent, Descriptor: r.Descriptor.String(),
			LatentChannels: r.LatentChannels, DescriptorStorageDim: r.DescriptorStorageDim},
	}
}

// config returns the stored configuration; an unknown variant name is an
// error.
func (s storedConfig) config() (Config, error) {
	b, r := s.Bank, s.LongLiveRAG
	c := Config{Layout: s.Layout, SinkFrames: s.SinkFrames, CacheFrames: s.CacheFrames, WindowFrames: s.WindowFrames,
		Capacity: s.Capacity, RoPETheta: s.RoPETheta, DeepForcing: s.DeepForcing,
		Bank: BankConfig{Tau: b.Tau, Sigma: b.Sigma, P: b.P, Eps: b.Eps, Delta: b.Delta, Workers: b.Workers},
		LongLiveRAG: LongLiveRAGConfig{TopK: r.TopK, ExcludeRecent: r.ExcludeRecent,
			LatentChannels: r.LatentChannels, DescriptorStorageDim: r.DescriptorStorageDim}}
	for path, name := range map[string]string{"bank.ordering": b.Ordering, "bank.baselines": b.Baselines, "bank.eviction": b.Eviction,
		"bank.prefix": b.Prefix, "bank.admission": b.Admission, "bank.payload": b.Payload, "bank.densities": b.Densities,
		"bank.descriptor": b.Descriptor, "longlive_rag.descriptor": r.Descriptor} {
		if err := c.SetVariant(path, name); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *core) snapSave(w io.Writer, state any) error {
	if c.rec.open {
		return fmt.Errorf("memory: %s: save: a recache before block %d is open", c.name, c.rec.block)
	}
	if c.open {
		return fmt.Errorf("memory: %s: save: call for block %d is open", c.name, c.call.Block)
	}
	var buf bytes.Buffer
	enc := gob.NewEncoder(&buf)
	if err := enc.Encode(snapHeader{Policy: c.name, Config: toStored(c.cfg), Started: c.started, Committed: c.committed}); err != nil {
		return fmt.Errorf("memory: %s: save: %w", c.name, err)
	}
	if err := enc.Encode(state); err != nil {
		return fmt.Errorf("memory: %s: save: %w", c.name, err)
	}
	var hdr [len(snapMagic) + 12]byte
	copy(hdr[:], snapMagic)
	binary.LittleEndian.PutUint64(hdr[8:], uint64(buf.Len()))
	binary.LittleEndian.PutUint32(hdr[16:], crc32.ChecksumIEEE(buf.Bytes()))
	if _, err := w.Write(hdr[:]); err != nil {
		return fmt.Errorf("memory: %s: save: %w", c.name, err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("memory: %s: save: %w", c.name, err)
	}
	return nil
}

// snapLoad reads and checks a snapshot, decodes the state into state and
// returns the header. The policy is not modified.
func (c *core) snapLoad(r io.Reader, state any) (snapHeader, error) {
	var h snapHeader
	if c.open {
		return h, fmt.Errorf("memory: %s: load: call for block %d is open", c.name, c.call.Block)
	}
	var hdr [len(snapMagic) + 12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return h, fmt.Errorf("%w: %s: header: %v", ErrSnapshot, c.name, err)
	}
	if string(hdr[:8]) != snapMagic {
		return h, fmt.Errorf("%w: %s: magic %q, want %q", ErrSnapshot, c.name, hdr[:8], snapMagic)
	}
	n := binary.LittleEndian.Uint64(hdr[8:])
	if n > maxSnapshot {
		return h, fmt.Errorf("%w: %s: payload length %d too large", ErrSnapshot, c.name, n)
	}
	payload := make([]byte, 0, min(n, 1<<20))
	buf := bytes.NewBuffer(payload)
	if got, err := io.CopyN(buf, r, int64(n)); err != nil {
		return h, fmt.Errorf("%w: %s: payload truncated at %d of %d bytes", ErrSnapshot, c.name, got, n)
	}
	if crc := crc32.ChecksumIEEE(buf.Bytes()); crc != binary.LittleEndian.Uint32(hdr[16:]) {
		return h, fmt.Errorf("%w: %s: checksum %08x, want %08x", ErrSnapshot, c.name, crc, binary.LittleEndian.Uint32(hdr[16:]))
	}
	dec := gob.NewDecoder(buf)
	if err := dec.Decode(&h); err != nil {
		return h, fmt.Errorf("%w: %s: header: %v", ErrSnapshot, c.name, err)
	}
	if h.Policy != c.name {
		return h, fmt.Errorf("memory: %s: load: snapshot is of policy %q", c.name, h.Policy)
	}
	cfg, err := h.Config.config()
	if err != nil {
		return h, fmt.Errorf("%w: %s: config: %v", ErrSnapshot, c.name, err)
	}
	if !reflect.DeepEqual(cfg, c.cfg) {
		return h, fmt.Errorf("memory: %s: load: snapshot config %+v differs from the policy's %+v", c.name, cfg, c.cfg)
	}
	if h.Committed < 0 || (h.Started != h.Committed && h.Started != h.Committed+1) {
		return h, fmt.Errorf("%w: %s: blocks begun %d, committed %d", ErrSnapshot, c.name, h.Started, h.Committed)
	}
	if err := dec.Decode(state); err != nil {
		return h, fmt.Errorf("%w: %s: state: %v", ErrSnapshot, c.name, err)
	}
	return h, nil
}

func (c *core) restore(h snapHeader) {
	c.started, c.committed = h.Started, h.Committed
	c.stats = Stats{Policy: c.name}
}

// checkFrames validates restored frames' shapes.
func (c *core) checkFrames(what string, fr []*frame, keys int) error {
	n := c.tpf * c.row
	for _, f := range fr {
		if f == nil || len(f.K) != c.lay.Layers || len(f.V) != c.lay.Layers {
			return fmt.Errorf("%w: %s: %s frame has wrong layer count", ErrSnapshot, c.name, what)
		}
		for l := range f.K {
			if len(f.K[l]) != n || len(f.V[l]) != n {
				return fmt.Errorf("%w: %s: %s frame %d layer %d has %d/%d values, want %d", ErrSnapshot, c.name, what, f.ID, l, len(f.K[l]), len(f.V[l]), n)
			}
		}
		if f.ID < 0 || f.ID >= keys {
			return fmt.Errorf("%w: %s: %s frame id %d outside [0, %d)", ErrSnapshot, c.name, what, f.ID, keys)
		}
	}
	return nil
}

// ---- Native / Infinity-RoPE

type nativeState struct{ Frames []*frame }

// Save writes the policy state (between calls).
func (p *Native) Save(w io.Writer) error { return p.snapSave(w, nativeState{p.frames}) }

// Load replaces the policy state with a snapshot from Save.
func (p *Native) Load(r io.Reader) error {
	var st nativeState
	h, err := p.snapLoad(r, &st)
	if err != nil {
		return err
	}
	if err := p.checkFrames("cache", st.Frames, h.Committed*p.lay.FramesPerBlock); err != nil {
		return err
	}
	p.restore(h)
	p.frames = st.Frames
	return nil
}

// ---- windowed policies

type windowState struct {
	Sink, Recent []*frame
	Seen         int
	Tokens       *tokenState
	RAG          *ragState
	Banks        [][]byte
	UpdateBlocks []int
}

type tokenState struct {
	K, V    [][]float32
	Src     []int64
	Adm     []int32
	Ordinal int64
	Stride  int64
	Ords    []int64
}

type ragState struct {
	Descs  map[int][]float32
	Pool   []*frame
	Picked []int
}

func (p *windowed) save(w io.Writer) error {
	st := windowState{Sink: p.sink, Recent: p.recent, Seen: p.seen}
	switch s := p.sel.(type) {
	case *tokenSelector:
		st.Tokens = &tokenState{K: s.store.k, V: s.store.v, Src: s.store.src, Adm: s.store.adm, Ordinal: s.ordinal, Stride: s.stride, Ords: s.ords}
	case *ragSelector:
		st.RAG = &ragState{Descs: s.descs, Pool: s.pool, Picked: s.picked}
	case *bankSelector:
		for l, b := range s.banks {
			var buf bytes.Buffer
			if _, err := b.WriteTo(&buf); err != nil {
				return fmt.Errorf("memory: %s: save: layer %d bank: %w", p.name, l, err)
			}
			st.Banks = append(st.Banks, buf.Bytes())
		}
		st.UpdateBlocks = s.blocks
	}
	return p.snapSave(w, st)
}

func (p *windowed) load(r io.Reader) error {
	var st windowState
	h, err := p.snapLoad(r, &st)
	if err != nil {
		return err
	}
	frames := h.Committed * p.lay.FramesPerBlock
	if err := p.checkFrames("sink", st.Sink, frames); err != nil {
		return err
	}
	if err := p.checkFrames("window", st.Recent, frames); err != nil {
		return err
	}
	L, row := p.lay.Layers, p.row
	switch s := p.sel.(type) {
	case *tokenSelector:
		t := st.Tokens
		if t == nil {
			t = &tokenState{Stride: 1}
		}
		n := len(t.Src)
		if n == 0 && len(t.K) == 0 && len(t.V) == 0 {
			t.K, t.V = make([][]float32, L), make([][]float32, L)
		}
		if len(t.K) != L || len(t.V) != L || len(t.Adm) != n || len(t.Ords) != n || t.Stride < 1 {
			return fmt.Errorf("%w: %s: memory store shapes", ErrSnapshot, p.name)
		}
		for l := 0; l < L; l++ {
			if len(t.K[l]) != n*row || len(t.V[l]) != n*row {
				return fmt.Errorf("%w: %s: memory layer %d has %d values, want %d", ErrSnapshot, p.name, l, len(t.K[l]), n*row)
			}
		}
		s.store = tokenStore{k: t.K, v: t.V, src: t.Src, adm: t.Adm}
		s.ordinal, s.stride, s.ords = t.Ordinal, t.Stride, t.Ords
	case *ragSelector:
		g := st.RAG
		if g == nil {
			g = &ragState{}
		}
		if err := p.checkFrames("pool", g.Pool, frames); err != nil {
			return err
		}
		for _, i := range g.Picked {
			if i < 0 || i >= len(g.Pool) {
				return fmt.Errorf("%w: %s: retrieved index %d outside pool of %d", ErrSnapshot, p.name, i, len(g.Pool))
			}
		}
		if g.Descs == nil {
			g.Descs = map[int][]float32{}
		}
		s.descs, s.pool, s.picked = g.Descs, g.Pool, g.Picked
		for l := range s.memK {
			s.memK[l], s.memV[l] = s.memK[l][:0], s.memV[l][:0]
			for _, j := range s.picked {
				s.memK[l] = append(s.memK[l], s.pool[j].K[l]...)
				s.memV[l] = append(s.memV[l], s.pool[j].V[l]...)
			}
		}
	case *bankSelector:
		// The committed K/V must pass the clean pass's checks, or a later
		// bank update would reject them.
		for _, fr := range [][]*frame{st.Sink, st.Recent} {
			for _, f := range fr {
				for l := 0; l < L; l++ {
					if i := max(finite.First(f.K[l]), finite.First(f.V[l])); i >= 0 {
						return fmt.Errorf("%w: %s: frame %d layer %d has NaN or Inf", ErrSnapshot, p.name, f.ID, l)
					}
					if err := s.storable(f.K[l], f.V[l]); err != nil {
						return fmt.Errorf("%w: %s: frame %d layer %d: %v", ErrSnapshot, p.name, f.ID, l, err)
					}
				}
			}
		}
		if len(st.Banks) != L {
			return fmt.Errorf("%w: %s: %d bank snapshots, want %d", ErrSnapshot, p.name, len(st.Banks), L)
		}
		banks := make([]*bank.Bank, L)
		for l := range banks {
			b, err := bank.Load(bytes.NewReader(st.Banks[l]))
			if err != nil {
				return fmt.Errorf("%w: %s: layer %d bank: %v", ErrSnapshot, p.name, l, err)
			}
			if !reflect.DeepEqual(b.Config(), s.banks[l].Config()) {
				return fmt.Errorf("memory: %s: load: layer %d bank config %+v differs from %+v", p.name, l, b.Config(), s.banks[l].Config())
			}
			banks[l] = b
		}
		for _, b := range banks {
			if b.Updates() != len(st.UpdateBlocks) {
				return fmt.Errorf("%w: %s: bank has %d updates, snapshot lists %d update blocks", ErrSnapshot, p.name, b.Updates(), len(st.UpdateBlocks))
			}
		}
		s.banks = banks
		s.blocks = st.UpdateBlocks
		for l := range banks {
			s.refresh(l)
		}
		clear(s.last)
	}
	p.restore(h)
	p.sink, p.recent, p.seen = st.Sink, st.Recent, st.Seen
	return nil
}

// Save writes the policy state (between calls).
func (p *Controls) Save(w io.Writer) error { return p.save(w) }

// Load replaces the policy state with a snapshot from Save.
func (p *Controls) Load(r io.Reader) error { return p.load(r) }

// Save writes the policy state (between calls), banks included.
func (p *DensityKV) Save(w io.Writer) error { return p.save(w) }

// Load replaces the policy state with a snapshot from Save.
func (p *DensityKV) Load(r io.Reader) error { return p.load(r) }

// Save writes the policy state (between calls); the Describer is not saved.
func (p *LongLiveRAG) Save(w io.Writer) error { return p.save(w) }

// Load replaces the policy state with a snapshot from Save.
func (p *LongLiveRAG) Load(r io.Reader) error { return p.load(r) }

// ---- Deep Forcing

// dfState is Deep Forcing's state. Version 2 buffers query tokens (QTok)
// and keeps the authors' sink bookkeeping; a version-1 snapshot (query
// frames of the clean passes, QBuf) predates the authors' adapter and is
// refused.
type dfState struct {
	Version    int
	Sink, Hist []*frame
	Mid        []dfStore
	QBuf       [][]qframe // version 1 only
	QTok       [][]float32
	Compressed bool
	SinkBase   []int
	SinkSet    []bool
	SinkShift  []int
}

// qframe is a version-1 buffered query frame.
type qframe struct {
	ID int
	Q  []float32
}

// Save writes the policy state (between calls).
func (p *DeepForcing) Save(w io.Writer) error {
	return p.snapSave(w, dfState{Version: 2, Sink: p.sink, Hist: p.hist, Mid: p.mid, QTok: p.qtok, Compressed: p.compressed,
		SinkBase: p.sinkBase, SinkSet: p.sinkSet, SinkShift: p.sinkShift})
}

// Load replaces the policy state with a snapshot from Save.
func (p *DeepForcing) Load(r io.Reader) error {
	var st dfState
	h, err := p.snapLoad(r, &st)
	if err != nil {
		return err
	}
	if st.Version != 2 {
		return fmt.Errorf("%w: %s: a version-%d snapshot from before the authors' Deep Forcing adapter (query tokens of every call, their sink position); start the run again", ErrSnapshot, p.name, max(st.Version, 1))
	}
	frames := h.Committed * p.lay.FramesPerBlock
	if err := p.checkFrames("sink", st.Sink, frames); err != nil {
		return err
	}
	if err := p.checkFrames("history", st.Hist, frames); err != nil {
		return err
	}
	L := p.lay.Layers
	if st.Mid == nil {
		st.Mid = make([]dfStore, L)
	}
	if st.QTok == nil {
		st.QTok = make([][]float32, L)
	}
	for _, x := range []*[]int{&st.SinkBase, &st.SinkShift} {
		if *x == nil {
			*x = make([]int, L)
		}
	}
	if st.SinkSet == nil {
		st.SinkSet = make([]bool, L)
	}
	if len(st.Mid) != L || len(st.QTok) != L || len(st.SinkBase) != L || len(st.SinkSet) != L || len(st.SinkShift) != L {
		return fmt.Errorf("%w: %s: %d middle stores, %d query buffers and %d/%d/%d sink records, want %d", ErrSnapshot, p.name,
			len(st.Mid), len(st.QTok), len(st.SinkBase), len(st.SinkSet), len(st.SinkShift), L)
	}
	keep := p.cfg.DeepForcing.RecentFrames * p.tpf * p.row
	for l, m := range st.Mid {
		n := len(m.Src)
		if len(m.K) != n*p.row || len(m.V) != n*p.row || len(m.Reuse) != n {
			return fmt.Errorf("%w: %s: middle store of layer %d has inconsistent lengths", ErrSnapshot, p.name, l)
		}
		if q := len(st.QTok[l]); q%p.row != 0 || q > keep {
			return fmt.Errorf("%w: %s: query buffer of layer %d has %d values, want whole tokens of %d and at most %d", ErrSnapshot, p.name, l, q, p.row, keep)
		}
	}
	p.restore(h)
	p.sink, p.hist, p.mid, p.qtok, p.compressed = st.Sink, st.Hist, st.Mid, st.QTok, st.Compressed
	p.sinkBase, p.sinkSet, p.sinkShift = st.SinkBase, st.SinkSet, st.SinkShift
	p.compress, p.leaving = false, 0
	return nil
}
