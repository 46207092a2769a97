package bank

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// stream generates blocks of video-like or random keys. Values carry the
// source id in channel 0 so that pairing can be checked.
type stream struct {
	rng       *rand.Rand
	cfg       Config
	clustered bool
	centres   [][]float64 // per head × cluster, flattened [k][d]
	next      int64
	maxN      int
}

func newStream(cfg Config, seed uint64, clustered bool, maxN int) *stream {
	s := &stream{rng: rand.New(rand.NewPCG(seed, 99)), cfg: cfg, clustered: clustered, maxN: maxN}
	s.centres = make([][]float64, cfg.Heads)
	for h := range s.centres {
		s.centres[h] = make([]float64, 4*cfg.KeyDim)
		for i := range s.centres[h] {
			s.centres[h][i] = s.rng.NormFloat64() * 2
		}
	}
	return s
}

func (s *stream) block() Block {
	c := s.cfg
	// Mostly small blocks (partial admission, capacity pressure), sometimes
	// blocks larger than the bank (flushes).
	n := 1 + s.rng.IntN(max(1, s.maxN/3))
	if s.rng.IntN(3) == 0 {
		n = 1 + s.rng.IntN(s.maxN)
	}
	H, dk, dv, dd := c.Heads, c.KeyDim, c.ValueDim, c.DescDim
	blk := Block{Keys: make([]float32, H*n*dk), Values: make([]float32, H*n*dv), Source: make([]int64, n)}
	if dd > 0 {
		blk.Desc = make([]float32, H*n*dd)
	}
	for x := 0; x < n; x++ {
		blk.Source[x] = s.next
		s.next++
	}
	for h := 0; h < H; h++ {
		if s.clustered { // slow drift of the cluster centres
			for i := range s.centres[h] {
				s.centres[h][i] += s.rng.NormFloat64() * 0.05
			}
		}
		for x := 0; x < n; x++ {
			k := blk.Keys[(h*n+x)*dk : (h*n+x+1)*dk]
			cl := s.rng.IntN(4)
			for i := range k {
				if s.clustered {
					k[i] = float32(s.centres[h][cl*dk+i] + s.rng.NormFloat64()*0.3)
				} else {
					k[i] = float32(s.rng.NormFloat64())
				}
			}
			v := blk.Values[(h*n+x)*dv : (h*n+x+1)*dv]
			v[0] = float32(blk.Source[x])
			for i := 1; i < dv; i++ {
				v[i] = float32(s.rng.NormFloat64())
			}
			if dd > 0 {
				ds := blk.Desc[(h*n+x)*dd : (h*n+x+1)*dd]
				for i := range ds {
					ds[i] = k[i%dk] + 0.5*float32(s.rng.NormFloat64())
				}
			}
		}
	}
	return blk
}

// oracleCands converts a block to the oracle's per-head candidates, with the
// payload rounding the bank applies.
func oracleCands(cfg Config, blk Block) [][]oCand {
	H, dk, dv, dd := cfg.Heads, cfg.KeyDim, cfg.ValueDim, cfg.DescDim
	n := len(blk.Keys) / (H * dk)
	rd := func(v float32) float64 {
		if cfg.Payload == PayloadBF16 {
			return float64(RoundBF16(v))
		}
		return float64(v)
	}
	out := make([][]oCand, H)
	for h := range out {
		out[h] = make([]oCand, n)
		for x := 0; x < n; x++ {
			c := oCand{src: blk.Source[x]}
			for _, v := range blk.Keys[(h*n+x)*dk : (h*n+x+1)*dk] {
				c.key = append(c.key, rd(v))
			}
			for _, v := range blk.Values[(h*n+x)*dv : (h*n+x+1)*dv] {
				c.val = append(c.val, rd(v))
			}
			if dd > 0 {
				for _, v := range blk.Desc[(h*n+x)*dd : (h*n+x+1)*dd] {
					c.desc = append(c.desc, float64(v))
				}
			} else {
				c.desc = c.key
			}
			out[h][x] = c
		}
	}
	return out
}

type variant struct {
	name string
	mod  func(*Config)
}

