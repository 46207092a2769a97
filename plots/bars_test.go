package plots

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBars: a grouped bar chart renders, saves as PNG and SVG, draws the
// same bytes twice, puts each series' colour where its bars are, and
// refuses bad input naming the panel and series.
func TestBars(t *testing.T) {
	bp := BarPanel{Title: "wins", YLabel: "wins", Groups: []string{"30 s", "60 s", "120 s"}, Labels: true,
		Series: []BarSeries{{"A", []float64{8, 13, 10}}, {"B", []float64{0, 2, 5}}}}
	f, err := Bars("wins", 0, 0, bp)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := f.Save(filepath.Join(t.TempDir(), "wins"))
	if err != nil || len(paths) != 2 {
		t.Fatal(paths, err)
	}
	var a, b bytes.Buffer
	f.WritePNG(&a)
	g, _ := Bars("wins", 0, 0, bp)
	g.WritePNG(&b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same chart drew different bytes")
	}
	svg, _ := os.ReadFile(paths[1])
	if !strings.Contains(string(svg), ">13<") || !strings.Contains(string(svg), ">B<") {
		t.Error("the SVG lacks a bar label or a legend entry")
	}
	img, err := png.Decode(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	// Series A's colour fills more pixels than series B's (more wins).
	count := func(i int) int {
		c := SeriesColor(i)
		n := 0
		bd := img.Bounds()
		for y := bd.Min.Y; y < bd.Max.Y; y++ {
			for x := bd.Min.X; x < bd.Max.X; x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(bl>>8) == c.B {
					n++
				}
			}
		}
		return n
	}
	if na, nb := count(0), count(1); na <= 2*nb || nb == 0 {
		t.Errorf("pixels of series A %d, of B %d: want A's bars (31 wins) well above B's (7)", na, nb)
	}
	for _, c := range []struct {
		bp   BarPanel
		want string
	}{
		{BarPanel{Title: "p", Groups: []string{"a"}}, `panel "p": no groups or no series`},
		{BarPanel{Title: "p", Groups: []string{"a", "b"}, Series: []BarSeries{{"s", []float64{1}}}}, `series "s" has 1 values for 2 groups`},
		{BarPanel{Title: "p", Groups: []string{"a"}, Series: []BarSeries{{"s", []float64{math.NaN()}}}}, `series "s": value 0 is NaN`},
		{BarPanel{Title: "p", Groups: []string{"a"}, Series: []BarSeries{{"s", []float64{-1}}}}, "want a finite non-negative number"},
	} {
		if _, err := Bars("f", 0, 0, c.bp); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "plots: f: ") {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}
