package memory

import (
	"bytes"
	"cmp"
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
// Format 2 (written by Save; snapio.go): the magic "DKVMEM02", the header
// (policy name, resolved Config, blocks begun and committed; gob, length
// first), the policy state as a stream of fields (frames layer by layer
// and tensor by tensor, in their dtype, bfloat16 where the policy holds
// them so), then a seal: "DKVSEAL2", the stream's length and a CRC-32C of
// everything before it. Save writes straight to w as it encodes (memory
// bounded by a buffer, not by the state), so a paper-scale snapshot
// streams into its file; Load decodes into a new state, bounds every
// count before it allocates (allocations follow the bytes actually read),
// and replaces the policy's state only once the seal checks. The
// DensityKV banks are embedded as the bank package's own snapshots
// (bank.Bank.WriteTo / bank.Load), each preceded by its length.
//
// Format 1 ("DKVMEM01": a uint64 payload length, a CRC-32 of the payload,
// then the payload, a gob stream of the header and the state) is still
// read.
//
// Not saved: stats and the last bank decisions (they describe past calls)
// and a custom LongLive-RAG Describer (set it again before Load).
type Snapshotter interface {
	Save(w io.Writer) error
	Load(r io.Reader) error
}

const snapMagicV1 = "DKVMEM01"

// maxSnapshotV1 bounds the payload of a format-1 snapshot (64 GiB).
const maxSnapshotV1 = 64 << 30

// maxHeader bounds the header of a format-2 snapshot.
const maxHeader = 1 << 20

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
	// Pool is empty in snapshots written before the option existed,
	// which pooled the frames leaving the window.
	Pool string
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
			LatentChannels: r.LatentChannels, DescriptorStorageDim: r.DescriptorStorageDim, Pool: r.Pool.String()},
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
		"bank.descriptor": b.Descriptor, "longlive_rag.descriptor": r.Descriptor, "longlive_rag.pool": cmp.Or(r.Pool, RAGPoolWindow.String())} { // no pool: written before the option, pooled from the window
		if err := c.SetVariant(path, name); err != nil {
			return c, err
		}
	}
	return c, nil
}

// snapSave writes a format-2 snapshot: the header, then body's fields,
// then the seal.
func (c *core) snapSave(w io.Writer, body func(*snapWriter)) error {
	if c.rec.open {
		return fmt.Errorf("memory: %s: save: a recache before block %d is open", c.name, c.rec.block)
	}
	if c.open {
		return fmt.Errorf("memory: %s: save: call for block %d is open", c.name, c.call.Block)
	}
	var hb bytes.Buffer
	if err := gob.NewEncoder(&hb).Encode(snapHeader{Policy: c.name, Config: toStored(c.cfg), Started: c.started, Committed: c.committed}); err != nil {
		return fmt.Errorf("memory: %s: save: %w", c.name, err)
	}
	sw := newSnapWriter(w)
	sw.bytes([]byte(snapMagic2))
	snapSlice(sw, hb.Bytes())
	body(sw)
	if err := sw.seal(); err != nil {
		return fmt.Errorf("memory: %s: save: %w", c.name, err)
	}
	return nil
}

// snapLoad reads a snapshot of either format without modifying the
// policy: format 2 through v2, which decodes the state's fields from the
// stream (the seal is checked after it), format 1 through v1, which
// gob-decodes the legacy state. It returns the checked header.
func (c *core) snapLoad(r io.Reader, v2 func(h snapHeader, sr *snapReader), v1 func(h snapHeader, dec *gob.Decoder) error) (snapHeader, error) {
	var h snapHeader
	if c.open {
		return h, fmt.Errorf("memory: %s: load: call for block %d is open", c.name, c.call.Block)
	}
	if c.rec.open {
		return h, fmt.Errorf("memory: %s: load: a recache before block %d is open", c.name, c.rec.block)
	}
	var magic [8]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return h, fmt.Errorf("%w: %s: header: %v", ErrSnapshot, c.name, err)
	}
	switch string(magic[:]) {
	case snapMagicV1:
		return c.snapLoadV1(r, v1)
	case snapMagic2:
	default:
		return h, fmt.Errorf("%w: %s: magic %q, want %q (or %q)", ErrSnapshot, c.name, magic[:], snapMagic2, snapMagicV1)
	}
	sr := &snapReader{r: r, name: c.name, crc: crc32.Update(0, castagnoli, magic[:]), n: 8}
	hb := snapRead[uint8](sr, "header", -1, maxHeader)
	if sr.err != nil {
		return h, sr.err
	}
	if err := gob.NewDecoder(bytes.NewReader(hb)).Decode(&h); err != nil {
		return h, fmt.Errorf("%w: %s: header: %v", ErrSnapshot, c.name, err)
	}
	if err := c.checkHeader(h); err != nil {
		return h, err
	}
	v2(h, sr)
	if err := sr.seal(); err != nil {
		return h, err
	}
	return h, nil
}

