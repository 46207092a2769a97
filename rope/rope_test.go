package rope

import (
	"math"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct{ d, t, h, w int }{{128, 22, 21, 21}, {32, 6, 5, 5}, {64, 12, 10, 10}} {
		tb := MustNew(tc.d)
		a, b, c := tb.Split()
		if a != tc.t || b != tc.h || c != tc.w {
			t.Errorf("d=%d: split %d/%d/%d, want %d/%d/%d", tc.d, a, b, c, tc.t, tc.h, tc.w)
		}
	}
}

func TestAnglesMatchFormula(t *testing.T) {
	tb := MustNew(32)
	ang := tb.Angles(make([]float64, 16), Pos{T: 3, H: 2, W: 1})
	for j := 0; j < 6; j++ {
		want := 3 * math.Pow(10000, -2*float64(j)/12)
		if math.Abs(ang[j]-want) > 1e-12 {
			t.Fatalf("time pair %d: %v want %v", j, ang[j], want)
		}
	}
	for j := 6; j < 11; j++ {
		want := 2 * math.Pow(10000, -2*float64(j-6)/10)
		if math.Abs(ang[j]-want) > 1e-12 {
			t.Fatalf("height pair %d: %v want %v", j, ang[j], want)
		}
	}
	for j := 11; j < 16; j++ {
		want := 1 * math.Pow(10000, -2*float64(j-11)/10)
		if math.Abs(ang[j]-want) > 1e-12 {
			t.Fatalf("width pair %d: %v want %v", j, ang[j], want)
		}
	}
}

func TestRotationPreservesNormAndInverts(t *testing.T) {
	tb := MustNew(128)
	x := make([]float32, 2*128)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*0.37)) * 3
	}
	orig := append([]float32(nil), x...)
	pos := []Pos{{7, 5, 11}, {0, 29, 51}}
	if err := tb.Apply(x, 1, pos); err != nil {
		t.Fatal(err)
	}
	for tok := 0; tok < 2; tok++ {
		var n0, n1 float64
		for i := 0; i < 128; i++ {
			n0 += float64(orig[tok*128+i]) * float64(orig[tok*128+i])
			n1 += float64(x[tok*128+i]) * float64(x[tok*128+i])
		}
		if math.Abs(n0-n1) > 1e-4*n0 {
			t.Fatalf("norm changed %v -> %v", n0, n1)
		}
	}
	// rotating by -pos inverts
	neg := []Pos{{-7, -5, -11}, {0, -29, -51}}
	if err := tb.Apply(x, 1, neg); err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if math.Abs(float64(x[i]-orig[i])) > 1e-5 {
			t.Fatalf("inverse rotation: x[%d]=%v want %v", i, x[i], orig[i])
		}
	}
}

func TestRelativePosition(t *testing.T) {
	// q·k after RoPE depends only on the position difference.
	tb := MustNew(64)
	q := make([]float32, 64)
	k := make([]float32, 64)
	for i := range q {
		q[i] = float32(math.Cos(float64(i)))
		k[i] = float32(math.Sin(float64(i) * 1.3))
	}
	dot := func(pq, pk Pos) float64 {
		a := append([]float32(nil), q...)
		b := append([]float32(nil), k...)
		tb.RotateHead(a, pq, nil)
		tb.RotateHead(b, pk, nil)
		s := 0.0
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return s
	}
	d1 := dot(Pos{5, 3, 2}, Pos{2, 1, 1})
	d2 := dot(Pos{9, 7, 4}, Pos{6, 5, 3})
	if math.Abs(d1-d2) > 1e-4 {
		t.Fatalf("relative property violated: %v vs %v", d1, d2)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := New(7, DefaultTheta); err == nil {
		t.Error("odd head dim accepted")
	}
	if _, err := New(64, math.NaN()); err == nil {
		t.Error("NaN theta accepted")
	}
	tb := MustNew(32)
	if err := tb.Apply(make([]float32, 10), 1, []Pos{{}}); err == nil {
		t.Error("shape mismatch accepted")
	}
}

func TestGrid(t *testing.T) {
	g := Grid(2, 3, 4, 5)
	if len(g) != 24 || g[0] != (Pos{5, 0, 0}) || g[13] != (Pos{6, 0, 1}) || g[23] != (Pos{6, 2, 3}) {
		t.Fatalf("grid layout wrong: %v", g)
	}
}

// The Rotator's cached tables rotate exactly as Apply and RotateHead, at
// any temporal position, whatever the order positions are first used in.
func TestRotatorMatchesApply(t *testing.T) {
	for _, d := range []int{6, 32, 128} {
		tb := MustNew(d)
		const H, W, heads = 3, 4, 2
		r := tb.NewRotator(H, W)
		for _, tpos := range []int{5, 0, 2, 17} {
			x := make([]float32, H*W*heads*d)
			for i := range x {
				x[i] = float32(math.Sin(float64(i*7+tpos))) * 3
			}
			want := append([]float32(nil), x...)
			if err := tb.Apply(want, heads, Grid(1, H, W, tpos)); err != nil {
				t.Fatal(err)
			}
			got := append([]float32(nil), x...)
			r.Frame(got, heads, tpos)
			one := append([]float32(nil), x...)
			for p := 0; p < H*W; p++ {
				for h := 0; h < heads; h++ {
					tb.RotateHead(one[(p*heads+h)*d:(p*heads+h+1)*d], Pos{T: tpos, H: p / W, W: p % W}, make([]float64, d/2))
				}
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(one[i]) != math.Float32bits(want[i]) {
					t.Fatalf("d=%d t=%d value %d: Rotator %v, RotateHead %v, Apply %v", d, tpos, i, got[i], one[i], want[i])
				}
			}
		}
	}
}
