package cputime

import (
	"runtime"
	"testing"
	"time"
)

// Process grows while the process computes and never runs backwards.
func TestProcessAdvances(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no CPU time on", runtime.GOOS)
	}
	start := Process()
	deadline := time.Now().Add(50 * time.Millisecond)
	x := 1.0
	for time.Now().Before(deadline) {
		for i := 0; i < 1000; i++ {
			x = x*1.0000001 + 1e-9
		}
	}
	got := Process()
	if got <= start || x == 0 {
		t.Fatalf("CPU time %v after %v of busy work (started at %v)", got, 50*time.Millisecond, start)
	}
}