// checkHeader checks a snapshot's header against the policy.
func (c *core) checkHeader(h snapHeader) error {
	if h.Policy != c.name {
		return fmt.Errorf("memory: %s: load: snapshot is of policy %q", c.name, h.Policy)
	}
	if h.Config.LongLiveRAG.Pool == "" && h.Policy != NameLongLiveRAG {
		h.Config.LongLiveRAG.Pool = c.cfg.LongLiveRAG.Pool.String() // written before the option; only LongLive-RAG reads it
	}
	cfg, err := h.Config.config()
	if err != nil {
		return fmt.Errorf("%w: %s: config: %v", ErrSnapshot, c.name, err)
	}
	if !reflect.DeepEqual(cfg, c.cfg) {
		return fmt.Errorf("memory: %s: load: snapshot config %+v differs from the policy's %+v", c.name, cfg, c.cfg)
	}
	if h.Committed < 0 || (h.Started != h.Committed && h.Started != h.Committed+1) {
		return fmt.Errorf("%w: %s: blocks begun %d, committed %d", ErrSnapshot, c.name, h.Started, h.Committed)
	}
	return nil
}

// snapLoadV1 reads the rest of a format-1 snapshot (after its magic).
func (c *core) snapLoadV1(r io.Reader, v1 func(h snapHeader, dec *gob.Decoder) error) (snapHeader, error) {
	var h snapHeader
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return h, fmt.Errorf("%w: %s: header: %v", ErrSnapshot, c.name, err)
	}
	n := binary.LittleEndian.Uint64(hdr[:])
	if n > maxSnapshotV1 {
		return h, fmt.Errorf("%w: %s: payload length %d too large", ErrSnapshot, c.name, n)
	}
	buf := bytes.NewBuffer(make([]byte, 0, min(n, 1<<20)))
	if got, err := io.CopyN(buf, r, int64(n)); err != nil {
		return h, fmt.Errorf("%w: %s: payload truncated at %d of %d bytes", ErrSnapshot, c.name, got, n)
	}
	if crc := crc32.ChecksumIEEE(buf.Bytes()); crc != binary.LittleEndian.Uint32(hdr[8:]) {
		return h, fmt.Errorf("%w: %s: checksum %08x, want %08x", ErrSnapshot, c.name, crc, binary.LittleEndian.Uint32(hdr[8:]))
	}
	dec := gob.NewDecoder(buf)
	if err := dec.Decode(&h); err != nil {
		return h, fmt.Errorf("%w: %s: header: %v", ErrSnapshot, c.name, err)
	}
	if err := c.checkHeader(h); err != nil {
		return h, err
	}
	if err := v1(h, dec); err != nil {
		return h, fmt.Errorf("%w: %s: state: %v", ErrSnapshot, c.name, err)
	}
	return h, nil
}

func (c *core) restore(h snapHeader) {
	c.started, c.committed = h.Started, h.Committed
	c.stats = Stats{Policy: c.name}
	c.newHistory()
}

// frameValues is the number of values of one layer's K (or V) of a frame.
func (c *core) frameValues() int { return c.tpf * c.row }

// readFrames reads a list of frames of this policy's layout (format 2).
func (c *core) readFrames(sr *snapReader, what string, h snapHeader) []*frame {
	n := h.Committed * c.lay.FramesPerBlock
	return sr.frames(what, c.lay.Layers, c.frameValues(), n, max(n-1, 0))
}

