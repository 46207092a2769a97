package gpu

import (
	"fmt"

	"github.com/densitykv/densitykv/riesz"
	"github.com/densitykv/densitykv/vulkan"
)

// The bank.Passes methods of BankPasses. Each runs under the lock, does
// nothing once a pass failed, and records a device error for Err.

// Candidates uploads head h's candidates.
func (p *BankPasses) Candidates(h int, cand riesz.Set) {
	p.run("Candidates", h, func(hd *bankHead) {
		p.claim(hd)
		hd.nc = cand.N
		p.upSet(p.set(hd, "cand", "candNorms", cand.N), 0, cand)
	})
}

// Score runs RieszRowStatsCached of the candidates against the head's bank,
// keeping the interactions on the device for Scan and PrefixSums.
func (p *BankPasses) Score(h int, cand, bk riesz.Set, inv []float32, ext, mean, mx []float64, _ []float32, _ *riesz.Workspace) {
	p.run("Score", h, func(hd *bankHead) {
		p.mine(hd)
		sameN("the bank", bk.N, hd.n)
		sameN("the candidates", cand.N, hd.nc)
		n, m := hd.nc, hd.n
		invB := p.buf(hd, "inv", int64(m)*4)
		check(p.dev.UploadFloat32s(invB, 0, inv[:m]))
		extB, meanB, maxB := p.buf(hd, "ext", int64(n)*8), p.buf(hd, "mean", int64(n)*8), p.buf(hd, "max", int64(n)*8)
		p.upF64(extB, ext[:n])
		batch := p.dev.NewBatch()
		check(RieszRowStatsCached(p.dev, batch, p.k, p.set(hd, "cand", "candNorms", n), p.bankSet(hd, m),
			invB, extB, meanB, maxB, p.buf(hd, "cache", int64(n)*int64(m)*4)))
		runBatch(batch)
		p.downF64(ext[:n], extB, 0)
		if mean != nil {
			p.downF64(mean[:n], meanB, 0)
		}
		if mx != nil {
			p.downF64(mx[:n], maxB, 0)
		}
	})
}

// Scan runs RieszScanRows over the interactions kept by Score; the
// checkpoints stay on the device (PrefixSums reads them), the crossing
// points come back.
func (p *BankPasses) Scan(h int, rows []int32, _, bk riesz.Set, rem []float64, cross []int32, every int, _ []float64, _ []float32, _ *riesz.Workspace) {
	p.run("Scan", h, func(hd *bankHead) {
		p.mine(hd)
		sameN("the bank", bk.N, hd.n)
		m, R := hd.n, len(rows)
		hd.scanned, hd.every = R, every
		if m == 0 {
			return
		}
		rowsB := p.buf(hd, "rows", int64(R)*4)
		u := make([]uint32, R)
		for i, x := range rows {
			u[i] = uint32(x)
		}
		if R > 0 {
			check(p.dev.UploadUint32s(rowsB, 0, u))
		}
		remB := p.buf(hd, "rem", int64(m)*8)
		p.upF64(remB, rem[:m])
		crossB := p.buf(hd, "cross", int64(m)*4)
		slots := (R + every - 1) / every // with the final sums
		batch := p.dev.NewBatch()
		check(RieszScanRows(p.dev, batch, p.buf(hd, "cache", int64(hd.nc)*int64(m)*4), hd.nc, m, rowsB, R, remB, crossB, every,
			p.buf(hd, "ckpt", int64(slots)*int64(m)*8)))
		runBatch(batch)
		c := make([]uint32, m)
		check(p.dev.DownloadUint32s(crossB, 0, c))
		for i, v := range c {
			cross[i] = int32(v)
		}
	})
}

// PrefixSums reads S_i(r) from the scan's checkpoints on the device, or
// scans the first r rows again (the same additions in the same order as
// the CPU's checkpoint plus column sums) when r falls between them.
func (p *BankPasses) PrefixSums(h, r int, _, bk riesz.Set, every int, _ []float64, sums []float64, _ *riesz.Workspace) {
	p.run("PrefixSums", h, func(hd *bankHead) {
		p.mine(hd)
		sameN("the bank", bk.N, hd.n)
		m := hd.n
		if every != hd.every || r > hd.scanned {
			check(fmt.Errorf("sums of %d rows every %d after a scan of %d rows every %d", r, every, hd.scanned, hd.every))
		}
		switch {
		case r == 0:
			clear(sums[:m])
		case r == hd.scanned && r%every != 0:
			p.downF64(sums[:m], hd.sc.bufs["ckpt"], int64(r/every)*int64(m))
		case r%every == 0:
			p.downF64(sums[:m], hd.sc.bufs["ckpt"], int64(r/every-1)*int64(m))
		default:
			ck := p.buf(hd, "ckpt2", int64(r/every+1)*int64(m)*8)
			batch := p.dev.NewBatch()
			check(RieszScanRows(p.dev, batch, hd.sc.bufs["cache"], hd.nc, m, hd.sc.bufs["rows"], r, hd.sc.bufs["rem"],
				p.buf(hd, "cross2", int64(m)*4), every, ck))
			runBatch(batch)
			p.downF64(sums[:m], ck, int64(r/every)*int64(m))
		}
	})
}

// OfferSums records an error: sequential admission has no device path
// (NewBank refuses it).
func (p *BankPasses) OfferSums(h int, _, _ riesz.Set, _ []float64, _ *riesz.Workspace) {
	p.run("OfferSums", h, func(*bankHead) {
		check(fmt.Errorf("sequential admission has no device path"))
	})
}

