package wan

import (
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/record"
	"github.com/densitykv/densitykv/rope"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// opaque is the CPU backend seen as a device: without compute.HostMemory
// the model takes the device path (inputs uploaded, outputs read back,
// the planned self-attention) on the CPU's kernels. It counts the
// operations that show which path ran.
type opaque struct {
	compute.Backend
	ropes, uploads, downloads int
}

func (o *opaque) Rope(x compute.Tensor, tok0, heads int, r *rope.Table, height, width, t0, frames int) {
	o.ropes++
	o.Backend.Rope(x, tok0, heads, r, height, width, t0, frames)
}

func (o *opaque) Upload(dst compute.Tensor, src []float32) {
	o.uploads++
	o.Backend.Upload(dst, src)
}

func (o *opaque) Download(dst []float32, src compute.Tensor) error {
	o.downloads++
	return o.Backend.Download(dst, src)
}

// rolloutCall is one call of a memory rollout.
type rolloutCall struct {
	mem memory.Call
	t   float32
}

// rolloutCalls returns blocks blocks of steps denoising calls and a clean
// pass each.
func rolloutCalls(blocks, steps int) []rolloutCall {
	var cs []rolloutCall
	for b := range blocks {
		for s := 0; s <= steps; s++ {
			t := float32(1000 - 250*s)
			if s == steps {
				t = 0
			}
			cs = append(cs, rolloutCall{memory.Call{Block: b, Step: s, First: s == 0, Clean: s == steps}, t})
		}
	}
	return cs
}

// policyRun runs m through calls with a fresh policy (name, capacity) on
// seeded latents and returns every call's flow; trace, when set, traces
// call trace (0-based) on the host path.
func policyRun(t *testing.T, m *Model, name string, capacity int, calls []rolloutCall, trace int) [][]float32 {
	t.Helper()
	return runPolicy(t, m, newPolicy(t, m, name, capacity), calls, trace)
}

// newPolicy builds the policy name at the golden geometry.
func newPolicy(t *testing.T, m *Model, name string, capacity int) memory.Policy {
	t.Helper()
	pol, err := memory.New(name, memory.Config{Layout: m.Cfg.Layout(goldenH, goldenW, goldenF), Capacity: capacity, RoPETheta: m.Cfg.RoPEBase})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// runPolicy is policyRun with a policy given.
func runPolicy(t *testing.T, m *Model, pol memory.Policy, calls []rolloutCall, trace int) [][]float32 {
	t.Helper()
	g := openGolden(t, "forward_c_second_block_with_cache.safetensors")
	txt := goldenText(t, m, g)
	r := rand.New(rand.NewPCG(3, 5))
	var outs [][]float32
	for i, c := range calls {
		lat := make([]float32, goldenF*m.Cfg.InDim*goldenH*goldenW)
		for j := range lat {
			lat[j] = float32(r.NormFloat64())
		}
		flow := make([]float32, goldenF*m.Cfg.OutDim*goldenH*goldenW)
		call := Call{Latent: lat, Height: goldenH, Width: goldenW, Timesteps: []float32{c.t, c.t, c.t}, Text: txt, Mem: c.mem}
		if i == trace {
			call.Trace = func(string, []float32) {}
		}
		if err := m.Forward(flow, call, pol); err != nil {
			t.Fatalf("call %d %+v: %v", i, c.mem, err)
		}
		if c.mem.Clean && m.ws != nil {
			for l, h := range m.ws.hist {
				if h.k != nil || h.key != 0 {
					t.Fatalf("call %d (a clean pass): layer %d still holds its history", i, l)
				}
			}
		}
		outs = append(outs, flow)
	}
	return outs
}

// TestPlannedSelfAttention: on a backend that is not host memory, a
// policy that plans (DensityKV, FIFO) has its history kept on the backend
// and its context assembled there: over a rollout that takes the sink,
// rolls the window, fills and evicts the memory, every flow equals the
// CPU's host path bit for bit at both precisions; histories are uploaded
// once per block and layer, the block's q, k, v read back only on the
// clean passes; a traced call takes the host path and still agrees, and
// a policy that does not plan (Deep Forcing) keeps the host path.
func TestPlannedSelfAttention(t *testing.T) {
	const blocks, steps = 6, 2
	calls := rolloutCalls(blocks, steps)
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		for _, pc := range []struct {
			name     string
			capacity int
			planned  bool
		}{{memory.NameDensityKV, 20, true}, {memory.NameFIFO, 15, true}, {memory.NameNative, 0, true}, {memory.NameDeepForcing, 0, false}} {
			t.Run(prec.String()+"/"+pc.name, func(t *testing.T) {
				want := policyRun(t, goldenModelAs(t, prec), pc.name, pc.capacity, calls, -1)
				m := goldenModelAs(t, prec)
				o := &opaque{Backend: compute.NewCPU()}
				m.UseBackend(o)
				got := policyRun(t, m, pc.name, pc.capacity, calls, 4)
				for i := range want {
					if j := firstBitDiff(got[i], want[i]); j >= 0 {
						t.Fatalf("call %d %+v value %d: %v planned, %v on the host path", i, calls[i].mem, j, got[i][j], want[i][j])
					}
				}
				L := m.Cfg.Layers
				if !pc.planned {
					if o.ropes != 0 {
						t.Errorf("%s: %d Rope calls, want none (host path)", pc.name, o.ropes)
					}
					return
				}
				// Rope: per planned layer call, each current frame's keys
				// and queries.
				if want := (len(calls) - 1) * L * 2 * goldenF; o.ropes != want {
					t.Errorf("%d Rope calls, want %d (every untraced call's layers, keys and queries of %d frames)", o.ropes, want, goldenF)
				}
				// Downloads: the text's embedding, keys and values, the
				// flow of every call, the clean passes' k and v per layer,
				// the traced call's trace and its q, k, v per layer — and
				// nothing else.
				text, clean := 1+2*L, blocks
				traced := 3*L + traceReads(m)
				if want := text + len(calls) + 2*L*clean + traced; o.downloads != want {
					t.Errorf("%d read-backs, want %d (text %d, flows %d, clean k and v %d, the traced call %d)", o.downloads, want, text, len(calls), 2*L*clean, traced)
				}
				// Uploads: the padded text, every call's patches and
				// sinusoids, each layer's history once per block (keys and
				// values; block 0 has none), the traced call's contexts.
				hist := 2 * L * (blocks - 1)
				if want := 1 + 2*len(calls) + hist + 3*L; o.uploads != want {
					t.Errorf("%d uploads, want %d (histories %d)", o.uploads, want, hist)
				}
			})
		}
	}
}

// traceReads is the number of tensors a traced Forward of m reads back
// for its trace (the tensors it hands over, except those the policy
// returns on the host).
func traceReads(m *Model) int {
	return 5 + m.Cfg.Layers // patch_embed_tokens, time_sinusoid, e, e0, head_out; block_out per layer
}

// TestPlannedSelfAttentionGPU: the same rollout with DensityKV on the
// GPU backend (lavapipe in CI) gives the CPU's bits, with the banks on
// the host (their rows in the history sent) and on the device
// (gpu.NewBank: their rows copied there every call, memory.SegDevice).
func TestPlannedSelfAttentionGPU(t *testing.T) {
	dev := vulkantest.Open(t)
	be, err := gpu.NewBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	calls := rolloutCalls(5, 1)
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		for _, banks := range []string{"host", "device"} {
			t.Run(prec.String()+"/banks-on-"+banks, func(t *testing.T) {
				want := policyRun(t, goldenModelAs(t, prec), memory.NameDensityKV, 20, calls, -1)
				m := goldenModelAs(t, prec)
				m.UseBackend(be)
				defer m.UseBackend(nil)
				var opt memory.Options
				if banks == "device" {
					opt.NewBank = func(c bank.Config) (*bank.Bank, error) { return gpu.NewBank(dev, c) }
				}
				pol, err := memory.NewWith(memory.NameDensityKV, memory.Config{Layout: m.Cfg.Layout(goldenH, goldenW, goldenF), Capacity: 20, RoPETheta: m.Cfg.RoPEBase}, opt)
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					for _, b := range pol.(*memory.DensityKV).Banks() {
						if p, ok := b.Passes().(*gpu.BankPasses); ok {
							p.Free()
						}
					}
				}()
				rec := &planCounter{Planner: pol.(memory.Planner)}
				got := runPolicy(t, m, rec, calls, -1)
				for i := range want {
					if j := firstBitDiff(got[i], want[i]); j >= 0 {
						t.Fatalf("call %d %+v value %d: %v on %v, %v on the CPU", i, calls[i].mem, j, got[i][j], be, want[i][j])
					}
				}
				if (rec.device > 0) != (banks == "device") || rec.memory == 0 {
					t.Errorf("banks on the %s: %d of %d memory rows planned as the device's", banks, rec.device, rec.memory)
				}
			})
		}
	}
}