// checkFrames validates restored frames' shapes and ids; Ready frames are
// checked by the policy that allows them.
func (c *core) checkFrames(what string, fr []*frame, keys int) error {
	n := c.frameValues()
	for _, f := range fr {
		if f == nil || len(f.K) != c.lay.Layers || len(f.V) != c.lay.Layers {
			return fmt.Errorf("%w: %s: %s frame has wrong layer count", ErrSnapshot, c.name, what)
		}
		for l := range f.K {
			if f.K[l].len() != n || f.V[l].len() != n {
				return fmt.Errorf("%w: %s: %s frame %d layer %d has %d/%d values, want %d", ErrSnapshot, c.name, what, f.ID, l, f.K[l].len(), f.V[l].len(), n)
			}
		}
		if f.ID < 0 || f.ID >= keys {
			return fmt.Errorf("%w: %s: %s frame id %d outside [0, %d)", ErrSnapshot, c.name, what, f.ID, keys)
		}
	}
	return nil
}

// float32Frames checks that frames hold float32 tensors and are not Ready
// (the policies that keep frames rotated in place).
func (c *core) float32Frames(what string, fr []*frame) error {
	for _, f := range fr {
		if f.Ready {
			return fmt.Errorf("%w: %s: %s frame %d is a bank candidate frame", ErrSnapshot, c.name, what, f.ID)
		}
		for l := range f.K {
			if f.K[l].f32 == nil && f.K[l].len() > 0 || f.V[l].f32 == nil && f.V[l].len() > 0 {
				return fmt.Errorf("%w: %s: %s frame %d layer %d is not float32", ErrSnapshot, c.name, what, f.ID, l)
			}
		}
	}
	return nil
}

// ---- Native / Infinity-RoPE

// Save writes the policy state (between calls).
func (p *Native) Save(w io.Writer) error {
	return p.snapSave(w, func(sw *snapWriter) { sw.frames(p.frames) })
}

// Load replaces the policy state with a snapshot from Save.
func (p *Native) Load(r io.Reader) error {
	var frames []*frame
	h, err := p.snapLoad(r, func(h snapHeader, sr *snapReader) {
		frames = p.readFrames(sr, "cache", h)
	}, func(h snapHeader, dec *gob.Decoder) error {
		var st nativeStateV1
		err := dec.Decode(&st)
		frames = framesV1(st.Frames)
		return err
	})
	if err != nil {
		return err
	}
	if err := p.checkFrames("cache", frames, h.Committed*p.lay.FramesPerBlock); err != nil {
		return err
	}
	if err := p.float32Frames("cache", frames); err != nil {
		return err
	}
	p.restore(h)
	p.frames = frames
	return nil
}

// ---- windowed policies

// windowState is a windowed policy's state as Load decodes it.
type windowState struct {
	Sink, Recent []*frame
	Seen         int
	Tokens       *tokenState
	RAG          *ragState
	Banks        []*bank.Bank
	UpdateBlocks []int
}

type tokenState struct {
	K, V    [][]float32
	Src     []int64
	Adm     []int32
	Ordinal int64
	Stride  int64
	Ords    []int64
	Archive *archiveState // FullHistory's tokens in an archive (K, V nil)
}

type ragState struct {
	Descs   map[int][]float32
	Pool    []*frame
	Archive *archiveState // the pool in an archive (Pool nil)
	Picked  []int
}

// writeArchive writes an archive's state (format 2).
func (w *snapWriter) archive(a *archive) {
	st := a.state()
	w.ints(st.IDs)
	snapSlice(w, st.CRC)
}

// readArchive reads an archive's state of frames of ids in [0, maxID].
func (r *snapReader) archive(what string, layers, maxFrames, maxID int) *archiveState {
	st := &archiveState{IDs: r.ints(what+" frames", maxFrames, 0, int64(maxID))}
	st.CRC = snapRead[uint32](r, what+" checksums", len(st.IDs)*layers, 0)
	return st
}

