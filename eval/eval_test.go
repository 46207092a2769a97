package eval

import (
	"fmt"
	"image/color"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"gonum.org/v1/plot/vg"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/synth"
)

func TestAttendMatchesFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const nq, n, d, ld = 3, 7, 8, 16 // rows of k/v are heads of a [n][2][8] tensor
	q := make([]float32, nq*d)
	k := make([]float32, n*ld)
	v := make([]float32, n*ld)
	for _, s := range [][]float32{q, k, v} {
		for i := range s {
			s[i] = float32(r.NormFloat64())
		}
	}
	skip := func(j int) bool { return j == 2 || j == 5 }
	for _, sk := range []func(int) bool{nil, skip} {
		w := make([]float32, nq*n)
		out := make([]float32, nq*d)
		Attend(q, nq, d, k[d:], v[d:], ld, n, sk, w, out) // second head
		for i := 0; i < nq; i++ {
			logits := make([]float64, n)
			m := math.Inf(-1)
			for j := 0; j < n; j++ {
				if sk != nil && sk(j) {
					continue
				}
				for c := 0; c < d; c++ {
					logits[j] += float64(q[i*d+c]) * float64(k[j*ld+d+c])
				}
				logits[j] /= math.Sqrt(d)
				m = math.Max(m, logits[j])
			}
			var z float64
			for j := range logits {
				if sk == nil || !sk(j) {
					z += math.Exp(logits[j] - m)
				}
			}
			for c := 0; c < d; c++ {
				var o float64
				for j := 0; j < n; j++ {
					if sk != nil && sk(j) {
						if w[i*n+j] != 0 {
							t.Fatalf("skipped row %d has weight %v", j, w[i*n+j])
						}
						continue
					}
					o += math.Exp(logits[j]-m) / z * float64(v[j*ld+d+c])
				}
				if math.Abs(o-float64(out[i*d+c])) > 1e-5 {
					t.Fatalf("query %d dim %d: %v, want %v", i, c, out[i*d+c], o)
				}
			}
		}
	}
}