// TestPlannedSelfAttentionTraced: DensityKV inside the attention tracer
// (how generate runs it) takes the planned path on every call but the
// traced step, which goes through Attend on the host: the flows and the
// traced attention mass equal the CPU's.
func TestPlannedSelfAttentionTraced(t *testing.T) {
	const blocks, steps, traced = 4, 2, 1
	calls := rolloutCalls(blocks, steps)
	frames := blocks * goldenF
	cpu := goldenModelAs(t, gemm.BF16)
	wantTr := record.NewAttentionTracer(newPolicy(t, cpu, memory.NameDensityKV, 20), traced, frames)
	want := runPolicy(t, cpu, wantTr, calls, -1)
	m := goldenModelAs(t, gemm.BF16)
	o := &opaque{Backend: compute.NewCPU()}
	m.UseBackend(o)
	gotTr := record.NewAttentionTracer(newPolicy(t, m, memory.NameDensityKV, 20), traced, frames)
	got := runPolicy(t, m, gotTr, calls, -1)
	for i := range want {
		if j := firstBitDiff(got[i], want[i]); j >= 0 {
			t.Fatalf("call %d %+v value %d: %v planned, %v on the host path", i, calls[i].mem, j, got[i][j], want[i][j])
		}
	}
	for i := range wantTr.Mass {
		if gotTr.Mass[i] != wantTr.Mass[i] {
			t.Fatalf("traced mass %d: %v, %v on the CPU", i, gotTr.Mass[i], wantTr.Mass[i])
		}
	}
	if wantTr.Mass[0] == 0 {
		t.Fatal("the tracer measured nothing")
	}
	planned := len(calls) - blocks // every call but the traced step of each block
	if want := planned * m.Cfg.Layers * 2 * goldenF; o.ropes != want {
		t.Errorf("%d Rope calls, want %d (%d planned calls)", o.ropes, want, planned)
	}
}

// planCounter counts the memory rows of a policy's plans, and those
// planned as the device's (memory.SegDevice).
type planCounter struct {
	memory.Planner
	memory, device int
}

func (c *planCounter) AttendPlan(layer int, kv func() ([]float32, []float32, error), have memory.HistoryKey) (memory.Plan, error) {
	pl, err := c.Planner.AttendPlan(layer, kv, have)
	c.memory += pl.Parts.Memory
	for _, s := range pl.Segments {
		if s.Frame == memory.SegDevice {
			c.device += s.Rows
		}
	}
	return pl, err
}
