package bank

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"
	"unsafe"

	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/internal/rawio"
	"github.com/densitykv/densitykv/riesz"
)

// Snapshot format (little-endian), version 1:
//
//	magic   [8]byte "DKVBANK\x00"
//	version uint32 = 1
//	bodyLen uint64   bytes of body that follow
//	body:
//	  config: Heads, KeyDim, ValueDim, DescDim, Capacity, Workers uint64;
//	          Tau, Sigma, P, Eps, Delta float64;
//	          Ordering, Baselines, Eviction, Prefix, Admission uint8 (their
//	          values, see config.go), payload DType (F32 0, BF16 1; not the
//	          Payload value), Density DType uint8
//	  updates int32, offered int64
//	  per head: n uint64; keys [n][KeyDim] and values [n][ValueDim] in the
//	            payload dtype (float32, or bfloat16 as uint16); descriptors
//	            [n][DescDim] float32 when DescDim > 0; source [n]int64;
//	            admitted [n]int32; density [n] and baseline [n] in the
//	            density dtype
//	crc     uint32   CRC-32C of everything before it
//
// Restoring is bit-exact: the descriptors of DescDim = 0 banks and all norms
// are recomputed by the same code that computed them at admission.
const (
	snapMagic   = "DKVBANK\x00"
	snapVersion = 1
	snapHeader  = 8 + 4 + 8
)

// ErrSnapshot reports a snapshot that is truncated, corrupted, of an unknown
// version or inconsistent.
var ErrSnapshot = errors.New("bad snapshot")

var castagnoli = rawio.Castagnoli

// SnapshotBytes returns the size of the bank's snapshot (WriteTo).
func (b *Bank) SnapshotBytes() int64 { return snapHeader + b.bodyBytes() + 4 }

// bodyBytes returns the size of the snapshot's body.
func (b *Bank) bodyBytes() int64 {
	c := b.cfg
	n := int64(6*8 + 5*8 + 7 + 4 + 8)
	perState := int64(c.KeyDim+c.ValueDim)*int64(c.Payload.DType().Size()) + 8 + 4 + 2*int64(c.Density.Size())
	if c.DescDim > 0 {
		perState += int64(c.DescDim) * 4
	}
	for h := range b.heads {
		n += 8 + int64(b.heads[h].n)*perState
	}
	return n
}

// WriteTo writes a snapshot of the bank to w, streaming: nothing larger than
// one head's density column is buffered (the body's length is known
// before it is written, its checksum computed as it is).
func (b *Bank) WriteTo(w io.Writer) (int64, error) {
	le := binary.LittleEndian
	c := b.cfg
	var hdr [snapHeader]byte
	copy(hdr[:8], snapMagic)
	le.PutUint32(hdr[8:], snapVersion)
	le.PutUint64(hdr[12:], uint64(b.bodyBytes()))
	cw := &rawio.CRCWriter{W: w}
	bw := bufio.NewWriterSize(cw, 1<<16)
	bw.Write(hdr[:])
	put := func(v any) { _ = binary.Write(bw, le, v) }
	put([]uint64{uint64(c.Heads), uint64(c.KeyDim), uint64(c.ValueDim), uint64(c.DescDim), uint64(c.Capacity), uint64(c.Workers)})
	put([]float64{c.Tau, c.Sigma, c.P, c.Eps, c.Delta})
	put([]uint8{uint8(c.Ordering), uint8(c.Baselines), uint8(c.Eviction), uint8(c.Prefix), uint8(c.Admission), uint8(c.Payload.DType()), uint8(c.Density)})
	put(b.updates)
	put(b.offered)
	var f32 []float32
	for h := range b.heads {
		hd := &b.heads[h]
		n := hd.n
		put(uint64(n))
		for _, p := range []*vectors{&hd.keys, &hd.vals} {
			if p.bf {
				rawio.Write(bw, p.b16[:n*p.dim])
			} else {
				rawio.Write(bw, p.f32[:n*p.dim])
			}
		}
		if c.DescDim > 0 {
			rawio.Write(bw, hd.desc[:n*c.DescDim])
		}
		rawio.Write(bw, hd.src[:n])
		rawio.Write(bw, hd.adm[:n])
		for _, d := range [][]float64{hd.rho[:n], hd.base[:n]} {
			if c.Density == F32 {
				f32 = slices.Grow(f32[:0], n)[:n]
				for i, v := range d {
					f32[i] = float32(v)
				}
				rawio.Write(bw, f32)
			} else {
				rawio.Write(bw, d)
			}
		}
	}
	err := bw.Flush()
	var tail [4]byte
	le.PutUint32(tail[:], cw.CRC)
	if err == nil {
		_, err = w.Write(tail[:])
		cw.N += 4
	}
	if err != nil {
		return cw.N, fmt.Errorf("bank: write snapshot: %w", err)
	}
	if want := b.SnapshotBytes(); cw.N != want {
		panic(fmt.Sprintf("bank: snapshot of %d bytes, its header says %d", cw.N, want))
	}
	return cw.N, nil
}

