package generate

import (
	"testing"

	"github.com/densitykv/densitykv/runfolder"
)

// TestLoadProgress: a model's loading is reported in MiB, once per MiB
// step, ending exactly at the total.
func TestLoadProgress(t *testing.T) {
	type call struct{ done, total int }
	var calls []call
	f := loadProgress(runfolder.Hooks{Progress: func(stage string, done, total int) {
		if stage != "load" {
			t.Fatalf("stage %q", stage)
		}
		calls = append(calls, call{done, total})
	}}, "load")
	total := int64(5<<20 + 3)
	for _, d := range []int64{1, 1 << 19, 1 << 20, 1<<20 + 7, 3 << 20, 5 << 20, total} {
		f(d, total)
	}
	want := []call{{0, 6}, {1, 6}, {3, 6}, {5, 6}, {6, 6}}
	if len(calls) != len(want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("calls %v, want %v", calls, want)
		}
	}
	if loadProgress(runfolder.Hooks{}, "load") != nil {
		t.Fatal("a reporter without a Progress hook")
	}
}
