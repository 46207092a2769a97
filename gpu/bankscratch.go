package gpu

import (
	"fmt"
	"sync"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/riesz"
	"github.com/densitykv/densitykv/vulkan"
)

// bankScratch is the update scratch of every bank (BankPasses) on one
// device, one set of buffers per head index, grown on demand to the
// largest update; mu is the banks' lock. At the paper's scale (N = 4,680
// candidates, M = 9,360) a head's candidate×bank interactions alone are
// 175 MB: one set for a device, not one per layer's bank.
type bankScratch struct {
	mu    sync.Mutex
	dev   *vulkan.Device
	heads []*headScratch // grown to the largest bank's heads
	banks int            // live banks using it
}

// headScratch is one head's scratch buffers, by name, and the bank whose
// update last wrote them.
type headScratch struct {
	bufs  map[string]*vulkan.Buffer
	owner *BankPasses
}

// bankScratches holds each device's bankScratch while it has banks.
var bankScratches = struct {
	sync.Mutex
	m map[*vulkan.Device]*bankScratch
}{m: map[*vulkan.Device]*bankScratch{}}

// joinScratch returns dev's shared scratch, made on the first bank, grown
// to p's heads, counting p among its banks.
func joinScratch(dev *vulkan.Device, p *BankPasses) *bankScratch {
	bankScratches.Lock()
	defer bankScratches.Unlock()
	sh := bankScratches.m[dev]
	if sh == nil {
		sh = &bankScratch{dev: dev}
		bankScratches.m[dev] = sh
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for len(sh.heads) < len(p.heads) {
		sh.heads = append(sh.heads, &headScratch{bufs: map[string]*vulkan.Buffer{}})
	}
	sh.banks++
	return sh
}

// leave removes p from the scratch's banks (bankScratches and sh.mu held),
// freeing the buffers with the last bank.
func (sh *bankScratch) leave(p *BankPasses) {
	for _, hs := range sh.heads {
		if hs.owner == p {
			hs.owner = nil
		}
	}
	if sh.banks--; sh.banks > 0 {
		return
	}
	for _, hs := range sh.heads {
		for _, b := range hs.bufs {
			b.Free()
		}
		clear(hs.bufs)
	}
	if bankScratches.m[sh.dev] == sh {
		delete(bankScratches.m, sh.dev)
	}
}

// claim makes the head's scratch this bank's: a pass that starts an
// update's use of it (Candidates, Commit) writes it before reading.
func (p *BankPasses) claim(hd *bankHead) { hd.sc.owner = p }

// mine checks that the head's scratch still holds this bank's update: a
// pass that reads what an earlier pass left there fails when another
// bank of the device wrote it in between.
func (p *BankPasses) mine(hd *bankHead) {
	if hd.sc.owner != p {
		check(fmt.Errorf("the device's shared bank scratch was written by another bank's update since this update's previous pass (the banks of one device must update one at a time)"))
	}
}

// scratchBanks returns how many banks share dev's scratch, and how many
// bytes its buffers hold (for tests).
func scratchBanks(dev *vulkan.Device) (banks int, bytes int64) {
	bankScratches.Lock()
	sh := bankScratches.m[dev]
	bankScratches.Unlock()
	if sh == nil {
		return 0, 0
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, hs := range sh.heads {
		for _, b := range hs.bufs {
			bytes += b.Size()
		}
	}
	return sh.banks, bytes
}

// BankBytes returns the device memory of a bank of configuration cfg
// (NewBank): perBank, its own states (descriptors, norms, keys and values
// at the capacity M per head, twice: an update rebuilds the bank beside
// the one before); and scratch, the update scratch for blocks of
// candidates per head (shared by every bank of the device, held once):
// the candidates, the candidate×bank interactions, the scan's
// checkpoints, the evicted, fresh and admitted states' passes, each with
// the eighth buf allocates ahead. At the paper's scale (12 heads, d = 128,
// M = 9,360, N = 4,680): 346 MB a bank and 3.8 GB of scratch.
func BankBytes(cfg bank.Config, candidates int) (perBank, scratch int64) {
	dd := cfg.KeyDim
	if cfg.DescDim > 0 {
		dd = cfg.DescDim
	}
	H, M, N := int64(cfg.Heads), int64(cfg.Capacity), int64(max(candidates, 0))
	D, dk, dv := int64(dd), int64(cfg.KeyDim), int64(cfg.ValueDim)
	perBank = 2 * H * M * (D + 1 + dk + dv) * 4
	R := min(N, M)
	slots := (R + riesz.TileRows - 1) / riesz.TileRows
	grow := func(b int64) int64 { b = max(b, 16); return b + b/8 }
	var head int64
	for _, b := range []int64{
		N * D * 4, N * 4, // the candidates
		M * 4, 3 * N * 8, N * M * 4, // Score: inverse baselines, ext, mean, max; the interactions
		R * 4, M * 8, M * 4, (slots + 1) * M * 8, // Scan: rows, remaining, crossings, checkpoints
		(slots + 1) * M * 8, M * 4, // PrefixSums between checkpoints
		R * D * 4, R * 4, M * D * 4, M * 4, M * 8, // Commit and EvictedSums: fresh, evicted, sums
		R * R * 4, R * 4, 3 * R * 8, // SelfSums
	} {
		head += grow(b)
	}
	return perBank, H * head
}