// The selector tags of format 2.
const (
	selTokens = 1
	selRAG    = 2
	selBanks  = 3
)

func (p *windowed) save(w io.Writer) error {
	return p.snapSave(w, func(sw *snapWriter) {
		sw.frames(p.sink)
		sw.frames(p.recent)
		sw.int(p.seen)
		switch s := p.sel.(type) {
		case *tokenSelector:
			sw.u8(selTokens)
			sw.u64(uint64(s.ordinal))
			sw.u64(uint64(s.stride))
			snapSlice(sw, s.store.src)
			snapSlice(sw, s.store.adm)
			snapSlice(sw, s.ords)
			sw.bool(s.arch != nil)
			if s.arch != nil {
				sw.archive(s.arch)
				break
			}
			for l := range s.store.k {
				snapSlice(sw, s.store.k[l])
				snapSlice(sw, s.store.v[l])
			}
		case *ragSelector:
			sw.u8(selRAG)
			ids := make([]int, 0, len(s.descs))
			for id := range s.descs {
				ids = append(ids, id)
			}
			slicesSort(ids)
			sw.int(len(ids))
			for _, id := range ids {
				sw.int(id)
				snapSlice(sw, s.descs[id])
			}
			sw.bool(s.arch != nil)
			if s.arch != nil {
				sw.archive(s.arch)
			} else {
				sw.frames(s.pool)
			}
			sw.ints(s.picked)
		case *bankSelector:
			sw.u8(selBanks)
			for _, b := range s.banks {
				sw.u64(uint64(b.SnapshotBytes()))
				if sw.err == nil {
					_, sw.err = b.WriteTo(sw.bw)
				}
			}
			sw.ints(s.blocks)
		}
	})
}

// readState decodes a windowed policy's format-2 state.
func (p *windowed) readState(h snapHeader, sr *snapReader, st *windowState) {
	L, row := p.lay.Layers, p.row
	frames := h.Committed * p.lay.FramesPerBlock
	st.Sink = p.readFrames(sr, "sink", h)
	st.Recent = p.readFrames(sr, "window", h)
	st.Seen = sr.int("frames offered", 0, int64(frames))
	tag := sr.u8()
	if sr.err != nil {
		return
	}
	want := map[string]uint8{"*memory.tokenSelector": selTokens, "*memory.ragSelector": selRAG, "*memory.bankSelector": selBanks}[fmt.Sprintf("%T", p.sel)]
	if tag != want {
		sr.fail("selector state %d, want %d", tag, want)
		return
	}
	switch s := p.sel.(type) {
	case *tokenSelector:
		t := &tokenState{K: make([][]float32, L), V: make([][]float32, L)}
		t.Ordinal = int64(sr.u64())
		t.Stride = int64(sr.u64())
		maxTokens := frames * p.tpf
		t.Src = snapRead[int64](sr, "memory sources", -1, maxTokens)
		n := len(t.Src)
		t.Adm = snapRead[int32](sr, "memory admissions", n, 0)
		t.Ords = snapRead[int64](sr, "memory ordinals", n, 0)
		if sr.bool("archive") {
			t.Archive = sr.archive("history", L, frames, max(frames-1, 0))
			st.Tokens = t
			break
		}
		for l := 0; l < L && sr.err == nil; l++ {
			t.K[l] = snapRead[float32](sr, fmt.Sprintf("memory layer %d keys", l), n*row, 0)
			t.V[l] = snapRead[float32](sr, fmt.Sprintf("memory layer %d values", l), n*row, 0)
		}
		st.Tokens = t
	case *ragSelector:
		g := &ragState{Descs: map[int][]float32{}}
		nd := sr.int("descriptors", 0, int64(frames))
		for i := 0; i < nd && sr.err == nil; i++ {
			id := sr.int("descriptor frame", 0, int64(max(frames-1, 0)))
			g.Descs[id] = snapRead[float32](sr, fmt.Sprintf("descriptor of frame %d", id), s.desc.Dim(), 0)
		}
		pool := 0
		if sr.bool("archive") {
			g.Archive = sr.archive("pool", L, frames, max(frames-1, 0))
			pool = len(g.Archive.IDs)
		} else {
			g.Pool = p.readFrames(sr, "pool", h)
			pool = len(g.Pool)
		}
		g.Picked = sr.ints("retrieved", max(s.cfg.TopK, 0), 0, int64(max(pool-1, 0)))
		st.RAG = g
	case *bankSelector:
		maxBytes := int64(1<<10) + int64(p.lay.Heads)*int64(s.banks[0].Config().Capacity+1)*(s.banks[0].Config().BytesPerState()+8)
		for l := 0; l < L && sr.err == nil; l++ {
			n := sr.int(fmt.Sprintf("layer %d bank snapshot bytes", l), 0, maxBytes)
			if sr.err != nil {
				break
			}
			b := new(bank.Bank)
			lr := &io.LimitedReader{R: &crcReader{r: sr}, N: int64(n)}
			if _, err := b.ReadFrom(lr); err != nil {
				sr.fail("layer %d bank: %v", l, err)
				break
			}
			if lr.N != 0 {
				sr.fail("layer %d bank: %d of its %d bytes unread", l, lr.N, n)
				break
			}
			st.Banks = append(st.Banks, b)
		}
		st.UpdateBlocks = sr.ints("update blocks", frames+1, 0, int64(h.Started))
	}
}

