package main

import (
	"bytes"
	"strings"
	"testing"
)

// A resumed run's bar counts only the blocks still to run, so the restored
// blocks do not count as done in no time (which made the ETA too low).
func TestResumedProgressBarStartsAtTheResumedBlock(t *testing.T) {
	var buf bytes.Buffer
	p := newProgressTo(&buf, "simulate", 12, 7, false, true)
	if p.bar == nil {
		t.Fatal("no bar on a terminal")
	}
	if got := p.bar.GetMax(); got != 5 {
		t.Fatalf("resumed bar counts %d steps, want the 5 blocks left", got)
	}
	if st := p.bar.State(); st.CurrentNum != 0 {
		t.Fatalf("resumed bar starts at %d, want 0 (the restored blocks are not this run's)", st.CurrentNum)
	}
	p.add(1)
	if st := p.bar.State(); st.CurrentNum != 1 || p.done != 8 {
		t.Fatalf("after one block: bar at %d, done %d; want 1 and 8", st.CurrentNum, p.done)
	}
	p.finish()
	if !strings.Contains(buf.String(), "simulate (resumed at 7 of 12)") {
		t.Fatalf("the bar does not say where it resumed:\n%q", buf.String())
	}
	// A fresh run counts every block.
	q := newProgressTo(&buf, "simulate", 12, 0, false, true)
	if q.bar.GetMax() != 12 || q.bar.State().CurrentNum != 0 {
		t.Fatalf("fresh bar: max %d at %d", q.bar.GetMax(), q.bar.State().CurrentNum)
	}
}
