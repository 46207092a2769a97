package runfolder

import (
	"fmt"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
)

func TestPickLayers(t *testing.T) {
	for _, c := range []struct {
		L, n int
		want []int
	}{{4, 6, []int{0, 1, 2, 3}}, {30, 6, []int{0, 6, 12, 17, 23, 29}}, {7, 2, []int{0, 6}}, {1, 6, []int{0}}} {
		got := pickLayers(c.L, c.n)
		if len(got) != len(c.want) {
			t.Fatalf("pickLayers(%d, %d) = %v, want %v", c.L, c.n, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("pickLayers(%d, %d) = %v, want %v", c.L, c.n, got, c.want)
			}
		}
	}
}

// policies.png: the title says "side by side" only when several policies
// ran; policies that coincide stay visible (each its own dash pattern, the
// earlier ones wider beneath the later ones); a line at 0 is not the axis
// (margin); the legends sit right of the axes.
func TestPoliciesPanels(t *testing.T) {
	cfg := config.DemoConfig()
	line := func(policy string, occ int) []LogLine {
		var ls []LogLine
		for b := 0; b < 3; b++ {
			ls = append(ls, LogLine{Policy: policy, Block: b, Layer: 0, Second: float64(b+1) * 0.75, Occupancy: []int{occ, occ}, OccMin: occ, OccMax: occ,
				Tokens: Parts{Sink: 160, Memory: occ, Local: 800}})
		}
		return ls
	}
	cfg.Policies = []string{memory.NameDensityKV}
	title, _ := policiesPanels(cfg, map[string][]LogLine{memory.NameDensityKV: line(memory.NameDensityKV, 960)})
	if title != "Memory policy densitykv on the stream" {
		t.Fatalf("one policy: title %q", title)
	}
	cfg.Policies = []string{memory.NameNative, memory.NameFIFO, memory.NameDensityKV}
	by := map[string][]LogLine{memory.NameNative: line(memory.NameNative, 0), memory.NameFIFO: line(memory.NameFIFO, 960),
		memory.NameDensityKV: line(memory.NameDensityKV, 960)}
	title, panels := policiesPanels(cfg, by)
	if title != "Memory policies side by side on the same stream" || len(panels) != 2 {
		t.Fatalf("title %q, %d panels", title, len(panels))
	}
	for _, p := range panels {
		if p.Legend != "right" || !p.YMargin || len(p.Series) != 3 {
			t.Fatalf("panel %q: legend %q, margin %v, %d series", p.Title, p.Legend, p.YMargin, len(p.Series))
		}
		seen := map[string]bool{}
		for i, s := range p.Series {
			if i > 0 && s.Width >= p.Series[i-1].Width {
				t.Fatalf("panel %q: series %d (%s) not narrower than the one beneath it", p.Title, i, s.Name)
			}
			if k := fmt.Sprint(s.Dashes); seen[k] {
				t.Fatalf("panel %q: two series share the dash pattern %s", p.Title, k)
			} else {
				seen[k] = true
			}
		}
	}
	if _, err := policiesFigure(cfg, by); err != nil {
		t.Fatal(err)
	}
}