func (p *windowed) load(r io.Reader) error {
	var st windowState
	h, err := p.snapLoad(r, func(h snapHeader, sr *snapReader) { p.readState(h, sr, &st) },
		func(h snapHeader, dec *gob.Decoder) error {
			var v1 windowStateV1
			if err := dec.Decode(&v1); err != nil {
				return err
			}
			return v1.convert(&st)
		})
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
	if err := p.checkReady(h, st.Sink, st.Recent); err != nil {
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
		if t.Archive != nil {
			if err := s.checkArchived(t); err != nil {
				return err
			}
		} else {
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
		}
		if err := s.restoreStore(t); err != nil {
			return err
		}
	case *ragSelector:
		g := st.RAG
		if g == nil {
			g = &ragState{}
		}
		if err := p.checkFrames("pool", g.Pool, frames); err != nil {
			return err
		}
		if err := p.float32Keys("pool", g.Pool); err != nil {
			return err
		}
		pool := len(g.Pool)
		if g.Archive != nil {
			if s.arch == nil {
				return fmt.Errorf("memory: %s: load: the snapshot keeps its pool in an archive (%d frames); attach it with UseArchive first", p.name, len(g.Archive.IDs))
			}
			if err := s.arch.check(*g.Archive); err != nil {
				return err
			}
			pool = len(g.Archive.IDs)
		} else if s.arch != nil && (!s.arch.fresh || p.started > 0) {
			return fmt.Errorf("memory: %s: load: the snapshot holds its pool in memory; its archive can take it only before the policy's first call", p.name)
		}
		for _, i := range g.Picked {
			if i < 0 || i >= pool {
				return fmt.Errorf("%w: %s: retrieved index %d outside pool of %d", ErrSnapshot, p.name, i, pool)
			}
		}
		if g.Descs == nil {
			g.Descs = map[int][]float32{}
		}
		switch {
		case g.Archive != nil:
			if err := s.arch.restore(*g.Archive); err != nil {
				return err
			}
		case s.arch != nil: // an in-memory pool into the archive
			if err := s.arch.add(g.Pool, func(f *frame, l int) []float32 { return f.K[l].f32 }, (*frame).values); err != nil {
				return err
			}
			g.Pool = nil
		}
		s.descs, s.pool, s.picked = g.Descs, g.Pool, g.Picked
	case *bankSelector:
		// The committed K/V must pass the clean pass's checks, or a later
		// bank update would reject them.
		for _, fr := range [][]*frame{st.Sink, st.Recent} {
			for _, f := range fr {
				for l := 0; l < L; l++ {
					k, v := f.keys(l), f.values(l)
					if i := max(finite.First(k), finite.First(v)); i >= 0 {
						return fmt.Errorf("%w: %s: frame %d layer %d has NaN or Inf", ErrSnapshot, p.name, f.ID, l)
					}
					if err := s.storable(k, v); err != nil {
						return fmt.Errorf("%w: %s: frame %d layer %d: %v", ErrSnapshot, p.name, f.ID, l, err)
					}
				}
			}
		}
		if len(st.Banks) != L {
			return fmt.Errorf("%w: %s: %d bank snapshots, want %d", ErrSnapshot, p.name, len(st.Banks), L)
		}
		for l, b := range st.Banks {
			if !reflect.DeepEqual(b.Config(), s.banks[l].Config()) {
				return fmt.Errorf("memory: %s: load: layer %d bank config %+v differs from %+v", p.name, l, b.Config(), s.banks[l].Config())
			}
		}
		for _, b := range st.Banks {
			if b.Updates() != len(st.UpdateBlocks) {
				return fmt.Errorf("%w: %s: bank has %d updates, snapshot lists %d update blocks", ErrSnapshot, p.name, b.Updates(), len(st.UpdateBlocks))
			}
		}
		if err := s.adopt(st.Banks); err != nil {
			return err
		}
		s.blocks = st.UpdateBlocks
		for l := range s.banks {
			s.refresh(l)
		}
		clear(s.last)
	}
	p.restore(h)
	p.sink, p.recent, p.seen = st.Sink, st.Recent, st.Seen
	return nil
}