// ReadFrom replaces the bank's state (configuration included) with the
// snapshot read from r. On error the bank is unchanged.
func (b *Bank) ReadFrom(r io.Reader) (int64, error) {
	nb, n, err := load(r)
	if err != nil {
		return n, err
	}
	if b.pass != nil && !b.hostPasses {
		// The backend was built for b's configuration: it takes only a
		// snapshot of the same shapes and kernel, and loads its states.
		o, c := b.cfg, nb.cfg
		if o.Heads != c.Heads || o.KeyDim != c.KeyDim || o.DescDim != c.DescDim || o.Payload != c.Payload ||
			o.Capacity != c.Capacity || o.Sigma != c.Sigma || o.P != c.P || o.Eps != c.Eps {
			return n, fmt.Errorf("bank: snapshot of heads %d, key_dim %d, desc_dim %d, payload %d, M %d, σ %v, p %v, eps %v into a bank whose passes (%T) were built for heads %d, key_dim %d, desc_dim %d, payload %d, M %d, σ %v, p %v, eps %v",
				c.Heads, c.KeyDim, c.DescDim, c.Payload, c.Capacity, c.Sigma, c.P, c.Eps, b.pass, o.Heads, o.KeyDim, o.DescDim, o.Payload, o.Capacity, o.Sigma, o.P, o.Eps)
		}
		nb.pass, nb.hostPasses = b.pass, false
		for h := range nb.heads {
			nb.pass.Load(h, nb.set(h), nb.Keys(h), nb.Values(h))
		}
		if err := nb.pass.Err(); err != nil {
			b.broken = err
			return n, fmt.Errorf("bank: loading the snapshot's states into %T: %w", b.pass, err)
		}
	}
	*b = *nb
	return n, nil
}

// Load reads a bank from a snapshot.
func Load(r io.Reader) (*Bank, error) {
	b, _, err := load(r)
	return b, err
}

// snapChunk bounds how far an array being read may be allocated ahead of
// the bytes that have arrived (see readArray).
const snapChunk = 16 << 20

// load decodes a snapshot as it streams in. Each array goes straight into
// the new bank (no copy of the body is held: the peak is the bank itself),
// and its storage is allocated at most snapChunk bytes ahead of the data
// that has actually arrived, so that lengths and counts that lie cannot
// make it allocate much more than the snapshot holds. The checksum covers
// every byte; the states are checked (finite descriptors, densities,
// admission counters) only after it matched, so a damaged snapshot reports
// the checksum. r is read no further than the snapshot's end.
func load(r io.Reader) (*Bank, int64, error) {
	hdr, bodyLen, k, err := readSnapHeader(r)
	if err != nil {
		return nil, k, err
	}
	cr := &rawio.CountReader{R: io.LimitReader(r, int64(bodyLen)+4)}
	d := &snapDecoder{r: bufio.NewReaderSize(cr, 1<<16), left: int64(bodyLen), crc: crc32.Checksum(hdr[:], castagnoli)}
	read := func() int64 { return snapHeader + cr.N }
	cfg, err := d.config(bodyLen)
	if err != nil {
		return nil, read(), err
	}
	b, err := d.bank(cfg)
	if err != nil {
		return nil, read(), err
	}
	if err := d.checksum(); err != nil {
		return nil, read(), err
	}
	if err := b.checkLoaded(); err != nil {
		return nil, read(), err
	}
	return b, read(), nil
}