func TestRelL2(t *testing.T) {
	for _, tc := range []struct {
		a, b []float32
		want float64
	}{
		{[]float32{1, 2}, []float32{1, 2}, 0},
		{[]float32{0, 0}, []float32{3, 4}, 1},
		{[]float32{3, 5}, []float32{3, 4}, 0.2},
		{[]float32{0}, []float32{0}, 0},
		{[]float32{1}, []float32{0}, math.Inf(1)},
	} {
		if got := RelL2(tc.a, tc.b); math.Abs(got-tc.want) > 1e-12 && got != tc.want {
			t.Errorf("RelL2(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestTopKRecall(t *testing.T) {
	w := []float32{0.1, 0.5, 0.2, 0.5, 0.05, 0.3}
	all := func(int) bool { return true }
	if got := TopK(nil, w, 3, all); !slices.Equal(got, []int{1, 3, 5}) {
		t.Fatalf("TopK = %v, want [1 3 5] (tie 1/3 broken by index)", got)
	}
	if got := TopK(nil, w, 2, func(j int) bool { return j != 1 }); !slices.Equal(got, []int{3, 5}) {
		t.Fatalf("TopK eligible = %v", got)
	}
	kept := func(j int) bool { return j == 3 || j == 0 }
	for _, tc := range []struct {
		k    int
		want float64
	}{{1, 0}, {2, 0.5}, {3, 1.0 / 3}, {10, 2.0 / 6}} {
		if got := TopKRecall(w, tc.k, all, kept); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("k=%d: recall %v, want %v", tc.k, got, tc.want)
		}
	}
	if got := TopKRecall(w, 3, func(int) bool { return false }, kept); !math.IsNaN(got) {
		t.Errorf("no eligible rows: %v, want NaN", got)
	}
}

func TestCoverageRadius(t *testing.T) {
	// Points on a line in 2-D: retained {0, 10}; history {0, 3, 7, 10, 4}.
	pts := func(xs ...float32) []float32 {
		var out []float32
		for _, x := range xs {
			out = append(out, x, 0)
		}
		return out
	}
	x := pts(0, 3, 7, 10, 4)
	r := pts(0, 10)
	mx, mean := CoverageRadius(x, 5, r, 2, 2)
	if math.Abs(mx-4) > 1e-6 || math.Abs(mean-(0+3+3+0+4)/5.0) > 1e-6 {
		t.Fatalf("max %v mean %v, want 4 and 2", mx, mean)
	}
	if mx, _ := CoverageRadius(x, 5, nil, 0, 2); !math.IsInf(mx, 1) {
		t.Fatalf("no retained keys: max %v, want +Inf", mx)
	}
	if mx, mean := CoverageRadius(nil, 0, r, 2, 2); mx != 0 || mean != 0 {
		t.Fatal("no history must give zero radius")
	}
	// More points than one tile: a grid covered by every other point.
	var big, ret []float32
	for i := 0; i < 600; i++ {
		big = append(big, float32(i), 1)
		if i%2 == 0 {
			ret = append(ret, float32(i), 1)
		}
	}
	mx, mean = CoverageRadius(big, 600, ret, 300, 2)
	if math.Abs(mx-1) > 1e-3 || math.Abs(mean-0.5) > 1e-3 {
		t.Fatalf("grid: max %v mean %v, want 1 and 0.5", mx, mean)
	}
}

// bruteNearest is the float64 oracle of NearestRetained.
func bruteNearest(xi, r []float32, nr, d int) (int32, float64) {
	best, bj := math.Inf(1), int32(-1)
	for j := 0; j < nr; j++ {
		var s float64
		for c := 0; c < d; c++ {
			t := float64(xi[c]) - float64(r[j*d+c])
			s += t * t
		}
		if s < best {
			best, bj = s, int32(j)
		}
	}
	return bj, math.Sqrt(best)
}

// TestNearestRetainedExact compares the gemm-based search with a float64
// brute force on points built to defeat a float32 |a|²+|b|²−2a·b search:
// large common offsets (cancellation), near-ties below float32 resolution,
// exact duplicates, and more rows and columns than one gemm tile.
func TestNearestRetainedExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		name          string
		nx, nr, d     int
		offset, noise float64
	}{
		{"gaussian", 300, 700, 16, 0, 1},
		{"offset", 200, 600, 64, 100, 1e-3}, // ‖x‖ ≈ 800, distances ≈ 0.01
		{"tiles", 260, 1100, 8, 5, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.d
			base := make([]float32, d)
			for c := range base {
				base[c] = float32(tc.offset * r.NormFloat64())
			}
			pt := func() []float32 {
				p := make([]float32, d)
				for c := range p {
					p[c] = base[c] + float32(tc.noise*r.NormFloat64())
				}
				return p
			}
			var rs, xs []float32
			for j := 0; j < tc.nr; j++ {
				rs = append(rs, pt()...)
			}
			for i := 0; i < tc.nx; i++ {
				switch i % 4 {
				case 0: // a copy of a retained point
					j := r.IntN(tc.nr)
					xs = append(xs, rs[j*d:(j+1)*d]...)
				case 1: // a retained point nudged by one ulp in one coordinate
					j := r.IntN(tc.nr)
					p := append([]float32(nil), rs[j*d:(j+1)*d]...)
					c := r.IntN(d)
					p[c] = math.Nextafter32(p[c], float32(math.Inf(1)))
					xs = append(xs, p...)
				default:
					xs = append(xs, pt()...)
				}
			}
			idx := make([]int32, tc.nx)
			dist := make([]float64, tc.nx)
			NearestRetained(xs, tc.nx, rs, tc.nr, d, idx, dist)
			for i := 0; i < tc.nx; i++ {
				bj, bd := bruteNearest(xs[i*d:(i+1)*d], rs, tc.nr, d)
				if idx[i] != bj || dist[i] != bd {
					t.Fatalf("point %d: nearest %d at %v, brute force %d at %v", i, idx[i], dist[i], bj, bd)
				}
			}
			mx, mean := CoverageRadius(xs, tc.nx, rs, tc.nr, d)
			var bmx, bsum float64
			for _, v := range dist {
				bmx = math.Max(bmx, v)
				bsum += v
			}
			if mx != bmx || math.Abs(mean-bsum/float64(tc.nx)) > 1e-12*bmx {
				t.Fatalf("CoverageRadius %v %v, brute force %v %v", mx, mean, bmx, bsum/float64(tc.nx))
			}
		})
	}
	// Exact ties resolve to the lower index.
	idx := make([]int32, 1)
	NearestRetained([]float32{0, 0}, 1, []float32{3, 4, 5, 0, 0, 5, 4, 3}, 4, 2, idx, nil)
	if idx[0] != 0 {
		t.Fatalf("tie went to %d, want 0", idx[0])
	}
}