// checkArchived checks a token store whose tokens are in an archive
// (FullHistory): whole frames, in order.
func (s *tokenSelector) checkArchived(t *tokenState) error {
	name, n, tpf := s.c.name, len(t.Src), s.c.tpf
	if s.arch == nil {
		return fmt.Errorf("memory: %s: load: the snapshot keeps its history in an archive (%d frames); attach it with UseArchive first", name, len(t.Archive.IDs))
	}
	if len(t.Adm) != n || len(t.Ords) != n || t.Stride < 1 || n != len(t.Archive.IDs)*tpf {
		return fmt.Errorf("%w: %s: memory store of %d tokens, %d archived frames", ErrSnapshot, name, n, len(t.Archive.IDs))
	}
	for i, id := range t.Archive.IDs {
		for p := 0; p < tpf; p++ {
			if t.Src[i*tpf+p] != int64(id*tpf+p) {
				return fmt.Errorf("%w: %s: archived frame %d does not match the memory's token %d", ErrSnapshot, name, id, i*tpf+p)
			}
		}
	}
	return s.arch.check(*t.Archive)
}

// restoreStore makes t the token store: in memory, in the archive it
// names, or (FullHistory with an archive, from an in-memory snapshot)
// moved into the archive.
func (s *tokenSelector) restoreStore(t *tokenState) error {
	c := s.c
	L, tpf, row := c.lay.Layers, c.tpf, c.row
	switch {
	case t.Archive != nil:
		if err := s.arch.restore(*t.Archive); err != nil {
			return err
		}
		s.store = tokenStore{k: make([][]float32, L), v: make([][]float32, L), src: t.Src, adm: t.Adm}
	case s.arch != nil:
		n := len(t.Src)
		if !s.arch.fresh || c.started > 0 || n%tpf != 0 {
			return fmt.Errorf("memory: %s: load: the snapshot holds its history in memory (%d tokens); its archive can take whole frames only before the policy's first call", c.name, n)
		}
		frames := make([]*frame, n/tpf)
		for i := range frames {
			id := int(t.Src[i*tpf]) / tpf
			for p := 0; p < tpf; p++ {
				if t.Src[i*tpf+p] != int64(id*tpf+p) {
					return fmt.Errorf("%w: %s: memory token %d is not token %d of frame %d", ErrSnapshot, c.name, i*tpf+p, p, id)
				}
			}
			f := newFrame(id, L)
			for l := 0; l < L; l++ {
				f.K[l] = f32Tensor(t.K[l][i*tpf*row : (i+1)*tpf*row])
				f.V[l] = f32Tensor(t.V[l][i*tpf*row : (i+1)*tpf*row])
			}
			frames[i] = f
		}
		if err := s.arch.add(frames, func(f *frame, l int) []float32 { return f.K[l].f32 }, (*frame).values); err != nil {
			return err
		}
		s.store = tokenStore{k: make([][]float32, L), v: make([][]float32, L), src: t.Src, adm: t.Adm}
	default:
		s.store = tokenStore{k: t.K, v: t.V, src: t.Src, adm: t.Adm}
	}
	s.ordinal, s.stride, s.ords = t.Ordinal, t.Stride, t.Ords
	return nil
}

