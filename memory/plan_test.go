package memory

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/rope"
)

// planHolder is what a backbone keeps of the plans: each layer's history
// and its key.
type planHolder struct {
	key    []HistoryKey
	hk, hv [][]float32
	sent   int // histories received
}

func newPlanHolder(layers int) *planHolder {
	return &planHolder{key: make([]HistoryKey, layers), hk: make([][]float32, layers), hv: make([][]float32, layers)}
}

// attend runs AttendPlan for layer and assembles the context on the host.
func (h *planHolder) attend(t *testing.T, p Planner, rot *rope.Rotator, layer int, q, k, v []float32) (Plan, Context) {
	t.Helper()
	lay := p.Layout()
	reads := 0
	pl, err := p.AttendPlan(layer, func() ([]float32, []float32, error) { reads++; return k, v, nil }, h.key[layer])
	if err != nil {
		t.Fatalf("AttendPlan layer %d: %v", layer, err)
	}
	if pl.K != nil {
		h.key[layer], h.hk[layer], h.hv[layer] = pl.Key, append([]float32(nil), pl.K...), append([]float32(nil), pl.V...)
		h.sent++
	} else if pl.Key != h.key[layer] {
		t.Fatalf("layer %d: plan without history, key %d, held %d", layer, pl.Key, h.key[layer])
	}
	if reads > 1 {
		t.Fatalf("layer %d: kv read %d times", layer, reads)
	}
	ctx, err := ExecutePlan(pl, h.hk[layer], h.hv[layer], q, k, v, lay, func(x []float32, tt int) { rot.Frame(x, lay.Heads, tt) })
	if err != nil {
		t.Fatal(err)
	}
	return pl, ctx
}