// TestRunCoverageExact checks the reported coverage radius on a stream
// whose history (1,728 keys per head at the end) is larger than the old
// 1,024-key sample: the reported max equals the float64 brute-force max over
// every dropped history key, the mean matches, and the paper's logit bound
// holds for every dropped key k and its nearest retained key k′ with random
// queries and with the worst-case query q ∥ k − k′.
func TestRunCoverageExact(t *testing.T) {
	g, base := layoutStream(t, memory.Layout{Height: 8, Width: 8, FramesPerBlock: 2, Layers: 1, Heads: 2, HeadDim: 16}, 16, 4, 8)
	vs, err := Suite(SuiteConfig{Base: base, Groups: []string{GroupBaselines}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var cases []coverageCase
	opt := Options{Base: base, Queries: 4, TopK: 2, onCoverage: func(cc coverageCase) {
		mu.Lock()
		cases = append(cases, cc)
		mu.Unlock()
	}}
	if _, err := Run(g, vs, opt); err != nil {
		t.Fatal(err)
	}
	D := base.Layout.HeadDim
	r := rand.New(rand.NewPCG(3, 4))
	sqrtD := math.Sqrt(float64(D))
	big := 0
	for _, cc := range cases {
		var rk []float32
		for id := cc.lo; id < cc.hi; id++ {
			if cc.kept[id] {
				rk = append(rk, cc.canon[id*D:(id+1)*D]...)
			}
		}
		nr := len(rk) / D
		var bmx, bsum float64
		for id := cc.lo; id < cc.hi; id++ {
			if cc.kept[id] || nr == 0 {
				continue
			}
			k := cc.canon[id*D : (id+1)*D]
			j, dist := bruteNearest(k, rk, nr, D)
			bmx = math.Max(bmx, dist)
			bsum += dist
			kp := rk[int(j)*D : (int(j)+1)*D]
			for trial := 0; trial < 4; trial++ {
				q := make([]float64, D)
				for i := range q {
					if trial == 0 { // worst case: q ∥ k − k′
						q[i] = float64(k[i]) - float64(kp[i])
					} else {
						q[i] = 3 * r.NormFloat64()
					}
				}
				var lk, lkp, qn float64
				for i := range q {
					lk += q[i] * float64(k[i])
					lkp += q[i] * float64(kp[i])
					qn += q[i] * q[i]
				}
				lhs := math.Abs(lk-lkp) / sqrtD
				rhs := math.Sqrt(qn) * cc.max / sqrtD
				if lhs > rhs*(1+1e-9)+1e-12 {
					t.Fatalf("layer %d head %d horizon %d policy %d key %d: logit change %v > ‖q‖·r/√d = %v (r = %v, true distance %v)",
						cc.layer, cc.head, cc.horizon, cc.policy, id, lhs, rhs, cc.max, dist)
				}
			}
		}
		if nr == 0 {
			continue
		}
		nh := cc.hi - cc.lo
		big = max(big, nh)
		if cc.max != bmx {
			t.Fatalf("layer %d head %d horizon %d policy %d: reported max %v, brute force %v over %d history keys",
				cc.layer, cc.head, cc.horizon, cc.policy, cc.max, bmx, nh)
		}
		if want := bsum / float64(nh); math.Abs(cc.mean-want) > 1e-12*bmx {
			t.Fatalf("policy %d: reported mean %v, brute force %v", cc.policy, cc.mean, want)
		}
	}
	if big <= 1024 || len(cases) == 0 {
		t.Fatalf("largest history %d keys in %d cases: the test needs more than 1,024", big, len(cases))
	}
}

func TestMidRanks(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		v     []float64
		lower bool
		want  []float64
	}{
		{[]float64{3, 1, 1, 2}, true, []float64{4, 1.5, 1.5, 3}},
		{[]float64{3, 1, 1, 2}, false, []float64{1, 3.5, 3.5, 2}},
		{[]float64{5, 5, 5}, true, []float64{2, 2, 2}},
		{[]float64{nan, 2, nan, 1}, true, []float64{3.5, 2, 3.5, 1}},
		{[]float64{nan, 2, 1}, false, []float64{3, 1, 2}},
		{nil, true, []float64{}},
	} {
		got := MidRanks(tc.v, tc.lower)
		for i := range tc.want {
			if got[i] != tc.want[i] {
				t.Errorf("MidRanks(%v, lower=%v) = %v, want %v", tc.v, tc.lower, got, tc.want)
				break
			}
		}
		var s, n float64
		for _, r := range got {
			s += r
			n++
		}
		if n > 0 && s != n*(n+1)/2 {
			t.Errorf("ranks %v do not sum to n(n+1)/2", got)
		}
	}
}

// fakeResult builds a Result with one layer and head and the given
// per-variant metrics at a single horizon.
func fakeResult(ms []Metrics) *Result {
	r := &Result{Layout: memory.Layout{Height: 1, Width: 1, FramesPerBlock: 1, Layers: 1, Heads: 1, HeadDim: 4},
		Blocks: 1, Horizons: []int{1}, Layers: []int{0}}
	for i, m := range ms {
		r.Variants = append(r.Variants, Variant{Group: "g", Label: string(rune('A' + i))})
		r.Cells = append(r.Cells, [][][]Metrics{{{m}}})
		r.PerBlock = append(r.PerBlock, []BlockStat{{Bytes: 1 << 20, UpdateSeconds: 0.001}})
	}
	return r
}

func TestMakeTableRanksAndMarks(t *testing.T) {
	// Cover values are divided by √4 = 2 for display.
	r := fakeResult([]Metrics{
		{RelErr: 0.10, Dropped: 0.2, Recall: 0.9, CoverMax: 2, CoverMean: 1},
		{RelErr: 0.10, Dropped: 0.1, Recall: 0.5, CoverMax: 4, CoverMean: 2},
		{RelErr: 0.30, Dropped: 0.3, Recall: 0.7, CoverMax: 6, CoverMean: 3},
	})
	tb := MakeTable(r, "g", 0)
	if len(tb.Rows) != 3 {
		t.Fatalf("%d rows", len(tb.Rows))
	}
	// Rel err ties A and B at 10.00% → midranks 1.5, 1.5, 3.
	wantRanks := [][]float64{{1.5, 2, 1, 1, 1}, {1.5, 1, 3, 2, 2}, {3, 3, 2, 3, 3}}
	for i, row := range tb.Rows {
		for c := 0; c < 5; c++ {
			if row.Ranks[c] != wantRanks[i][c] {
				t.Fatalf("row %s col %d rank %v, want %v", row.Label, c, row.Ranks[c], wantRanks[i][c])
			}
		}
	}
	if got := tb.Rows[0].AvgRank; math.Abs(got-6.5/5) > 1e-12 {
		t.Fatalf("avg rank %v, want %v", got, 6.5/5)
	}
	if tb.Rows[0].Marks[0] != MarkBest || tb.Rows[1].Marks[0] != MarkBest || tb.Rows[2].Marks[0] != MarkSecond {
		t.Fatalf("rel err marks %v %v %v", tb.Rows[0].Marks[0], tb.Rows[1].Marks[0], tb.Rows[2].Marks[0])
	}
	md := tb.Markdown()
	for _, s := range []string{"**10.00**", "<u>30.00</u>", "**1.30**", "| A |"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
	var sb strings.Builder
	if err := tb.WriteCSV(&sb); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(sb.String(), "\n"); lines != 4 {
		t.Fatalf("csv has %d lines, want 4:\n%s", lines, sb.String())
	}
}

func evalStream(t *testing.T, blocks int) (*synth.Generator, memory.Config) {
	t.Helper()
	return layoutStream(t, memory.Layout{Height: 4, Width: 6, FramesPerBlock: 2, Layers: 2, Heads: 2, HeadDim: 16}, blocks, 4, 8)
}

// layoutStream returns a synthetic stream of blocks blocks with layout l and
// the memory configuration of a 1-frame sink, a window of window frames and
// a native cache of cache frames.
func layoutStream(t *testing.T, l memory.Layout, blocks, window, cache int) (*synth.Generator, memory.Config) {
	t.Helper()
	c := synth.DefaultConfig()
	c.Layout = l
	c.Blocks = blocks
	g, err := synth.NewGenerator(c)
	if err != nil {
		t.Fatal(err)
	}
	return g, memory.Config{Layout: l, SinkFrames: 1, WindowFrames: window, CacheFrames: cache}
}

func bits(x float64) uint64 { return math.Float64bits(x) }

func TestRunReferenceAgainstItself(t *testing.T) {
	g, base := evalStream(t, 8)
	big := base
	big.Capacity = 1 << 20
	small := base
	small.Capacity = 24 // one frame
	vs := []Variant{
		{Group: "g", Label: "full", Policy: memory.NameFullHistory, Config: base},
		{Group: "g", Label: "fifo-all", Policy: memory.NameFIFO, Config: big},
		{Group: "g", Label: "fifo-1", Policy: memory.NameFIFO, Config: small},
		{Group: "g", Label: "native", Policy: memory.NameNative, Config: base},
		{Group: "g", Label: "bogus", Policy: "no-such-policy", Config: base},
	}
	res, err := Run(g, vs, Options{Base: base, Queries: 16, TopK: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Variants) != 4 || len(res.Skipped) != 1 {
		t.Fatalf("variants %d skipped %v", len(res.Variants), res.Skipped)
	}
	if !slices.Equal(res.Horizons, []int{2, 4, 8}) {
		t.Fatalf("horizons %v", res.Horizons)
	}
	z := len(res.Horizons) - 1
	for v := 0; v < 2; v++ { // FullHistory and a FIFO that keeps everything
		for _, li := range res.Cells[v][z] {
			for _, m := range li {
				if m.RelErr != 0 || m.Dropped != 0 || m.Recall != 1 || m.CoverMax != 0 || m.CoverMean != 0 {
					t.Fatalf("%s: %+v, want exact agreement with the reference", res.Variants[v].Label, m)
				}
			}
		}
	}
	for _, v := range []int{2, 3} {
		m := res.Cells[v][z][0][0]
		if !(m.RelErr > 0 && m.Dropped > 0 && m.Recall < 1 && m.CoverMax > 0 && m.CoverMean > 0 && m.CoverMean <= m.CoverMax) {
			t.Fatalf("%s: %+v, want a lossy memory", res.Variants[v].Label, m)
		}
	}
	if res.Collisions != 0 {
		t.Errorf("%d hash collisions", res.Collisions)
	}
	for v, u := range res.Unmatched {
		if u != 0 {
			t.Errorf("%s: %d unmatched context rows", res.Variants[v].Label, u)
		}
	}
	// FIFO with one frame of memory: at the last horizon exactly one history
	// frame (the newest) is fully attended, the rest not at all.
	fc := res.FrameCoverage[2][z]
	ws := 7*2 + 2 - 4 // window start of the last block (7)
	for f := range fc {
		switch {
		case f < 1 || f >= ws:
			if !math.IsNaN(fc[f]) {
				t.Fatalf("frame %d (sink or window) coverage %v, want NaN", f, fc[f])
			}
		case f == ws-1:
			if fc[f] != 1 {
				t.Fatalf("newest history frame coverage %v, want 1", fc[f])
			}
		default:
			if fc[f] != 0 {
				t.Fatalf("frame %d coverage %v, want 0", f, fc[f])
			}
		}
	}
	// Ages at the last block (frames 14, 15): FIFO keeps frame 11 (age 4);
	// FullHistory keeps frames 1…11 (mean age 15 − 6 = 9).
	if got := res.Cells[2][z][0][0].RetainedAge; got != 4 {
		t.Fatalf("FIFO retained age %v, want 4", got)
	}
	if got := res.Cells[0][z][1][1].RetainedAge; got != 9 {
		t.Fatalf("FullHistory retained age %v, want 9", got)
	}
	if got := res.PerBlock[2][7].Memory; got != 24 {
		t.Fatalf("FIFO memory at the end %v, want 24", got)
	}
}

// TestDeepForcingBudgetMarked checks that the matched-capacity table marks
// Deep Forcing, whose compressed middle (cache − sink − recent tail = 7
// frames with the paper's 12/1/4) is larger than the others' M (cache −
// sink − window = 6 frames), and no other baseline.
func TestDeepForcingBudgetMarked(t *testing.T) {
	g, base := layoutStream(t, memory.Layout{Height: 2, Width: 3, FramesPerBlock: 3, Layers: 1, Heads: 2, HeadDim: 8}, 8, 5, 12)
	vs, err := Suite(SuiteConfig{Base: base, Groups: []string{GroupBaselines}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(g, vs, Options{Base: base, Queries: 4, TopK: 2})
	if err != nil {
		t.Fatal(err)
	}
	tb := MakeTable(res, GroupBaselines, len(res.Horizons)-1)
	for _, row := range tb.Rows {
		if want := row.Label == "Deep Forcing"; (row.Note != "") != want {
			t.Errorf("%s: note %q", row.Label, row.Note)
		}
	}
	md := tb.Markdown()
	for _, want := range []string{"| Deep Forcing † |", "\n† Deep Forcing holds up to 42 history tokens per head", "M = 36 ", "a 12-frame cache"} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	if strings.Count(md, "†") != 2 {
		t.Errorf("want one marker and one footnote:\n%s", md)
	}
	var sb strings.Builder
	if err := tb.WriteCSV(&sb); err != nil || !strings.Contains(sb.String(), ",note\n") || !strings.Contains(sb.String(), "holds up to 42") {
		t.Errorf("csv lacks the note (%v):\n%s", err, sb.String())
	}
}

// TestPlots checks the figures of a small suite: every figure is written,
// legends sit outside the axes, every curve of a figure has its own colour
// and dash pattern, a policy keeps its style across figures (the default
// DensityKV rows look like the DensityKV baseline), titles say what is
// averaged, and the sweeps plot metric against parameter value.
func TestPlots(t *testing.T) {
	g, base := evalStream(t, 6)
	vs, err := Suite(SuiteConfig{Base: base, Groups: []string{GroupBaselines, GroupTau, GroupPolicy}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(g, vs, Options{Base: base, Queries: 8, TopK: 4})
	if err != nil {
		t.Fatal(err)
	}
	type style struct {
		c      color.Color
		dashes string
		width  vg.Length
	}
	styles := map[string]style{}
	names := map[string]bool{}
	for _, f := range res.figures() {
		names[f.name] = true
		for _, p := range f.panels {
			if p.Legend != "right" {
				t.Errorf("%s: legend %q, want outside (right)", f.name, p.Legend)
			}
			if !strings.Contains(p.Title+f.title, "mean over") && f.name != "state_bytes" {
				t.Errorf("%s: titles %q / %q do not say what is averaged", f.name, f.title, p.Title)
			}
			seen := map[style]string{}
			for _, s := range p.Series {
				st := style{s.Color, fmt.Sprint(s.Dashes), s.Width}
				if o, dup := seen[st]; dup {
					t.Errorf("%s: %q and %q share colour and dashes", f.name, o, s.Name)
				}
				seen[st] = s.Name
				if strings.HasPrefix(f.name, "sweep_") {
					continue
				}
				key := s.Name
				if key == "Default" || key == "DensityKV" {
					key = "density"
				}
				if o, ok := styles[key]; ok && o != st {
					t.Errorf("%s: %q drawn as %+v, elsewhere %+v", f.name, s.Name, st, o)
				}
				styles[key] = st
			}
		}
	}
	for _, want := range []string{"fidelity", "dropped_mass", "recall", "state_bytes", "frame_coverage", "coverage_radius", "ablation_fidelity", "ablation_frame_coverage", "sweep_tau"} {
		if !names[want] {
			t.Errorf("figure %s missing (have %v)", want, names)
		}
	}
	for _, f := range res.sweepFigures() {
		p := f.panels[0]
		if len(p.Series) != 3 || !slices.Equal(p.Series[0].X, []float64{1.5, 2, 3}) {
			t.Errorf("%s: series %+v, want rel. error, dropped mass and recall against τ", f.name, p.Series)
		}
		if !strings.Contains(f.title, "default τ = 2") {
			t.Errorf("%s: title %q", f.name, f.title)
		}
	}
	dir := t.TempDir()
	files, err := res.WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2*len(names) {
		t.Fatalf("wrote %d files for %d figures", len(files), len(names))
	}
	// WriteTables writes no picture.
	tabs, err := res.WriteTables(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tabs {
		if strings.HasSuffix(f, ".png") || strings.HasSuffix(f, ".svg") {
			t.Fatalf("WriteTables wrote %s", f)
		}
	}
}

func TestRunDeterministicAcrossWorkers(t *testing.T) {
	run := func(workers int) *Result {
		g, base := evalStream(t, 6)
		vs, err := Suite(SuiteConfig{Base: base, Groups: []string{GroupBaselines, GroupTau}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(g, vs, Options{Base: base, Queries: 8, TopK: 4, CoverageSample: 32, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := run(1), run(2)
	if len(a.Variants) != len(b.Variants) || len(a.Variants) < 5 {
		t.Fatalf("variants %d vs %d", len(a.Variants), len(b.Variants))
	}
	for v := range a.Cells {
		for z := range a.Cells[v] {
			for i := range a.Cells[v][z] {
				for h, m := range a.Cells[v][z][i] {
					n := b.Cells[v][z][i][h]
					if bits(m.RelErr) != bits(n.RelErr) || bits(m.Dropped) != bits(n.Dropped) || bits(m.Recall) != bits(n.Recall) ||
						bits(m.CoverMax) != bits(n.CoverMax) || bits(m.CoverMean) != bits(n.CoverMean) {
						t.Fatalf("variant %d horizon %d layer %d head %d: %+v vs %+v", v, z, i, h, m, n)
					}
				}
			}
			for f := range a.FrameCoverage[v][z] {
				if bits(a.FrameCoverage[v][z][f]) != bits(b.FrameCoverage[v][z][f]) {
					t.Fatalf("frame coverage differs at variant %d frame %d", v, f)
				}
			}
		}
	}
	dir := t.TempDir()
	files, err := a.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tables.md", "baselines_h6.csv", "tau_h6.csv", "cells.csv", "series.csv", "frame_coverage.csv", "fidelity.png", "fidelity.svg"} {
		if st, err := os.Stat(filepath.Join(dir, want)); err != nil || st.Size() == 0 {
			t.Errorf("report file %s missing or empty (%v); wrote %v", want, err, files)
		}
	}
}

func TestSuite(t *testing.T) {
	l := memory.Layout{Height: 10, Width: 16, FramesPerBlock: 3, Layers: 2, Heads: 2, HeadDim: 32}
	vs, err := Suite(SuiteConfig{Base: memory.Config{Layout: l}})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, v := range vs {
		count[v.Group]++
		if _, err := v.Config.Resolve(); err != nil {
			t.Errorf("%s/%s: %v", v.Group, v.Label, err)
		}
	}
	want := map[string]int{GroupBaselines: 7, GroupTau: 3, GroupCapacity: 3, GroupSigma: 3, GroupP: 3, GroupPolicy: 7, GroupOrdering: 2, GroupGeometry: 4}
	for g, n := range want {
		if count[g] != n {
			t.Errorf("group %s has %d variants, want %d", g, count[g], n)
		}
	}
	// Scaling: σ = 8·√(32/128) = 4; M = 6 frames of 160 tokens.
	if s := ScaledSigma(128); s != 8 {
		t.Errorf("ScaledSigma(128) = %v", s)
	}
	for _, v := range vs {
		if v.Group == GroupSigma && v.Label == "σ=4" && v.Config.Bank.Sigma != 4 {
			t.Errorf("σ row %+v", v.Config.Bank)
		}
		if v.Group == GroupCapacity && strings.HasPrefix(v.Label, "M=960") && v.Config.Capacity != 960 {
			t.Errorf("capacity row %d", v.Config.Capacity)
		}
	}
	// The geometry table has the paper's four descriptors, one each.
	desc := map[string]string{}
	for _, v := range vs {
		if v.Group == GroupGeometry {
			rc, _ := v.Config.Resolve()
			desc[rc.Bank.Descriptor.String()] = v.Label
		}
	}
	for _, d := range []string{"post-rope-key", "key-value", "pre-rope-key", "pre-rope-key-value"} {
		if desc[d] == "" {
			t.Errorf("geometry table lacks descriptor %s (has %v)", d, desc)
		}
	}
	if _, err := Suite(SuiteConfig{Base: memory.Config{Layout: l}, Groups: []string{"nope"}}); err == nil {
		t.Error("unknown group accepted")
	}
}

func TestRunErrors(t *testing.T) {
	g, base := evalStream(t, 3)
	vs := []Variant{{Group: "g", Label: "fifo", Policy: memory.NameFIFO, Config: base}}
	for name, opt := range map[string]Options{
		"horizon": {Base: base, Horizons: []int{9}},
		"layer":   {Base: base, Layers: []int{5}},
		"queries": {Base: base, Queries: -1},
	} {
		if _, err := Run(g, vs, opt); err == nil || !strings.HasPrefix(err.Error(), "eval: ") {
			t.Errorf("%s: error %v, want an eval error", name, err)
		}
	}
	if _, err := Run(g, []Variant{{Policy: "nope"}}, Options{Base: base}); err == nil {
		t.Error("no buildable variant accepted")
	}
}

// BenchmarkRunBaselines evaluates the seven baselines on 8 blocks of the
// default synthetic stream with 2 layers (one op = the whole run).
func BenchmarkRunBaselines(b *testing.B) {
	c := synth.DefaultConfig()
	c.Layout.Layers = 2
	c.Blocks = 8
	base := memory.Config{Layout: c.Layout}
	vs, err := Suite(SuiteConfig{Base: base, Groups: []string{GroupBaselines}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		g, err := synth.NewGenerator(c)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Run(g, vs, Options{Base: base}); err != nil {
			b.Fatal(err)
		}
	}
}