// snapFail is a snapshot's error: ErrSnapshot and what is wrong.
func snapFail(format string, args ...any) error {
	return fmt.Errorf("bank: read snapshot: %w: %s", ErrSnapshot, fmt.Sprintf(format, args...))
}

// readSnapHeader reads and checks a snapshot's header (magic, version) and
// returns it with the body's length and the bytes read.
func readSnapHeader(r io.Reader) (hdr [snapHeader]byte, bodyLen uint64, n int64, err error) {
	if k, err := io.ReadFull(r, hdr[:]); err != nil {
		return hdr, 0, int64(k), snapFail("header: %v", err)
	}
	le := binary.LittleEndian
	if string(hdr[:8]) != snapMagic {
		return hdr, 0, snapHeader, snapFail("magic %q", hdr[:8])
	}
	if v := le.Uint32(hdr[8:]); v != snapVersion {
		return hdr, 0, snapHeader, snapFail("unsupported version %d (want %d)", v, snapVersion)
	}
	bodyLen = le.Uint64(hdr[12:])
	const maxBody = 1 << 40
	if bodyLen > maxBody {
		return hdr, 0, snapHeader, snapFail("body length %d exceeds %d", bodyLen, int64(maxBody))
	}
	return hdr, bodyLen, snapHeader, nil
}

// config reads the bank's configuration and checks it, and that its
// heads can fit in the body's bodyLen bytes.
func (d *snapDecoder) config(bodyLen uint64) (Config, error) {
	var dims [6]uint64
	for i := range dims {
		dims[i] = d.u64()
	}
	var par [5]float64
	for i := range par {
		par[i] = math.Float64frombits(d.u64())
	}
	var en [7]uint8
	for i := range en {
		en[i] = d.u8()
	}
	if d.err != nil {
		return Config{}, snapFail("config: %v", d.err)
	}
	for i, v := range dims {
		if v > 1<<31 {
			return Config{}, snapFail("config field %d = %d too large", i, v)
		}
	}
	var payload Payload
	switch DType(en[5]) {
	case F32:
		payload = PayloadF32
	case BF16:
		payload = PayloadBF16
	default:
		return Config{}, snapFail("config: payload dtype %v must be f32 or bf16", DType(en[5]))
	}
	cfg := Config{
		Heads: int(dims[0]), KeyDim: int(dims[1]), ValueDim: int(dims[2]), DescDim: int(dims[3]), Capacity: int(dims[4]), Workers: int(dims[5]),
		Tau: par[0], Sigma: par[1], P: par[2], Eps: par[3], Delta: par[4],
		Ordering: Ordering(en[0]), Baselines: Baselines(en[1]), Eviction: Eviction(en[2]), Prefix: Prefix(en[3]),
		Admission: Admission(en[4]), Payload: payload, Density: DType(en[6]),
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, snapFail("%v", err)
	}
	// Bound the allocation by what the body can hold before New allocates.
	minPerHead := uint64(8)
	if uint64(cfg.Heads)*minPerHead > bodyLen {
		return Config{}, snapFail("%d heads cannot fit in %d bytes", cfg.Heads, bodyLen)
	}
	return cfg, nil
}