// Commit rebuilds head h's bank on the device: the survivors' rows copied
// from the bank before, then the fresh states uploaded; the evicted rows
// are gathered for EvictedSums.
func (p *BankPasses) Commit(h int, kept, evicted []int32, fresh riesz.Set, keys, values []float32) {
	p.run("Commit", h, func(hd *bankHead) {
		p.claim(hd)
		if len(kept)+len(evicted) != hd.n {
			check(fmt.Errorf("%d kept and %d evicted of %d states", len(kept), len(evicted), hd.n))
		}
		old, nw := hd.cur, 1-hd.cur
		fr := p.set(hd, "fresh", "freshNorms", fresh.N)
		p.upSet(fr, 0, fresh)
		ev := p.set(hd, "ev", "evNorms", len(evicted))
		row := int64(p.dd) * 4
		batch := p.dev.NewBatch()
		// copyRuns copies rows idx of src (rows of size bytes) to rows 0,
		// 1, … of dst.
		copyRuns := func(dst, src *vulkan.Buffer, size int64, idx []int32) {
			for i := 0; i < len(idx); {
				j := i + 1
				for j < len(idx) && idx[j] == idx[j-1]+1 {
					j++
				}
				batch.Copy(dst, int64(i)*size, src, int64(idx[i])*size, int64(j-i)*size)
				i = j
			}
		}
		kb, vb := int64(p.dk)*4, int64(p.dv)*4
		copyRuns(hd.desc[nw], hd.desc[old], row, kept)
		copyRuns(hd.norms[nw], hd.norms[old], 4, kept)
		copyRuns(hd.keys[nw], hd.keys[old], kb, kept)
		copyRuns(hd.vals[nw], hd.vals[old], vb, kept)
		copyRuns(ev.X, hd.desc[old], row, evicted)
		copyRuns(ev.Norms, hd.norms[old], 4, evicted)
		w0 := int64(len(kept))
		batch.Copy(hd.desc[nw], w0*row, fr.X, 0, int64(fresh.N)*row)
		batch.Copy(hd.norms[nw], w0*4, fr.Norms, 0, int64(fresh.N)*4)
		runBatch(batch)
		// The fresh keys and values go straight to their rows (the
		// copies above wrote only the rows before w0).
		if fresh.N > 0 {
			check(p.dev.UploadFloat32s(hd.keys[nw], w0*kb, keys[:fresh.N*p.dk]))
			check(p.dev.UploadFloat32s(hd.vals[nw], w0*vb, values[:fresh.N*p.dv]))
		}
		hd.cur, hd.n, hd.ne, hd.nf = nw, len(kept)+fresh.N, len(evicted), fresh.N
	})
}

// EvictedSums runs RieszRowSums of the final bank's first final.N states
// against the evicted states gathered by Commit.
func (p *BankPasses) EvictedSums(h int, final, evicted riesz.Set, out []float64, _ *riesz.Workspace) {
	p.run("EvictedSums", h, func(hd *bankHead) {
		p.mine(hd)
		sameN("the evicted set", evicted.N, hd.ne)
		if final.N > hd.n {
			check(fmt.Errorf("sums over %d of %d states", final.N, hd.n))
		}
		sub := p.buf(hd, "sub", int64(final.N)*8)
		p.upF64(sub, out[:final.N])
		batch := p.dev.NewBatch()
		check(RieszRowSums(p.dev, batch, p.k, p.bankSet(hd, final.N), p.set(hd, "ev", "evNorms", hd.ne), sub))
		runBatch(batch)
		p.downF64(out[:final.N], sub, 0)
	})
}

// SelfSums computes the fresh states' interactions among themselves on
// the device (RieszRowStatsCached of the set against itself) and reduces
// them on the host in riesz.SelfSums's order (riesz.SelfSumsMatrix).
func (p *BankPasses) SelfSums(h int, fresh riesz.Set, out []float64, _ *riesz.Workspace) {
	p.run("SelfSums", h, func(hd *bankHead) {
		p.mine(hd)
		sameN("the fresh set", fresh.N, hd.nf)
		n := fresh.N
		if n < 2 {
			return
		}
		fr := p.set(hd, "fresh", "freshNorms", n)
		wB := p.buf(hd, "self", int64(n)*int64(n)*4)
		batch := p.dev.NewBatch()
		check(RieszRowStatsCached(p.dev, batch, p.k, fr, fr, p.buf(hd, "selfInv", int64(n)*4),
			p.buf(hd, "selfSum", int64(n)*8), p.buf(hd, "selfMean", int64(n)*8), p.buf(hd, "selfMax", int64(n)*8), wB))
		runBatch(batch)
		w := make([]float32, n*n)
		check(p.dev.DownloadFloat32s(wB, 0, w))
		riesz.SelfSumsMatrix(w, n, out)
	})
}

// Load uploads head h's states (a snapshot read into the bank).
func (p *BankPasses) Load(h int, bk riesz.Set, keys, values []float32) {
	p.run("Load", h, func(hd *bankHead) {
		if bk.N > 0 && (bk.D != p.dd || len(keys) != bk.N*p.dk || len(values) != bk.N*p.dv) {
			check(fmt.Errorf("%d states of dimension %d with %d key and %d value values, want dimension %d, key_dim %d, value_dim %d",
				bk.N, bk.D, len(keys), len(values), p.dd, p.dk, p.dv))
		}
		p.upSet(p.bankSet(hd, bk.N), 0, bk)
		if bk.N > 0 {
			check(p.dev.UploadFloat32s(hd.keys[hd.cur], 0, keys))
			check(p.dev.UploadFloat32s(hd.vals[hd.cur], 0, values))
		}
		hd.n, hd.nc, hd.ne, hd.nf, hd.scanned = bk.N, 0, 0, 0, 0
	})
}
