package memory

import (
	"bytes"
	"testing"
)

// FuzzProtocol drives a policy with an arbitrary sequence of calls (begin
// with any block/first/clean flags, attends of any layer, ends, snapshot
// round trips): the policy must never panic, every accepted Attend must
// return a context of consistent size, and rejected calls must not change
// the live bytes.
func FuzzProtocol(f *testing.F) {
	f.Add(uint8(7), []byte{0, 1, 1, 2, 3, 1, 1, 2, 4, 0, 1, 1, 2})
	f.Add(uint8(0), []byte{0, 1, 1, 2, 0, 1, 1, 2, 0, 1, 1, 2, 0, 1, 1, 2, 0, 1, 1, 2, 0, 1, 1, 2})
	f.Add(uint8(2), []byte{5, 0, 1, 1, 2, 0, 1, 1, 2, 6, 0, 1, 2, 1, 1})
	f.Fuzz(func(t *testing.T, which uint8, ops []byte) {
		if len(ops) > 200 {
			return
		}
		cfg := tinyConfig()
		cfg.Capacity = 30
		cfg.LongLiveRAG.Descriptor = RAGKeyMean
		names := Names()
		name := names[int(which)%len(names)]
		p, err := New(name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := newStream(cfg.Layout, 5)
		block, layer := 0, 0
		row := cfg.Layout.Heads * cfg.Layout.HeadDim
		for i, op := range ops {
			before := p.Bytes()
			switch op % 7 {
			case 0, 3: // begin: the next block, the current block, or a wrong one
				c := Call{Block: block, First: op%2 == 0, Clean: op%3 == 0}
				if op%5 == 4 {
					c.Block += int(op) % 3
				}
				if err := p.Begin(c); err == nil {
					layer = 0
					if c.First {
						block = c.Block + 1
					}
				} else if p.Bytes() != before {
					t.Fatalf("op %d: failed begin changed bytes", i)
				}
			case 1: // attend the expected layer (or a wrong one)
				l := layer
				if op%11 == 1 {
					l++
				}
				q, k, v := s.qkv(block, i, l%cfg.Layout.Layers)
				c, err := p.Attend(l, q, k, v)
				if err == nil {
					layer++
					if len(c.K) != c.Parts.Total()*row || len(c.V) != len(c.K) || len(c.Q) != len(q) {
						t.Fatalf("op %d: context %d keys for parts %+v", i, len(c.K)/row, c.Parts)
					}
				} else if p.Bytes() != before {
					t.Fatalf("op %d: failed attend changed bytes", i)
				}
			case 2, 4:
				if err := p.End(); err != nil && p.Bytes() != before {
					t.Fatalf("op %d: failed end changed bytes", i)
				}
			case 5, 6: // snapshot round trip into a fresh policy
				var buf bytes.Buffer
				if err := p.(Snapshotter).Save(&buf); err != nil {
					continue
				}
				q, _ := New(name, cfg)
				if err := q.(Snapshotter).Load(&buf); err != nil {
					t.Fatalf("op %d: reload: %v", i, err)
				}
				if q.Bytes() != p.Bytes() {
					t.Fatalf("op %d: reloaded bytes %d, want %d", i, q.Bytes(), p.Bytes())
				}
				p = q
			}
		}
	})
}