// bank reads the counters and every head's states into a new bank of cfg.
func (d *snapDecoder) bank(cfg Config) (*Bank, error) {
	updates := int32(d.u32())
	offered := int64(d.u64())
	if d.err != nil || updates < 0 || offered < 0 {
		return nil, snapFail("counters: updates %d offered %d %v", updates, offered, d.err)
	}
	b, err := New(cfg)
	if err != nil {
		return nil, snapFail("%v", err)
	}
	b.updates, b.offered = updates, offered
	for h := range b.heads {
		if err := d.head(b, h); err != nil {
			return nil, err
		}
	}
	if d.left != 0 {
		return nil, snapFail("%d trailing bytes", d.left)
	}
	return b, nil
}

// head reads head h's states into b.
func (d *snapDecoder) head(b *Bank, h int) error {
	cfg := b.cfg
	perState := uint64(cfg.KeyDim+cfg.ValueDim)*uint64(cfg.Payload.DType().Size()) + uint64(cfg.DescDim)*4 + 12 + 2*uint64(cfg.Density.Size())
	dd := cfg.descDim()
	hd := &b.heads[h]
	n64 := d.u64()
	if d.err != nil || n64 > uint64(cfg.Capacity) {
		return snapFail("head %d: occupancy %d (capacity %d) %v", h, n64, cfg.Capacity, d.err)
	}
	n := int(n64)
	if uint64(d.left) < uint64(n)*perState {
		return snapFail("head %d: %d states need %d bytes, %d left", h, n, uint64(n)*perState, d.left)
	}
	hd.n = n
	for _, p := range []*vectors{&hd.keys, &hd.vals} {
		if p.bf {
			p.b16 = readArray[uint16](d, n*p.dim)
		} else {
			p.f32 = readArray[float32](d, n*p.dim)
		}
	}
	switch {
	case cfg.DescDim > 0:
		hd.desc = readArray[float32](d, n*dd)
	case !b.descBF16() && d.err == nil:
		hd.desc = make([]float32, n*dd)
		for i := 0; i < n; i++ {
			hd.keys.get(i, hd.desc[i*dd:])
		}
	}
	hd.src = readArray[int64](d, n)
	hd.adm = readArray[int32](d, n)
	if cfg.Density == F32 {
		hd.rho, hd.base = widen(readArray[float32](d, n)), widen(readArray[float32](d, n))
	} else {
		hd.rho, hd.base = readArray[float64](d, n), readArray[float64](d, n)
	}
	if d.err != nil {
		return snapFail("head %d: %v", h, d.err)
	}
	hd.norms = make([]float32, n)
	return nil
}

// checksum reads the snapshot's checksum and compares it with the body's.
func (d *snapDecoder) checksum() error {
	var tail [4]byte
	if _, err := io.ReadFull(d.r, tail[:]); err != nil {
		return snapFail("truncated: no checksum: %v", err)
	}
	if got := binary.LittleEndian.Uint32(tail[:]); got != d.crc {
		return snapFail("checksum %08x, want %08x", got, d.crc)
	}
	return nil
}

// checkLoaded checks the states of a loaded bank (finite descriptors, whose
// norms it computes; densities, baselines, admission counters; a shared
// prefix's equal occupancies).
func (b *Bank) checkLoaded() error {
	dd := b.cfg.descDim()
	row := make([]float32, dd)
	for h := range b.heads {
		hd := &b.heads[h]
		for i := 0; i < hd.n; i++ {
			b.descRow(h, i, row)
			for _, v := range row {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return snapFail("head %d: non-finite descriptor at state %d", h, i)
				}
			}
			riesz.Norms(hd.norms[i:i+1], row, 1, dd)
		}
		for i := 0; i < hd.n; i++ {
			if !(hd.rho[i] >= 0) || math.IsInf(hd.rho[i], 0) || !(hd.base[i] > 0) || math.IsInf(hd.base[i], 0) {
				return snapFail("head %d state %d: density %v baseline %v", h, i, hd.rho[i], hd.base[i])
			}
			if hd.adm[i] < 0 || hd.adm[i] >= b.updates {
				return snapFail("head %d state %d: admitted at update %d of %d", h, i, hd.adm[i], b.updates)
			}
			if !(hd.norms[i] <= MaxNorm2) {
				return snapFail("head %d state %d: descriptor norm overflows", h, i)
			}
		}
	}
	if b.cfg.Prefix == PrefixShared {
		for h := range b.heads {
			if b.heads[h].n != b.heads[0].n {
				return snapFail("shared prefix but head %d holds %d states, head 0 %d", h, b.heads[h].n, b.heads[0].n)
			}
		}
	}
	return nil
}