func bitsEqual(a, b []float32) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestAttendPlan: for every policy that plans (and DensityKV's variants),
// a policy driven through AttendPlan, its context assembled from the plan
// with the history held between calls, gives Attend's contexts bit for
// bit, the same stats and bytes, over blocks that take the sink, fill the
// window, admit and evict; the history is sent once per block and layer,
// the block's k and v are read only on the clean pass, and a snapshot
// loaded into a fresh policy gets a history of its own.
func TestAttendPlan(t *testing.T) {
	type variant struct {
		name   string
		policy string
		set    func(c *Config)
		opt    Options
	}
	vs := []variant{
		{"densitykv", NameDensityKV, func(c *Config) { c.Capacity = 20 }, Options{}},
		{"densitykv-perhead", NameDensityKV, func(c *Config) { c.Capacity = 20; c.Bank.Prefix = bank.PrefixPerHead; c.Bank.Tau = 1.3 }, Options{}},
		{"densitykv-bf16", NameDensityKV, func(c *Config) { c.Capacity = 30; c.Bank.Payload = bank.PayloadBF16 }, Options{}},
		{"fifo", NameFIFO, func(c *Config) { c.Capacity = 15 }, Options{}},
		{"uniform-stride", NameUniformStride, func(c *Config) { c.Capacity = 15 }, Options{}},
		{"full-history", NameFullHistory, nil, Options{}},
		{"longlive-rag", NameLongLiveRAG, func(c *Config) { c.LongLiveRAG.Descriptor = RAGKeyMean }, Options{}},
		{"native", NameNative, nil, Options{}},
		{"infinity-rope", NameInfinityRoPE, nil, Options{}},
		{"native-2-sink", NameNative, func(c *Config) { c.SinkFrames, c.CacheFrames = 2, 8 }, Options{}},
		{"densitykv-2-sink", NameDensityKV, func(c *Config) { c.SinkFrames, c.Capacity = 2, 20 }, Options{}},
		{"densitykv-device-bank", NameDensityKV, func(c *Config) { c.Capacity = 20; c.Bank.Prefix = bank.PrefixPerHead; c.Bank.Tau = 1.3 },
			Options{NewBank: newDeviceLikeBank}},
	}
	for _, vr := range vs {
		t.Run(vr.name, func(t *testing.T) {
			cfg := tinyConfig()
			if vr.set != nil {
				vr.set(&cfg)
			}
			ref, err := New(vr.policy, cfg)
			if err != nil {
				t.Fatal(err)
			}
			pol, err := NewWith(vr.policy, cfg, vr.opt)
			if err != nil {
				t.Fatal(err)
			}
			pl, ok := pol.(Planner)
			if !ok {
				t.Fatalf("%s is not a Planner", vr.policy)
			}
			lay := cfg.Layout
			rot := rope.MustNew(lay.HeadDim).NewRotator(lay.Height, lay.Width)
			h := newPlanHolder(lay.Layers)
			s := newStream(lay, 7)
			const blocks, steps = 7, 2
			for b := 0; b < blocks; b++ {
				sentBefore := h.sent
				for st := 0; st <= steps; st++ {
					c := Call{Block: b, Step: st, First: st == 0, Clean: st == steps}
					if err := ref.Begin(c); err != nil {
						t.Fatal(err)
					}
					if err := pol.Begin(c); err != nil {
						t.Fatal(err)
					}
					for l := 0; l < lay.Layers; l++ {
						q, k, v := s.qkv(b, st, l)
						want, err := ref.Attend(l, q, k, v)
						if err != nil {
							t.Fatal(err)
						}
						plan, got := h.attend(t, pl, rot, l, q, k, v)
						if vr.opt.NewBank != nil && plan.Parts.Memory > 0 {
							// The bank's rows are the device's, not the history's.
							dev := 0
							for _, sg := range plan.Segments {
								if sg.Frame == SegDevice {
									dev += sg.Rows
								}
							}
							if dev != plan.Parts.Memory || plan.HistoryRows() != plan.Parts.Total()-plan.Parts.Memory-lay.TokensPerBlock() {
								t.Fatalf("block %d layer %d: %d device rows, %d history rows; parts %+v", b, l, dev, plan.HistoryRows(), plan.Parts)
							}
						}
						for _, x := range []struct {
							n    string
							a, b []float32
						}{{"q", got.Q, want.Q}, {"k", got.K, want.K}, {"v", got.V, want.V}} {
							if i := bitsEqual(x.a, x.b); i >= 0 {
								t.Fatalf("block %d step %d layer %d: %s differs at %d (%d vs %d values)", b, st, l, x.n, i, len(x.a), len(x.b))
							}
						}
						if got.Parts != want.Parts || len(plan.HeadMemory) != len(want.HeadMemory) {
							t.Fatalf("block %d layer %d: parts %+v head memory %v, Attend's %+v %v", b, l, got.Parts, plan.HeadMemory, want.Parts, want.HeadMemory)
						}
						for i := range want.HeadMemory {
							if plan.HeadMemory[i] != want.HeadMemory[i] {
								t.Fatalf("block %d layer %d: head memory %v, Attend's %v", b, l, plan.HeadMemory, want.HeadMemory)
							}
						}
					}
					if err := ref.End(); err != nil {
						t.Fatal(err)
					}
					if err := pol.End(); err != nil {
						t.Fatal(err)
					}
					rs, ps := ref.(StatsReporter).LastStats(), pol.(StatsReporter).LastStats()
					rs.UpdateSeconds, ps.UpdateSeconds = 0, 0
					if !statsEqual(rs, ps) {
						t.Fatalf("block %d step %d: stats %+v, Attend's %+v", b, st, ps, rs)
					}
				}
				if got := h.sent - sentBefore; got != lay.Layers {
					t.Errorf("block %d: %d histories sent, want one per layer (%d)", b, got, lay.Layers)
				}
				if ref.Bytes() != pol.Bytes() {
					t.Errorf("block %d: %d bytes, Attend's %d", b, pol.Bytes(), ref.Bytes())
				}
			}
			// A snapshot loaded into a fresh policy: its history has a key
			// of its own, so a holder sends it again, and it still matches.
			var buf bytes.Buffer
			if err := pol.(Snapshotter).Save(&buf); err != nil {
				t.Fatal(err)
			}
			fresh, err := NewWith(vr.policy, cfg, vr.opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := fresh.(Snapshotter).Load(&buf); err != nil {
				t.Fatal(err)
			}
			c := Call{Block: blocks, Step: 0, First: true}
			for _, p := range []Policy{ref, fresh} {
				if err := p.Begin(c); err != nil {
					t.Fatal(err)
				}
			}
			sent := h.sent
			for l := 0; l < lay.Layers; l++ {
				q, k, v := s.qkv(blocks, 0, l)
				want, err := ref.Attend(l, q, k, v)
				if err != nil {
					t.Fatal(err)
				}
				_, got := h.attend(t, fresh.(Planner), rot, l, q, k, v)
				if bitsEqual(got.K, want.K) >= 0 || bitsEqual(got.V, want.V) >= 0 || bitsEqual(got.Q, want.Q) >= 0 {
					t.Fatalf("after Load, layer %d: the plan's context differs from Attend's", l)
				}
			}
			if h.sent-sent != lay.Layers {
				t.Errorf("after Load: %d histories sent, want %d", h.sent-sent, lay.Layers)
			}
		})
	}
}

// statsEqual compares two Stats records.
func statsEqual(a, b Stats) bool {
	eq := func(x, y []int) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if a.Policy != b.Policy || a.Block != b.Block || a.Step != b.Step || a.Clean != b.Clean || a.First != b.First || a.Bytes != b.Bytes ||
		len(a.Parts) != len(b.Parts) || !eq(a.Offered, b.Offered) || !eq(a.Admitted, b.Admitted) ||
		!eq(a.EvictedMandatory, b.EvictedMandatory) || !eq(a.EvictedCapacity, b.EvictedCapacity) || len(a.Occupancy) != len(b.Occupancy) {
		return false
	}
	for i := range a.Parts {
		if a.Parts[i] != b.Parts[i] || !eq(a.Occupancy[i], b.Occupancy[i]) {
			return false
		}
	}
	return true
}

// TestAttendPlanErrors: AttendPlan keeps Attend's protocol and checks the
// clean pass's k and v; a failing read or a non-finite value is an error
// naming it, and the call stays at that layer.
func TestAttendPlanErrors(t *testing.T) {
	cfg := tinyConfig()
	p, err := New(NameDensityKV, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pl := p.(Planner)
	if _, err := pl.AttendPlan(0, nil, 0); err == nil || !strings.Contains(err.Error(), "no open call") {
		t.Errorf("AttendPlan before Begin: %v", err)
	}
	lay := cfg.Layout
	s := newStream(lay, 3)
	if err := p.Begin(Call{Block: 0, First: true, Clean: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := pl.AttendPlan(1, nil, 0); err == nil || !strings.Contains(err.Error(), "want layer 0") {
		t.Errorf("layer 1 first: %v", err)
	}
	if _, err := pl.AttendPlan(0, nil, 0); err == nil || !strings.Contains(err.Error(), "needs the block's k and v") {
		t.Errorf("clean pass without kv: %v", err)
	}
	_, k, v := s.qkv(0, 0, 0)
	boom := func() ([]float32, []float32, error) { return nil, nil, errTest }
	if _, err := pl.AttendPlan(0, boom, 0); err == nil || !strings.Contains(err.Error(), "reading k and v: test failure") {
		t.Errorf("failing read: %v", err)
	}
	bad := append([]float32(nil), v...)
	bad[lay.Heads*lay.HeadDim+5] = float32(math.NaN())
	if _, err := pl.AttendPlan(0, func() ([]float32, []float32, error) { return k, bad, nil }, 0); err == nil || !strings.Contains(err.Error(), "v has NaN at token 1 head 0 dim 5") {
		t.Errorf("NaN value: %v", err)
	}
	if _, err := pl.AttendPlan(0, func() ([]float32, []float32, error) { return k[1:], v, nil }, 0); err == nil || !strings.Contains(err.Error(), "k has") {
		t.Errorf("short k: %v", err)
	}
	// Still at layer 0: a good call goes on.
	for l := 0; l < lay.Layers; l++ {
		_, k, v := s.qkv(0, 0, l)
		if _, err := pl.AttendPlan(l, func() ([]float32, []float32, error) { return k, v, nil }, 0); err != nil {
			t.Fatalf("layer %d: %v", l, err)
		}
	}
	if err := p.End(); err != nil {
		t.Fatal(err)
	}
}

// errTest is a read failure.
var errTest = testError("test failure")

type testError string

func (e testError) Error() string { return string(e) }

// TestPlans: Plans names exactly the policies that are Planners, under
// any spelling New takes.
func TestPlans(t *testing.T) {
	cfg := tinyConfig()
	for _, name := range Names() {
		p, err := New(name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, is := p.(Planner)
		if Plans(name) != is || Plans(strings.ToUpper(strings.ReplaceAll(name, "-", "_"))) != is {
			t.Errorf("%s: Plans %v, is a Planner %v", name, Plans(name), is)
		}
	}
	if Plans("no-such-policy") {
		t.Error("an unknown policy plans")
	}
}

// deviceLike is a bank's CPU passes seen as a device's (their states
// "on the device", their rows written there), for plans with SegDevice.
type deviceLike struct{ bank.CPUPasses }

func (deviceLike) WriteRows(compute.Backend, compute.Tensor, compute.Tensor, int, int) error {
	return nil // not called by the host reference (ExecutePlan uses HostRows)
}

// newDeviceLikeBank builds a bank on deviceLike passes.
func newDeviceLikeBank(c bank.Config) (*bank.Bank, error) {
	b, err := bank.New(c)
	if err != nil {
		return nil, err
	}
	return bank.NewWithPasses(c, deviceLike{b.Passes().(bank.CPUPasses)})
}
