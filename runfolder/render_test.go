package runfolder

import "testing"

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
