package bank

import (
	"sync"

	"github.com/densitykv/densitykv/riesz"
)

// transient is the per-update workspace of a bank: per-head step buffers
// (headWork), the prefix plan, and one riesz.Workspace and interaction
// cache per worker. A bank borrows one from
// a package pool for the duration of an update, so a model with many layers
// (one bank each) keeps one set alive, not one per layer.
type transient struct {
	work  []headWork
	plan  prefixPlan
	ws    []riesz.Workspace
	cache [][]float32
}

// pool holds idle transients; at most poolKeep are kept.
var pool struct {
	sync.Mutex
	free []*transient
}

const poolKeep = 2

// acquire borrows a transient workspace sized for the bank.
func (b *Bank) acquire() {
	pool.Lock()
	var t *transient
	if n := len(pool.free); n > 0 {
		t = pool.free[n-1]
		pool.free = pool.free[:n-1]
	}
	pool.Unlock()
	if t == nil {
		t = &transient{}
	}
	H, W := b.cfg.Heads, b.cfg.WorkerCount()
	if len(t.work) < H {
		t.work = append(t.work, make([]headWork, H-len(t.work))...)
	}
	if len(t.ws) < W {
		t.ws = append(t.ws, make([]riesz.Workspace, W-len(t.ws))...)
	}
	if len(t.cache) < W {
		t.cache = append(t.cache, make([][]float32, W-len(t.cache))...)
	}
	b.tr = t
	b.work, b.plan, b.ws, b.cache = t.work[:H], t.plan, t.ws[:W], t.cache[:W]
}

// release returns the bank's transient workspace to the pool.
func (b *Bank) release() {
	t := b.tr
	if t == nil {
		return
	}
	t.plan = b.plan // its buffers go back with the rest
	b.tr, b.work, b.plan, b.ws, b.cache = nil, nil, prefixPlan{}, nil, nil
	pool.Lock()
	if len(pool.free) < poolKeep {
		pool.free = append(pool.free, t)
	}
	pool.Unlock()
}

// FreeScratch drops the pooled per-update workspaces (step buffers, tile buffers
// and interaction caches: about 0.5 GB after paper-scale updates) so the
// garbage collector can reclaim them; the next update allocates afresh.
func FreeScratch() {
	pool.Lock()
	pool.free = nil
	pool.Unlock()
}