var variants = []variant{
	{"default", func(c *Config) {}},
	{"max", func(c *Config) { c.Ordering = OrderMax }},
	{"source", func(c *Config) { c.Ordering = OrderSource }},
	{"refresh", func(c *Config) { c.Baselines = BaselinesRefresh }},
	{"densest", func(c *Config) { c.Eviction = EvictDensest }},
	{"mandsource", func(c *Config) { c.Eviction = EvictMandatorySource }},
	{"perhead", func(c *Config) { c.Prefix = PrefixPerHead }},
	{"sequential", func(c *Config) { c.Admission = AdmitSequential }},
	{"seqperhead", func(c *Config) { c.Admission = AdmitSequential; c.Prefix = PrefixPerHead }},
	{"bf16f32", func(c *Config) { c.Payload = PayloadBF16; c.Density = F32 }},
	{"desc", func(c *Config) { c.DescDim = 5 }},
	{"p1", func(c *Config) { c.P = 1; c.Tau = 1.5 }},
	{"p4", func(c *Config) { c.P = 4; c.Tau = 3 }},
	{"p2.5", func(c *Config) { c.P = 2.5 }},
	{"tight", func(c *Config) { c.Tau = 1.1 }},
	{"nocache", func(c *Config) { c.CacheBytes = -1; c.Tau = 1.3 }},
	{"seqp4", func(c *Config) { c.Admission = AdmitSequential; c.P = 4; c.Tau = 3 }},
	{"perheadtight", func(c *Config) { c.Prefix = PrefixPerHead; c.Tau = 1.3 }},
	{"densesttight", func(c *Config) { c.Eviction = EvictDensest; c.Tau = 1.3 }},
	{"refreshp1", func(c *Config) { c.Baselines = BaselinesRefresh; c.P = 1; c.Tau = 1.5 }},
	{"maxsourcep1", func(c *Config) { c.Ordering = OrderMax; c.Eviction = EvictMandatorySource; c.P = 1; c.Tau = 1.5 }},
}

func smallConfig() Config {
	return Config{Heads: 3, KeyDim: 6, ValueDim: 3, Capacity: 24, Tau: 2, Sigma: 1.5, P: 2, Eps: 1, Delta: 1e-6,
		Payload: PayloadF32, Density: F64, Workers: 2}
}

// TestOracleAndInvariants runs random and clustered streams through the bank
// and the literal oracle for every variant and checks decisions, densities
// and the invariants after every update.
func TestOracleAndInvariants(t *testing.T) {
	seeds := 6
	updates := 14
	if testing.Short() {
		seeds, updates = 3, 10
	}
	var seen reportTally
	for _, v := range variants {
		for _, kind := range []string{"random", "clustered"} {
			for seed := 0; seed < seeds; seed++ {
				name := fmt.Sprintf("%s/%s/seed=%d", v.name, kind, seed)
				t.Run(name, func(t *testing.T) {
					cfg := smallConfig()
					v.mod(&cfg)
					cfg.Workers = 1 + seed%3
					seen.add(v.name, checkStream(t, cfg, uint64(seed), kind, updates, 36))
				})
			}
		}
	}
	// The comparisons above are only meaningful if every report occurred
	// (floor-baseline states need exact geometry: TestFloorStatesAgainstOracle).
	for _, c := range []struct {
		what string
		n    int
	}{
		{"empty-bank update", seen.all.empty},
		{"flushed update", seen.all.flushed},
		{"mandatory eviction", seen.all.mandatory},
		{"capacity eviction", seen.all.capacity},
		{"infeasible update (densest-only eviction)", seen.densest.infeasible},
		{"violator kept by densest-only eviction", seen.densest.violatorsKept},
	} {
		if c.n == 0 {
			t.Errorf("no %s in any stream: the decision-record comparison is vacuous", c.what)
		}
	}
}

// reports counts decision-record reports over a stream.
type reports struct {
	empty, flushed, infeasible, floorBlocked int
	mandatory, capacity, floorStates         int
	violatorsKept                            int // violators not evicted
}

type reportTally struct {
	sync.Mutex
	all, densest reports
}

func (r *reports) add(o reports) {
	r.empty += o.empty
	r.flushed += o.flushed
	r.infeasible += o.infeasible
	r.floorBlocked += o.floorBlocked
	r.mandatory += o.mandatory
	r.capacity += o.capacity
	r.floorStates += o.floorStates
	r.violatorsKept += o.violatorsKept
}

func (t *reportTally) add(variant string, r reports) {
	t.Lock()
	defer t.Unlock()
	t.all.add(r)
	if strings.HasPrefix(variant, "densest") {
		t.densest.add(r)
	}
}

// b2i converts a report flag to a count.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkStream runs a stream of the given kind (random or clustered)
// through the bank and the oracle and returns the reports seen.
func checkStream(t *testing.T, cfg Config, seed uint64, kind string, updates, maxN int) reports {
	t.Helper()
	st := newStream(cfg, seed, kind == "clustered", maxN)
	return checkBlocks(t, cfg, updates, st.block)
}