// checkReady checks the Ready frames of a restored windowed state: only a
// DensityKV bank that reads rounded candidates has them, only among the
// frames that have left the window (they are not attended again), and
// they hold bfloat16.
func (p *windowed) checkReady(h snapHeader, sink, recent []*frame) error {
	s, ok := p.sel.(*bankSelector)
	F := p.lay.FramesPerBlock
	lim := h.Committed*F + F - p.cfg.WindowFrames // the first frame of the next block's window
	for _, fr := range [][]*frame{sink, recent} {
		for _, f := range fr {
			if !f.Ready {
				continue
			}
			switch {
			case !ok || !s.ready:
				return fmt.Errorf("%w: %s: frame %d is a bank candidate frame, which this policy does not keep", ErrSnapshot, p.name, f.ID)
			case f.ID >= lim || f.ID < p.cfg.SinkFrames:
				return fmt.Errorf("%w: %s: frame %d is a bank candidate frame but is still attended", ErrSnapshot, p.name, f.ID)
			}
			for l := range f.K {
				if f.K[l].b16 == nil || f.V[l].b16 == nil {
					return fmt.Errorf("%w: %s: bank candidate frame %d layer %d is not bfloat16", ErrSnapshot, p.name, f.ID, l)
				}
			}
		}
	}
	return nil
}

// float32Keys checks that frames hold float32 keys (LongLive-RAG's pool,
// rotated in place).
func (c *core) float32Keys(what string, fr []*frame) error {
	for _, f := range fr {
		if f.Ready {
			return fmt.Errorf("%w: %s: %s frame %d is a bank candidate frame", ErrSnapshot, c.name, what, f.ID)
		}
		for l := range f.K {
			if f.K[l].f32 == nil && f.K[l].len() > 0 {
				return fmt.Errorf("%w: %s: %s frame %d layer %d keys are not float32", ErrSnapshot, c.name, what, f.ID, l)
			}
		}
	}
	return nil
}

// Save writes the policy state (between calls).
func (p *Controls) Save(w io.Writer) error { return p.save(w) }

// Load replaces the policy state with a snapshot from Save.
func (p *Controls) Load(r io.Reader) error { return p.load(r) }

// Save writes the policy state (between calls), banks included.
func (p *DensityKV) Save(w io.Writer) error {
	if p.s.broken != nil {
		return fmt.Errorf("memory: densitykv: save: %w", p.s.broken)
	}
	return p.save(w)
}

// Load replaces the policy state with a snapshot from Save.
func (p *DensityKV) Load(r io.Reader) error { return p.load(r) }

// Save writes the policy state (between calls); the Describer is not saved.
func (p *LongLiveRAG) Save(w io.Writer) error { return p.save(w) }

// Load replaces the policy state with a snapshot from Save.
func (p *LongLiveRAG) Load(r io.Reader) error { return p.load(r) }

// ---- Deep Forcing

// dfState is Deep Forcing's state. Version 2 buffers query tokens (QTok)
// and keeps the authors' sink bookkeeping; a version-1 state (query frames
// of the clean passes) predates the authors' adapter and is refused.
type dfState struct {
	Version    int
	Sink, Hist []*frame
	Mid        []dfStore
	QTok       [][]float32
	Compressed bool
	SinkBase   []int
	SinkSet    []bool
	SinkShift  []int
}

// dfVersion is the version of the Deep Forcing state Save writes.
const dfVersion = 2

// dfVersionMsg explains the refusal of an older Deep Forcing state.
func dfVersionMsg(v int) string {
	return fmt.Sprintf("a version-%d snapshot from before the authors' Deep Forcing adapter (query tokens of every call, their sink position); start the run again", max(v, 1))
}