// errTruncated is the snapDecoder's error for a body that ends early.
var errTruncated = errors.New("truncated: the data ends before the body length its header gives")

// snapDecoder reads a snapshot body from r: left counts the body bytes not
// yet read, crc runs over everything read; the first error sticks (reads
// after it return zeros).
type snapDecoder struct {
	r    *bufio.Reader
	left int64
	crc  uint32
	err  error
	buf  [8]byte
}

// Read reads body bytes (at most left), updating the checksum.
func (d *snapDecoder) Read(p []byte) (int, error) {
	if d.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if int64(len(p)) > d.left {
		p = p[:d.left]
	}
	k, err := d.r.Read(p)
	d.crc = crc32.Update(d.crc, castagnoli, p[:k])
	d.left -= int64(k)
	return k, err
}

// fill reads len(p) bytes into p, or zeros p and records that the body
// ended early.
func (d *snapDecoder) fill(p []byte) {
	if d.err == nil {
		if _, err := io.ReadFull(d, p); err != nil {
			d.err = errTruncated
		}
	}
	if d.err != nil {
		clear(p)
	}
}

func (d *snapDecoder) u8() uint8   { d.fill(d.buf[:1]); return d.buf[0] }
func (d *snapDecoder) u32() uint32 { d.fill(d.buf[:4]); return binary.LittleEndian.Uint32(d.buf[:4]) }
func (d *snapDecoder) u64() uint64 { d.fill(d.buf[:8]); return binary.LittleEndian.Uint64(d.buf[:8]) }

// readArray reads n little-endian values. The slice is allocated whole
// when it is at most snapChunk bytes, else grown (to exactly n in the end)
// as the data arrives, never more than snapChunk bytes ahead of it.
func readArray[T rawio.Number](d *snapDecoder, n int) []T {
	if d.err != nil || n == 0 {
		return nil
	}
	step := max(1, snapChunk/int(unsafe.Sizeof(*new(T))))
	s := make([]T, 0, min(n, step))
	for len(s) < n {
		k := min(step, n-len(s))
		if len(s)+k > cap(s) {
			t := make([]T, len(s), min(n, max(2*cap(s), len(s)+k)))
			copy(t, s)
			s = t
		}
		s = s[:len(s)+k]
		if err := rawio.ReadFull(d, s[len(s)-k:]); err != nil {
			d.err = errTruncated
			return nil
		}
	}
	return s
}

// widen converts float32 densities to the bank's float64 bookkeeping.
func widen(x []float32) []float64 {
	if x == nil {
		return nil
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// SaveFile writes a snapshot atomically (package atomicfile: a synced
// temporary file in the same folder renamed over path), so a crash or a
// failed write leaves the previous snapshot intact.
func (b *Bank) SaveFile(path string) error {
	if err := atomicfile.Write(path, func(w io.Writer) error {
		_, err := b.WriteTo(w)
		return err
	}); err != nil {
		return fmt.Errorf("bank: save: %w", err)
	}
	return nil
}

// LoadFile reads a bank from a snapshot file written by SaveFile.
func LoadFile(path string) (*Bank, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bank: load %s: %w", path, err)
	}
	defer f.Close()
	b, err := Load(f)
	if err != nil {
		return nil, fmt.Errorf("bank: load %s: %w", path, err)
	}
	return b, nil
}