// checkBlocks feeds updates blocks from next to the bank and the oracle and
// checks decisions, decision records, densities and the invariants after
// every update; it returns the reports seen.
func checkBlocks(t *testing.T, cfg Config, updates int, next func() Block) (seen reports) {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := &oracle{cfg: cfg, heads: make([][]oEntry, cfg.Heads)}
	keyOf := map[[2]int64][]float32{} // (head, source) → stored key
	densTol := func(got, want float64) bool {
		tol := 1e-4
		if cfg.Density == F32 {
			tol = 2e-4
		}
		return math.Abs(got-want) <= tol*math.Abs(want)+1e-6
	}
	for u := 0; u < updates; u++ {
		blk := next()
		n := len(blk.Source)
		oc := oracleCands(cfg, blk)
		for h := range oc {
			for x := 0; x < n; x++ {
				k := make([]float32, cfg.KeyDim)
				for i, v := range oc[h][x].key {
					k[i] = float32(v)
				}
				keyOf[[2]int64{int64(h), blk.Source[x]}] = k
			}
		}
		dec, err := b.Update(blk)
		if err != nil {
			t.Fatalf("update %d: %v", u, err)
		}
		od := o.update(oc)
		if dec.Accepted != od.accepted {
			t.Fatalf("update %d (N=%d): accepted %d, oracle %d", u, n, dec.Accepted, od.accepted)
		}
		for _, f := range []struct {
			name      string
			got, want bool
		}{
			{"Empty", dec.Empty, od.empty},
			{"Flushed", dec.Flushed, od.flushed},
			{"Infeasible", dec.Infeasible, od.infeasible},
			{"FloorBlocked", dec.FloorBlocked, od.floorBlocked},
		} {
			if f.got != f.want {
				t.Fatalf("update %d (N=%d): %s %v, oracle %v", u, n, f.name, f.got, f.want)
			}
		}
		seen.empty += b2i(od.empty)
		seen.flushed += b2i(od.flushed)
		seen.infeasible += b2i(od.infeasible)
		seen.floorBlocked += b2i(od.floorBlocked)
		for h := 0; h < cfg.Heads; h++ {
			hd := dec.Heads[h]
			if !slices.Equal(hd.Admitted, od.admitted[h]) && !(len(hd.Admitted) == 0 && len(od.admitted[h]) == 0) {
				t.Fatalf("update %d head %d: admitted %v, oracle %v", u, h, hd.Admitted, od.admitted[h])
			}
			ev := slices.Clone(hd.Evicted)
			slices.Sort(ev)
			if !slices.Equal(ev, od.evicted[h]) && !(len(ev) == 0 && len(od.evicted[h]) == 0) {
				t.Fatalf("update %d head %d: evicted %v, oracle %v", u, h, ev, od.evicted[h])
			}
			if hd.Mandatory != od.mandatory[h] || hd.Capacity != od.capacity[h] || hd.Violators != od.violators[h] || hd.FloorStates != od.floorStates[h] {
				t.Fatalf("update %d head %d: mandatory %d capacity %d violators %d floor states %d, oracle %d %d %d %d", u, h,
					hd.Mandatory, hd.Capacity, hd.Violators, hd.FloorStates, od.mandatory[h], od.capacity[h], od.violators[h], od.floorStates[h])
			}
			if hd.Mandatory+hd.Capacity != len(hd.Evicted) {
				t.Fatalf("update %d head %d: mandatory %d + capacity %d != %d evicted", u, h, hd.Mandatory, hd.Capacity, len(hd.Evicted))
			}
			seen.mandatory += hd.Mandatory
			seen.capacity += hd.Capacity
			seen.floorStates += hd.FloorStates
			seen.violatorsKept += hd.Violators - hd.Mandatory
			ents := b.Entries(h)
			oe := o.heads[h]
			if len(ents) != len(oe) {
				t.Fatalf("update %d head %d: %d entries, oracle %d", u, h, len(ents), len(oe))
			}
			keys := b.Keys(h)
			vals := b.Values(h)
			desc := b.Descriptors(h)
			dd := cfg.descDim()
			for i, e := range ents {
				if e.Source != oe[i].src || e.Admitted != oe[i].adm {
					t.Fatalf("update %d head %d slot %d: source %d adm %d, oracle %d %d (storage order)", u, h, i, e.Source, e.Admitted, oe[i].src, oe[i].adm)
				}
				if !densTol(e.Density, oe[i].rho) || !densTol(e.Baseline, oe[i].base) {
					t.Fatalf("update %d head %d slot %d: density %g baseline %g, oracle %g %g", u, h, i, e.Density, e.Baseline, oe[i].rho, oe[i].base)
				}
				// Values stay paired with their keys.
				if vals[i*cfg.ValueDim] != float32(e.Source) {
					t.Fatalf("update %d head %d slot %d: value[0] %v for source %d", u, h, i, vals[i*cfg.ValueDim], e.Source)
				}
				if !slices.Equal(keys[i*cfg.KeyDim:(i+1)*cfg.KeyDim], keyOf[[2]int64{int64(h), e.Source}]) {
					t.Fatalf("update %d head %d slot %d: key does not belong to source %d", u, h, i, e.Source)
				}
				// Cached density equals a from-scratch recomputation.
				var phi float64
				for j := range ents {
					if j != i {
						phi += o.w(f64(desc[i*dd:(i+1)*dd]), f64(desc[j*dd:(j+1)*dd]))
					}
				}
				if !densTol(e.Density, phi) {
					t.Fatalf("update %d head %d slot %d: cached density %g, recomputed %g", u, h, i, e.Density, phi)
				}
				// Growth invariant after commit.
				if cfg.Eviction != EvictDensest && e.Density >= cfg.Tau*math.Max(e.Baseline, cfg.Delta) {
					t.Fatalf("update %d head %d slot %d: ratio %g ≥ τ = %g", u, h, i, e.Density/e.Baseline, cfg.Tau)
				}
			}
			if len(ents) > cfg.Capacity {
				t.Fatalf("update %d head %d: occupancy %d > M = %d", u, h, len(ents), cfg.Capacity)
			}
			if cfg.Prefix == PrefixShared && len(ents) != b.Len() {
				t.Fatalf("update %d: head %d occupancy %d != head 0's %d", u, h, len(ents), b.Len())
			}
		}
		if got, want := b.Bytes(), int64(0); got < want {
			t.Fatal("negative bytes")
		}
	}
	return seen
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// TestFloorStatesAgainstOracle checks the floor-baseline reports against the
// oracle on a scripted stream with exact geometry: integer keys (float32
// norms, dots and squared distances are exact) around the origin and one
// state far out at (300, 0), whose density (≈ 1e-8) is below δ, so it is
// admitted at the floor baseline. A later candidate at (265, 0) pushes it
// over τ·δ: with room in the bank that blocks admission (FloorBlocked), with
// a full bank it forces a mandatory eviction.
func TestFloorStatesAgainstOracle(t *testing.T) {
	blocks := [][][2]float32{
		{{0, 0}, {2, 0}, {0, 3}, {300, 0}},
		{{265, 0}, {-2, 1}, {1, -3}},
		{{-3, -1}, {4, 2}, {265, 0}, {3, 3}, {-4, 2}},
		{{5, -1}, {-1, 5}, {265, 0}},
	}
	for _, v := range []variant{
		variants[0], // default
		{"max", func(c *Config) { c.Ordering = OrderMax }},
		{"source", func(c *Config) { c.Ordering = OrderSource }},
		{"perhead", func(c *Config) { c.Prefix = PrefixPerHead }},
		{"sequential", func(c *Config) { c.Admission = AdmitSequential }},
		{"mandsource", func(c *Config) { c.Eviction = EvictMandatorySource }},
	} {
		for _, capacity := range []int{6, 12} {
			t.Run(fmt.Sprintf("%s/M=%d", v.name, capacity), func(t *testing.T) {
				cfg := Config{Heads: 1, KeyDim: 2, ValueDim: 1, Capacity: capacity, Tau: 2, Sigma: 1.5, P: 2, Eps: 1,
					Delta: 1e-6, Payload: PayloadF32, Density: F64, Workers: 1}
				v.mod(&cfg)
				i, src := 0, int64(0)
				next := func() Block {
					pts := blocks[i%len(blocks)]
					i++
					blk := Block{Keys: make([]float32, 0, 2*len(pts)), Values: make([]float32, len(pts)), Source: make([]int64, len(pts))}
					for x, p := range pts {
						blk.Keys = append(blk.Keys, p[0], p[1])
						blk.Source[x], blk.Values[x] = src, float32(src)
						src++
					}
					return blk
				}
				seen := checkBlocks(t, cfg, len(blocks), next)
				if seen.floorStates == 0 {
					t.Fatal("no floor-baseline state reached τ·δ: the stream does not exercise the report")
				}
				if capacity == 12 && seen.floorBlocked == 0 {
					t.Error("with room in the bank, the floor state never blocked admission")
				}
			})
		}
	}
}