// Save writes the policy state (between calls).
func (p *DeepForcing) Save(w io.Writer) error {
	return p.snapSave(w, func(sw *snapWriter) {
		sw.int(dfVersion)
		sw.frames(p.sink)
		sw.frames(p.hist)
		for _, m := range p.mid {
			snapSlice(sw, m.Src)
			snapSlice(sw, m.Reuse)
			snapSlice(sw, m.K)
			snapSlice(sw, m.V)
		}
		for _, q := range p.qtok {
			snapSlice(sw, q)
		}
		sw.bool(p.compressed)
		sw.ints(p.sinkBase)
		for _, b := range p.sinkSet {
			sw.bool(b)
		}
		sw.ints(p.sinkShift)
	})
}

// Load replaces the policy state with a snapshot from Save.
func (p *DeepForcing) Load(r io.Reader) error {
	var st dfState
	L := p.lay.Layers
	keep := p.cfg.DeepForcing.RecentFrames * p.tpf * p.row
	h, err := p.snapLoad(r, func(h snapHeader, sr *snapReader) {
		frames := h.Committed * p.lay.FramesPerBlock
		st.Version = sr.int("deep forcing state version", 1, dfVersion)
		if sr.err == nil && st.Version != dfVersion {
			sr.fail("%s", dfVersionMsg(st.Version))
		}
		if sr.err != nil {
			return
		}
		st.Sink = p.readFrames(sr, "sink", h)
		st.Hist = p.readFrames(sr, "history", h)
		st.Mid = make([]dfStore, L)
		for l := 0; l < L && sr.err == nil; l++ {
			m := &st.Mid[l]
			m.Src = snapRead[int64](sr, fmt.Sprintf("middle layer %d sources", l), -1, frames*p.tpf)
			m.Reuse = snapRead[int32](sr, fmt.Sprintf("middle layer %d reuse", l), len(m.Src), 0)
			m.K = snapRead[float32](sr, fmt.Sprintf("middle layer %d keys", l), len(m.Src)*p.row, 0)
			m.V = snapRead[float32](sr, fmt.Sprintf("middle layer %d values", l), len(m.Src)*p.row, 0)
		}
		st.QTok = make([][]float32, L)
		for l := 0; l < L && sr.err == nil; l++ {
			st.QTok[l] = snapRead[float32](sr, fmt.Sprintf("query buffer layer %d", l), -1, keep)
		}
		st.Compressed = sr.bool("compressed")
		// Sink positions lie within the run's frames, shifted by at most
		// the cache.
		lim := int64(frames + p.cfg.CacheFrames + p.cfg.SinkFrames + p.cfg.DeepForcing.RecentFrames + 1)
		st.SinkBase = sr.ints("sink base frames", L, -lim, lim)
		for l := 0; l < L && sr.err == nil; l++ {
			st.SinkSet = append(st.SinkSet, sr.bool(fmt.Sprintf("layer %d sink base set", l)))
		}
		st.SinkShift = sr.ints("sink shifts", L, -2*lim, 2*lim)
	}, func(h snapHeader, dec *gob.Decoder) error {
		var v1 dfStateV1
		err := dec.Decode(&v1)
		st = dfState{Version: v1.Version, Sink: framesV1(v1.Sink), Hist: framesV1(v1.Hist), Mid: v1.Mid, QTok: v1.QTok,
			Compressed: v1.Compressed, SinkBase: v1.SinkBase, SinkSet: v1.SinkSet, SinkShift: v1.SinkShift}
		return err
	})
	if err != nil {
		return err
	}
	if st.Version != dfVersion {
		return fmt.Errorf("%w: %s: %s", ErrSnapshot, p.name, dfVersionMsg(st.Version))
	}
	frames := h.Committed * p.lay.FramesPerBlock
	if err := p.checkFrames("sink", st.Sink, frames); err != nil {
		return err
	}
	if err := p.checkFrames("history", st.Hist, frames); err != nil {
		return err
	}
	if err := p.float32Frames("sink", st.Sink); err != nil {
		return err
	}
	if err := p.float32Frames("history", st.Hist); err != nil {
		return err
	}
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
