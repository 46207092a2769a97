package memory

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bank"
)

// goldenDensityConfig is the Wan golden rollout's DensityKV setting (max
// ordering, σ = 4) with float32 payload for exact comparisons.
func goldenDensityConfig(capacity int) Config {
	c := tinyConfig()
	c.Capacity = capacity
	c.Bank.Ordering = bank.OrderMax
	c.Bank.Sigma = 4
	c.Bank.Payload = bank.PayloadF32
	return c
}

func TestDensityKVPackingAndBank(t *testing.T) {
	for _, capacity := range []int{24, 60, 72} {
		t.Run(fmt.Sprintf("cap%d", capacity), func(t *testing.T) {
			cfg := goldenDensityConfig(capacity)
			pol, err := New(NameDensityKV, cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := pol.(*DensityKV)
			s := newStream(cfg.Layout, 11)
			l := cfg.Layout
			row, D := l.Heads*l.HeadDim, l.HeadDim
			for b := 0; b < 8; b++ {
				for st := 0; st <= 4; st++ {
					ctx, _ := s.call(t, p, Call{Block: b, Step: st, First: st == 0, Clean: st == 4})
					stats := p.LastStats()
					for layer := range ctx {
						bk := p.Banks()[layer]
						n := bk.Len()
						// The golden rollout's (bank, local, total) counts.
						wantLocal := []int{24, 60}[min(b, 1)]
						if got := ctx[layer].Parts; got != (Parts{Sink: 12, Memory: n, Local: wantLocal}) {
							t.Fatalf("block %d step %d layer %d: parts %+v, bank %d", b, st, layer, got, n)
						}
						if b < 2 && n != 0 || b == 2 && n != min(36, capacity) {
							t.Fatalf("block %d: bank holds %d", b, n)
						}
						// Memory rows are the bank's keys/values in storage order,
						// and each is the clean key of its source token rotated at t=0.
						ms := 12 * row
						for h := 0; h < l.Heads; h++ {
							keys, vals, ents := bk.Keys(h), bk.Values(h), bk.Entries(h)
							for i, e := range ents {
								got := ctx[layer].K[ms+i*row+h*D : ms+i*row+(h+1)*D]
								if !equal(got, keys[i*D:(i+1)*D]) || !equal(ctx[layer].V[ms+i*row+h*D:ms+i*row+(h+1)*D], vals[i*D:(i+1)*D]) {
									t.Fatalf("block %d layer %d head %d entry %d: context row differs from bank", b, layer, h, i)
								}
								f, tp := int(e.Source)/12, int(e.Source)%12
								if f < 1 || f > 3*b-3 {
									t.Fatalf("block %d: entry from frame %d (sink or window)", b, f)
								}
								if ub := p.UpdateBlock(int(e.Admitted)); ub != (f+5)/3 {
									t.Fatalf("entry from frame %d admitted by update %d of block %d, want block %d", f, e.Admitted, ub, (f+5)/3)
								}
								if fr, hh, ww := l.TokenPos(e.Source); fr != f || hh*4+ww != tp {
									t.Fatalf("TokenPos(%d) = %d,%d,%d", e.Source, fr, hh, ww)
								}
								want := rotated(l, s.cleanK[[2]int{f, layer}], 0)[tp*row+h*D : tp*row+(h+1)*D]
								if !equal(got, want) {
									t.Fatalf("block %d layer %d head %d entry %d (frame %d token %d): key is not the t=0 clean key", b, layer, h, i, f, tp)
								}
								if !equal(vals[i*D:(i+1)*D], s.cleanV[[2]int{f, layer}][tp*row+h*D:tp*row+(h+1)*D]) {
									t.Fatalf("block %d: value not paired with its key", b)
								}
							}
						}
						// Sink and window frames and query positions as for every windowed policy.
						var mem []tok
						_ = mem
						q, k, v := s.qkv(b, st, layer)
						sink, win, qt := windowSegs(cfg, b)
						s.expectFrames(t, Context{K: ctx[layer].K[:ms], V: ctx[layer].V[:ms]}, layer, k, v, sink)
						me := ms + n*row
						s.expectFrames(t, Context{K: ctx[layer].K[me:], V: ctx[layer].V[me:]}, layer, k, v, win)
						nq := 12 * row
						for f, tq := range qt {
							if !equal(ctx[layer].Q[f*nq:(f+1)*nq], rotated(l, q[f*nq:(f+1)*nq], tq)) {
								t.Fatalf("block %d: query frame %d not at t=%d", b, f, tq)
							}
						}
						if b >= 4 && (qt[0] != 9 || win[0].t != 7) {
							t.Fatalf("block %d: queries at %v, window from %d", b, qt, win[0].t)
						}
						// Stats of the first call record the update.
						offered := 0
						if st == 0 && b >= 2 {
							offered = 36
						}
						if stats.Offered[layer] != offered || stats.Occupancy[layer][0] != n {
							t.Fatalf("block %d step %d: stats offered %d occupancy %v", b, st, stats.Offered[layer], stats.Occupancy[layer])
						}
						if st == 0 && b >= 2 {
							d := p.LastDecisions()[layer]
							if stats.Admitted[layer] != d.Accepted || d.Candidates != 36 {
								t.Fatalf("block %d: admitted %d, decision %+v", b, stats.Admitted[layer], d)
							}
						}
					}
				}
			}
		})
	}
}

// bankStates returns the number of states held by all of p's banks
// (every layer and head).
func bankStates(p *DensityKV) int64 {
	var n int64
	for _, bk := range p.Banks() {
		for h := 0; h < bk.Config().Heads; h++ {
			n += int64(bk.HeadLen(h))
		}
	}
	return n
}

// TestDensityKVBytesMatchStorage checks live bytes against the storage
// formula (sink and window as BF16 K/V, bank states at the paper's size)
// and, for an f32 payload with f64 densities and a separate descriptor,
// that the banks count what they store while the sink and window stay BF16.
func TestDensityKVBytesMatchStorage(t *testing.T) {
	cfg := tinyConfig()
	cfg.Capacity = 30
	p, err := New(NameDensityKV, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wide := cfg
	wide.Bank.Payload, wide.Bank.Densities, wide.Bank.Descriptor = bank.PayloadF32, bank.F64, bank.DescPreRoPEKey
	pw, err := New(NameDensityKV, wide)
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(cfg.Layout, 5)
	sw := newStream(cfg.Layout, 5)
	m := storageModel(cfg)
	D := int64(cfg.Layout.HeadDim)
	for b := 0; b < 7; b++ {
		sw.block(t, pw, b, 1)
		ws := bankStates(pw.(*DensityKV))
		wframes := min(b*3+3, 1) + min(b*3+3-1, 5)
		if got, want := pw.Bytes(), m.KVFrames(int64(wframes))+ws*(2*D*4+2*8+8+4+D*4); got != want || (b >= 2 && ws == 0) {
			t.Fatalf("f32/f64 block %d: bytes %d, want %d (%d states)", b, got, want, ws)
		}
		s.block(t, p, b, 1)
		states := bankStates(p.(*DensityKV))
		frames := min(b*3+3, 1) + min(b*3+3-1, 5)
		want := m.KVFrames(int64(frames)) + states*m.BankStates(1)
		if p.Bytes() != want {
			t.Fatalf("block %d: bytes %d, want %d (%d frames, %d states)", b, p.Bytes(), want, frames, states)
		}
		if b >= 3 && states != int64(cfg.Layout.Layers*cfg.Layout.Heads*30) && states == 0 {
			t.Fatalf("block %d: empty banks", b)
		}
	}
}

// TestDensityKVVariants builds every bank variant from the policy config and
// checks the variant reaches the bank and runs.
func TestDensityKVVariants(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*BankConfig)
		chk  func(bank.Config) bool
	}{
		{"mean", func(b *BankConfig) { b.Ordering = bank.OrderMean }, func(c bank.Config) bool { return c.Ordering == bank.OrderMean }},
		{"max", func(b *BankConfig) { b.Ordering = bank.OrderMax }, func(c bank.Config) bool { return c.Ordering == bank.OrderMax }},
		{"source", func(b *BankConfig) { b.Ordering = bank.OrderSource }, func(c bank.Config) bool { return c.Ordering == bank.OrderSource }},
		{"refresh", func(b *BankConfig) { b.Baselines = bank.BaselinesRefresh }, func(c bank.Config) bool { return c.Baselines == bank.BaselinesRefresh }},
		{"densest", func(b *BankConfig) { b.Eviction = bank.EvictDensest }, func(c bank.Config) bool { return c.Eviction == bank.EvictDensest }},
		{"msource", func(b *BankConfig) { b.Eviction = bank.EvictMandatorySource }, func(c bank.Config) bool { return c.Eviction == bank.EvictMandatorySource }},
		{"perhead", func(b *BankConfig) { b.Prefix = bank.PrefixPerHead }, func(c bank.Config) bool { return c.Prefix == bank.PrefixPerHead }},
		{"sequential", func(b *BankConfig) { b.Admission = bank.AdmitSequential }, func(c bank.Config) bool { return c.Admission == bank.AdmitSequential }},
		{"f64", func(b *BankConfig) { b.Densities = bank.F64; b.Payload = bank.PayloadF32 }, func(c bank.Config) bool { return c.Density == bank.F64 && c.Payload == bank.PayloadF32 }},
		{"prerope", func(b *BankConfig) { b.Descriptor = bank.DescPreRoPEKey }, func(c bank.Config) bool { return c.DescDim == 32 }},
		{"kv", func(b *BankConfig) { b.Descriptor = bank.DescKeyValue }, func(c bank.Config) bool { return c.DescDim == 64 }},
		{"prekv", func(b *BankConfig) { b.Descriptor = bank.DescPreRoPEKeyValue }, func(c bank.Config) bool { return c.DescDim == 64 }},
		{"params", func(b *BankConfig) { b.Tau, b.Sigma, b.P, b.Eps, b.Delta, b.Workers = 1.5, 3, 1, 0.5, 1e-4, 1 }, func(c bank.Config) bool {
			return c.Tau == 1.5 && c.Sigma == 3 && c.P == 1 && c.Eps == 0.5 && c.Delta == 1e-4 && c.Workers == 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tinyConfig()
			cfg.Capacity = 40
			tc.mut(&cfg.Bank)
			pol, err := New(NameDensityKV, cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := pol.(*DensityKV)
			if !tc.chk(p.Banks()[0].Config()) {
				t.Fatalf("variant not applied: %+v", p.Banks()[0].Config())
			}
			s := newStream(cfg.Layout, 2)
			for b := 0; b < 6; b++ {
				ctx := s.block(t, p, b, 1)
				for l, c := range ctx {
					hm := p.HeadMemory(l)
					mx := 0
					for _, n := range hm {
						mx = max(mx, n)
						if n > 40 {
							t.Fatalf("head occupancy %d > capacity", n)
						}
					}
					if c.Parts.Memory != mx || (c.HeadMemory != nil) != (tc.name == "perhead" && !allEqual(hm)) {
						t.Fatalf("block %d layer %d: memory %d heads %v ctx heads %v", b, l, c.Parts.Memory, hm, c.HeadMemory)
					}
				}
			}
		})
	}
}

// TestDensityKVDescriptorContents checks what each descriptor variant
// stores per bank entry: the source token's post-RoPE key (at t = 0) or
// pre-RoPE key, alone or followed by its value.
func TestDensityKVDescriptorContents(t *testing.T) {
	for _, tc := range []struct {
		desc      bank.Descriptor
		post, val bool
	}{
		{bank.DescPostRoPEKey, true, false},
		{bank.DescPreRoPEKey, false, false},
		{bank.DescKeyValue, true, true},
		{bank.DescPreRoPEKeyValue, false, true},
	} {
		t.Run(tc.desc.String(), func(t *testing.T) {
			cfg := tinyConfig()
			cfg.Capacity = 40
			cfg.Bank.Payload = bank.PayloadF32
			cfg.Bank.Descriptor = tc.desc
			pol, err := New(NameDensityKV, cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := pol.(*DensityKV)
			s := newStream(cfg.Layout, 4)
			for b := 0; b < 6; b++ {
				s.block(t, p, b, 0)
			}
			l := cfg.Layout
			H, D, P := l.Heads, l.HeadDim, l.TokensPerFrame()
			checked := 0
			for layer, bk := range p.Banks() {
				for h := 0; h < H; h++ {
					desc, ents := bk.Descriptors(h), bk.Entries(h)
					dd := len(desc) / max(len(ents), 1)
					for i, e := range ents {
						f, tok := int(e.Source)/P, int(e.Source)%P
						raw := s.cleanK[[2]int{f, layer}]
						k := raw[(tok*H+h)*D : (tok*H+h+1)*D]
						if tc.post {
							k = rotated(l, raw, 0)[(tok*H+h)*D : (tok*H+h+1)*D]
						}
						want := append([]float32(nil), k...)
						if tc.val {
							want = append(want, s.cleanV[[2]int{f, layer}][(tok*H+h)*D:(tok*H+h+1)*D]...)
						}
						if !equal(desc[i*dd:(i+1)*dd], want) {
							t.Fatalf("layer %d head %d entry %d (source %d): descriptor differs from the %s of the source", layer, h, i, e.Source, tc.desc)
						}
						checked++
					}
				}
			}
			if checked == 0 {
				t.Fatal("empty banks")
			}
		})
	}
}

func allEqual(x []int) bool {
	for _, v := range x {
		if v != x[0] {
			return false
		}
	}
	return true
}

// TestDensityKVHugeKeys checks that a clean key the bank could not measure
// is rejected when it is written (not blocks later, half-way through the
// layers' bank updates), and that the policy is unchanged.
func TestDensityKVHugeKeys(t *testing.T) {
	cfg := tinyConfig()
	p, _ := New(NameDensityKV, cfg)
	s := newStream(cfg.Layout, 3)
	s.block(t, p, 0, 0)
	before := p.Bytes()
	if err := p.Begin(Call{Block: 1, First: true, Clean: true}); err != nil {
		t.Fatal(err)
	}
	q, k, v := s.qkv(1, 0, 0)
	k[(5*2+1)*32+3] = 3e18
	if _, err := p.Attend(0, q, k, v); err == nil || !strings.Contains(err.Error(), "token 5 head 1") {
		t.Fatalf("huge key: %v", err)
	}
	if p.Bytes() != before {
		t.Fatal("state changed")
	}
}

// TestDensityKVMatchesBankOnOfferedFrames feeds an independent bank, per
// layer, the blocks the policy should offer (frames 3b−5…3b−3 at block b,
// keys rotated at t = 0 with the reference rope, head-major, sources =
// global token index) and requires identical bank contents.
func TestDensityKVMatchesBankOnOfferedFrames(t *testing.T) {
	cfg := goldenDensityConfig(60)
	pol, err := New(NameDensityKV, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := pol.(*DensityKV)
	bc, err := bankConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Layout
	H, D, P := l.Heads, l.HeadDim, l.TokensPerFrame()
	oracle := make([]*bank.Bank, l.Layers)
	for i := range oracle {
		oracle[i], _ = bank.New(bc)
	}
	s := newStream(l, 31)
	for b := 0; b < 8; b++ {
		if b >= 2 {
			N := 3 * P
			for layer, ob := range oracle {
				blk := bank.Block{Keys: make([]float32, H*N*D), Values: make([]float32, H*N*D), Source: make([]int64, N)}
				for i := 0; i < 3; i++ {
					f := 3*b - 5 + i
					kr := rotated(l, s.cleanK[[2]int{f, layer}], 0)
					vv := s.cleanV[[2]int{f, layer}]
					for tp := 0; tp < P; tp++ {
						n := i*P + tp
						blk.Source[n] = int64(f*P + tp)
						for h := 0; h < H; h++ {
							copy(blk.Keys[(h*N+n)*D:(h*N+n+1)*D], kr[(tp*H+h)*D:(tp*H+h+1)*D])
							copy(blk.Values[(h*N+n)*D:(h*N+n+1)*D], vv[(tp*H+h)*D:(tp*H+h+1)*D])
						}
					}
				}
				if _, err := ob.Update(blk); err != nil {
					t.Fatal(err)
				}
			}
		}
		s.block(t, p, b, 2)
		for layer, ob := range oracle {
			pb := p.Banks()[layer]
			for h := 0; h < H; h++ {
				if fmt.Sprint(pb.Entries(h)) != fmt.Sprint(ob.Entries(h)) || !equal(pb.Keys(h), ob.Keys(h)) || !equal(pb.Values(h), ob.Values(h)) {
					t.Fatalf("block %d layer %d head %d: policy bank differs from the oracle bank", b, layer, h)
				}
			}
		}
	}
}

// TestDensityKVKnownAnswers checks two regimes whose answer is known
// without running Algorithm 1: with an unreachable growth limit, source
// ordering and a capacity that holds the whole history the bank is the full
// history in source order; with capacity 24 < N = 36 the first update keeps the first
// 24 candidates (frames 1–2) and every later update replaces the whole bank
// with 24 tokens of the newest offered frames.
func TestDensityKVKnownAnswers(t *testing.T) {
	for _, capacity := range []int{1000, 24} {
		cfg := goldenDensityConfig(capacity)
		cfg.Bank.Tau = 1e30
		if capacity == 1000 {
			cfg.Bank.Ordering = bank.OrderSource // admission order = source order
		}
		pol, _ := New(NameDensityKV, cfg)
		p := pol.(*DensityKV)
		s := newStream(cfg.Layout, 6)
		for b := 0; b < 7; b++ {
			s.block(t, p, b, 1)
			for layer, bk := range p.Banks() {
				for h := 0; h < 2; h++ {
					ents := bk.Entries(h)
					if capacity == 1000 {
						hist := historyTokens(cfg, b)
						if len(ents) != len(hist) {
							t.Fatalf("block %d: %d entries, want the %d history tokens", b, len(ents), len(hist))
						}
						for i, e := range ents {
							if e.Source != int64(hist[i].frame*12+hist[i].p) {
								t.Fatalf("block %d: entry %d is token %d, want %v", b, i, e.Source, hist[i])
							}
						}
						continue
					}
					if b < 2 {
						continue
					}
					if len(ents) != 24 {
						t.Fatalf("block %d layer %d head %d: %d entries", b, layer, h, len(ents))
					}
					for i, e := range ents {
						lo := int64((3*b - 5) * 12)
						if b == 2 && e.Source != 12+int64(i) || e.Source < lo || e.Source >= lo+36 {
							t.Fatalf("block %d: entry %d from token %d, want the offered frames %d…%d", b, i, e.Source, 3*b-5, 3*b-3)
						}
					}
				}
			}
		}
	}
}

// TestDensityKVFailedUpdateIsAtomic injects a finite float32 value that the
// bfloat16 bank payload cannot hold. The clean pass must refuse it (naming
// layer, token, head and dim) and leave the policy as a twin that never saw
// it. A bad value that reaches the cache anyway (here written directly into
// a committed frame) must make the next bank update fail as a whole: the
// error names the layer, head and bank row, every layer's bank and the
// whole policy stay bit-identical (also on retry), a snapshot holding it is
// refused by Load, and once the value is repaired the policy continues
// exactly like the twin.
func TestDensityKVFailedUpdateIsAtomic(t *testing.T) {
	cfg := tinyConfig() // bf16 payload, 2 layers
	cfg.Capacity = 30
	mk := func() *DensityKV {
		p, err := New(NameDensityKV, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p.(*DensityKV)
	}
	a, twin := mk(), mk()
	s := newStream(cfg.Layout, 41)
	save := func(p *DensityKV) []byte {
		var buf bytes.Buffer
		if err := p.Save(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	sameBanks := func(when string) {
		t.Helper()
		for l := range a.Banks() {
			var x, y bytes.Buffer
			a.Banks()[l].WriteTo(&x)
			twin.Banks()[l].WriteTo(&y)
			if !bytes.Equal(x.Bytes(), y.Bytes()) {
				t.Fatalf("%s: layer %d bank differs from the twin's", when, l)
			}
		}
		if a.Bytes() != twin.Bytes() {
			t.Fatalf("%s: bytes %d, twin %d", when, a.Bytes(), twin.Bytes())
		}
	}
	for b := 0; b < 4; b++ {
		s.block(t, a, b, 1)
		s.block(t, twin, b, 1)
	}
	const huge = float32(3.4028e38) // finite float32, +Inf in bfloat16
	row := cfg.Layout.Heads * cfg.Layout.HeadDim
	at := 7*row + 1*cfg.Layout.HeadDim + 5 // token 7 head 1 dim 5

	// The clean pass of block 4 refuses the value.
	for _, p := range []*DensityKV{a, twin} {
		if err := p.Begin(Call{Block: 4, First: true, Clean: true}); err != nil {
			t.Fatal(err)
		}
	}
	for l := 0; l < cfg.Layout.Layers; l++ {
		q, k, v := s.qkv(4, 0, l)
		if l == 1 {
			bad := append([]float32(nil), v...)
			bad[at] = huge
			_, err := a.Attend(l, q, k, bad)
			if err == nil || !strings.Contains(err.Error(), "layer 1: clean value at token 7 head 1 dim 5") || !strings.Contains(err.Error(), "bfloat16") {
				t.Fatalf("clean value %v accepted or badly reported: %v", huge, err)
			}
		}
		for _, p := range []*DensityKV{a, twin} {
			if _, err := p.Attend(l, q, k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range []*DensityKV{a, twin} {
		if err := p.End(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(save(a), save(twin)) {
		t.Fatal("refused clean value changed the policy")
	}

	// Frames 10…12 leave the window at block 5; plant the value in frame 11,
	// layer 1 (bank row (11−10)·12 + 7 = 19), past layer 0's update.
	var fr *frame
	for _, f := range a.recent {
		if f.ID == 11 {
			fr = f
		}
	}
	// The frame waits to be offered, so it may be held as the bank's
	// bfloat16 candidates: plant the value in a float32 copy of the layer.
	orig := fr.V[1]
	planted := orig.into(make([]float32, orig.len()))
	planted[at] = huge
	fr.V[1] = f32Tensor(planted)
	before := save(a)
	fresh := mk()
	if err := fresh.Load(bytes.NewReader(before)); !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "frame 11 layer 1") {
		t.Fatalf("Load of a snapshot holding %v: %v", huge, err)
	}
	for try := 0; try < 3; try++ {
		err := a.Begin(Call{Block: 5, First: true})
		if err == nil || !strings.Contains(err.Error(), "block 5 layer 1") || !strings.Contains(err.Error(), "offered frames 10…12") ||
			!strings.Contains(err.Error(), "overflows bfloat16) at head 1 row 19 col 5") {
			t.Fatalf("try %d: update with %v: %v", try, huge, err)
		}
		if !bytes.Equal(save(a), before) {
			t.Fatalf("try %d: failed update changed the policy", try)
		}
		sameBanks(fmt.Sprintf("try %d", try))
	}
	fr.V[1] = orig
	for b := 5; b < 9; b++ {
		for st := 0; st <= 2; st++ {
			c := Call{Block: b, Step: st, First: st == 0, Clean: st == 2}
			ca, _ := s.call(t, a, c)
			ct, _ := s.call(t, twin, c)
			for l := range ca {
				if !equal(ca[l].Q, ct[l].Q) || !equal(ca[l].K, ct[l].K) || !equal(ca[l].V, ct[l].V) || ca[l].Parts != ct[l].Parts {
					t.Fatalf("block %d step %d layer %d: context differs from the twin's", b, st, l)
				}
			}
		}
		sameBanks(fmt.Sprintf("block %d", b))
	}
	if !bytes.Equal(save(a), save(twin)) {
		t.Fatal("policy differs from the twin after recovery")
	}
}
