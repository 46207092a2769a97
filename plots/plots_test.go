package plots

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
)

func sampleMontage(h, w, layers, frames int) Montage {
	m := Montage{Title: "test montage", Height: h, Width: w, Layers: layers, Frames: frames, FPS: 4, InitFrames: 6, Banks: 4 * layers}
	m.TokenBanks = make([]float64, frames*h*w)
	for i := range m.TokenBanks {
		m.TokenBanks[i] = float64((i * 7919) % 97)
	}
	m.LayerFrame = make([]float64, layers*frames)
	for l := 0; l < layers; l++ {
		for f := 0; f < frames; f++ {
			if f < 6 {
				m.LayerFrame[l*frames+f] = 1000
			} else if (l+f)%5 == 0 {
				m.LayerFrame[l*frames+f] = float64(1 + l)
			}
		}
	}
	m.EntryFraction = make([]float64, frames)
	m.PositionFraction = make([]float64, frames)
	for f := range m.EntryFraction {
		m.EntryFraction[f] = math.Exp(-float64(f) / 3)
		m.PositionFraction[f] = math.Min(1, 2*m.EntryFraction[f])
	}
	return m
}

func TestFiguresRenderAndSave(t *testing.T) {
	dir := t.TempDir()
	x := []float64{0, 1, 2, 3}
	lines, err := Lines("occupancy", "Occupancy", 0, 0,
		LinePanel{Title: "layer 0", XLabel: "block", YLabel: "states", Shade: &Shade{From: 0, To: 1, Label: "init"},
			Series: []Series{{Name: "mean", X: x, Y: []float64{1, 2, 3, 4}, Lo: []float64{0, 1, 2, 3}, Hi: []float64{2, 3, 4, 5}}}},
		LinePanel{Title: "log", LogY: true, Series: []Series{{Name: "a", X: x, Y: []float64{1, 10, 100, 1000}, Points: true, Dashed: true}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	heat, err := Heat("trace", 0, 0, HeatPanel{Title: "attention", Palette: "magma",
		Grid: Grid{Cols: 3, Rows: 2, Z: []float64{0, 1, 2, 3, 4, 5}}})
	if err != nil {
		t.Fatal(err)
	}
	bigHeat, err := Heat("big", 0, 0, HeatPanel{Title: "raster", Log: true, ImageY: true,
		Grid: Grid{Cols: 100, Rows: 50, Z: make([]float64, 5000)}})
	if err != nil {
		t.Fatal(err)
	}
	mont, err := AdmissionMontage("montage", sampleMontage(6, 10, 4, 20))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*Figure{lines, heat, bigHeat, mont} {
		paths, err := f.Save(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		b, err := os.ReadFile(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: PNG does not decode: %v", f.Name, err)
		}
		if img.Bounds().Dx() < 300 || img.Bounds().Dy() < 200 {
			t.Errorf("%s: PNG is only %v", f.Name, img.Bounds())
		}
		s, err := os.ReadFile(paths[1])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(s, []byte("<svg")) {
			t.Errorf("%s: SVG output has no <svg element", f.Name)
		}
	}
	// No temporary files left behind.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	if os.Getenv("PLOTS_KEEP") != "" {
		for _, f := range []*Figure{lines, heat, bigHeat, mont} {
			f.Save(filepath.Join(os.Getenv("PLOTS_KEEP"), f.Name))
		}
	}
}

func TestValidationErrors(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name string
		run  func() error
		want string
	}{
		{"length mismatch", func() error {
			_, err := Lines("f", "", 0, 0, LinePanel{Title: "p", Series: []Series{{Name: "s", X: []float64{1, 2}, Y: []float64{1}}}})
			return err
		}, `plots: f: panel "p": series "s": 2 x values but 1 y values`},
		{"nan", func() error {
			_, err := Lines("f", "", 0, 0, LinePanel{Title: "p", Series: []Series{{Name: "s", X: []float64{1}, Y: []float64{nan}}}})
			return err
		}, "value 0 is NaN"},
		{"half band", func() error {
			_, err := Lines("f", "", 0, 0, LinePanel{Title: "p", Series: []Series{{Name: "s", X: []float64{1}, Y: []float64{1}, Lo: []float64{0}}}})
			return err
		}, "band needs both Lo and Hi"},
		{"log nonpositive", func() error {
			_, err := Lines("f", "", 0, 0, LinePanel{Title: "p", LogY: true, Series: []Series{{Name: "s", X: []float64{0, 1}, Y: []float64{1, 0}}}})
			return err
		}, "not positive on a log axis"},
		{"empty", func() error { _, err := Lines("f", "", 0, 0, LinePanel{Title: "p"}); return err }, "no data points"},
		{"no panels", func() error { _, err := Lines("f", "", 0, 0); return err }, "no panels"},
		{"grid size", func() error {
			_, err := Heat("h", 0, 0, HeatPanel{Title: "p", Grid: Grid{Cols: 2, Rows: 2, Z: []float64{1}}})
			return err
		}, "grid has 1 values, want 2 rows × 2 cols = 4"},
		{"montage tokens", func() error {
			m := sampleMontage(2, 3, 2, 4)
			m.TokenBanks = m.TokenBanks[:6]
			_, err := AdmissionMontage("m", m)
			return err
		}, "TokenBanks has 6 values, want 4 frames × 2 × 3"},
		{"grid inf", func() error {
			_, err := Heat("h", 0, 0, HeatPanel{Title: "p", Grid: Grid{Cols: 2, Rows: 1, Z: []float64{1, math.Inf(1)}}})
			return err
		}, "row 0 col 1 is +Inf"},
		{"palette", func() error {
			_, err := Heat("h", 0, 0, HeatPanel{Title: "p", Palette: "rainbow", Grid: Grid{Cols: 1, Rows: 1, Z: []float64{1}}})
			return err
		}, `unknown palette "rainbow"`},
		{"montage sizes", func() error {
			m := sampleMontage(2, 3, 2, 4)
			m.LayerFrame = m.LayerFrame[:5]
			_, err := AdmissionMontage("m", m)
			return err
		}, "LayerFrame has 5 values, want 2 layers × 4 frames"},
		{"montage fps", func() error {
			m := sampleMontage(2, 3, 2, 4)
			m.FPS = 0
			_, err := AdmissionMontage("m", m)
			return err
		}, "FPS is 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.run()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// The colour scale spans the data: a log scale from a little below the
// smallest positive value (so that it is tinted, not white like zero) to
// the largest, a linear one from 0, both up to ZMax when it is set; a
// short log bar is labelled at 1, 2 and 5 times the powers of ten.
func TestHeatRangeLog(t *testing.T) {
	lo, hi := heatRange(HeatPanel{Log: true, Grid: Grid{Cols: 3, Rows: 1, Z: []float64{0, 3, 250}}})
	span := math.Log10(250) - math.Log10(3)
	if math.Abs(lo-(math.Log10(3)-span/10)) > 1e-12 || math.Abs(hi-math.Log10(250)) > 1e-12 {
		t.Fatalf("log range = [%v, %v], want [log 3 − span/10, log 250]", lo, hi)
	}
	// The montage's bank counts: 1…16 of 16 banks on a log scale, or 0…16.
	lo, hi = heatRange(HeatPanel{Log: true, ZMax: 16, Grid: Grid{Cols: 3, Rows: 1, Z: []float64{0, 1, 9}}})
	if math.Abs(hi-math.Log10(16)) > 1e-12 || math.Abs(lo-(-0.12041199826559248)) > 1e-12 {
		t.Fatalf("log range with ZMax = [%v, %v], want [−0.12, log 16]", lo, hi)
	}
	lo, hi = heatRange(HeatPanel{ZMax: 4, Grid: Grid{Cols: 3, Rows: 1, Z: []float64{1, 2, 3}}})
	if lo != 0 || hi != 4 {
		t.Fatalf("linear range with ZMax = [%v, %v], want [0, 4]", lo, hi)
	}
	lo, hi = heatRange(HeatPanel{Grid: Grid{Cols: 2, Rows: 1, Z: []float64{5, 5}}})
	if lo != 0 || hi != 5 {
		t.Fatalf("constant range = [%v, %v], want [0, 5]", lo, hi)
	}
	lo, hi = heatRange(HeatPanel{Grid: Grid{Cols: 2, Rows: 1, Z: []float64{-2, 3}}})
	if lo != -2 || hi != 3 {
		t.Fatalf("signed range = [%v, %v], want [-2, 3]", lo, hi)
	}
	label := func(lo, hi float64) string {
		var ts []string
		for _, tk := range (pow10Ticks{}).Ticks(lo, hi) {
			ts = append(ts, tk.Label)
		}
		return strings.Join(ts, ",")
	}
	if got := label(0, 5); got != "1,10,100,1000,10000,1e5" {
		t.Fatalf("ticks %s", got)
	}
	if got := label(-0.12, math.Log10(16)); got != "1,2,5,10" {
		t.Fatalf("short-bar ticks %s", got)
	}
	if got := label(-1.5, -0.6); got != "0.05,0.1,0.2" {
		t.Fatalf("sub-unit ticks %s", got)
	}
}

// The admission montage's scales follow the data: panel (a) runs from 0
// to the number of banks (linear up to 64 banks, log beyond), panel (b)
// spans its own counts, panel (c)'s fraction axis ends at 1 with its
// legend outside the axes.
func TestMontageScales(t *testing.T) {
	for _, banks := range []int{4, 16, 360} {
		m := Montage{Height: 2, Width: 2, Layers: 2, Frames: 3, FPS: 4, Banks: banks,
			TokenBanks: []float64{0, 1, 2, 3, 4, 0, 1, 1, 2, 2, 0, 0}, LayerFrame: []float64{0, 5, 9, 1, 3, 20},
			EntryFraction: []float64{0, 0.5, 1}, PositionFraction: []float64{0, 1, 1}}
		a, b, c := m.panels(nil)
		lo, hi := heatRange(a)
		want := float64(banks)
		if a.Log {
			want = math.Log10(want)
		}
		if a.Log != (banks > 64) || hi != want || (!a.Log && lo != 0) || !strings.Contains(a.ZLabel, fmt.Sprint(banks)) {
			t.Fatalf("%d banks: panel (a) log %v range [%v, %v], label %q", banks, a.Log, lo, hi, a.ZLabel)
		}
		if lo, hi := heatRange(b); !b.Log || math.Abs(hi-math.Log10(20)) > 1e-12 || lo > 0 || lo < -0.2 {
			t.Fatalf("panel (b) range [%v, %v], want the data's 1…20", lo, hi)
		}
		if c.YMax != 1 || !c.YMargin || c.Legend != "right" {
			t.Fatalf("panel (c): YMax %v, margin %v, legend %q", c.YMax, c.YMargin, c.Legend)
		}
		if _, err := AdmissionMontage("m", m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := AdmissionMontage("m", Montage{Height: 1, Width: 1, Layers: 1, Frames: 1, FPS: 4, TokenBanks: []float64{0}, LayerFrame: []float64{0},
		EntryFraction: []float64{0}, PositionFraction: []float64{0}}); err == nil {
		t.Fatal("a montage without its bank count was accepted")
	}
}

func TestRampEndpoints(t *testing.T) {
	r, err := newRamp("oranges", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	c0, _ := r.At(0)
	c1, _ := r.At(1)
	if c0 != r.anchors[0] || c1 != r.anchors[len(r.anchors)-1] {
		t.Fatalf("ramp endpoints %v %v, want %v %v", c0, c1, r.anchors[0], r.anchors[len(r.anchors)-1])
	}
	if _, err := r.At(2); err == nil {
		t.Fatal("At(2) outside [0,1] gave no error")
	}
}

// The same data draws the same bytes (run folders are reproducible).
func TestDeterministicOutput(t *testing.T) {
	m := sampleMontage(5, 7, 3, 30)
	var a, b, sa, sb bytes.Buffer
	f1, err := AdmissionMontage("m", m)
	if err != nil {
		t.Fatal(err)
	}
	f2, _ := AdmissionMontage("m", m)
	if err := f1.WritePNG(&a); err != nil {
		t.Fatal(err)
	}
	f2.WritePNG(&b)
	f1.WriteSVG(&sa)
	f2.WriteSVG(&sb)
	if !bytes.Equal(a.Bytes(), b.Bytes()) || !bytes.Equal(sa.Bytes(), sb.Bytes()) {
		t.Fatal("drawing the same montage twice gave different bytes")
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{{0, 30, "0,5,10,15,20,25,30"}, {0, 1.2, "0,0.2,0.4,0.6,0.8,1,1.2"}, {2.5, 120, "20,40,60,80,100,120"}, {0, 9360, "0,2000,4000,6000,8000"}} {
		var labels []string
		for _, tk := range (niceTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, ","); got != c.want {
			t.Errorf("ticks(%v, %v) = %s, want %s", c.lo, c.hi, got, c.want)
		}
	}
}

// redColumns renders f and returns, per pixel column, whether it holds a
// pure red pixel.
func redColumns(t *testing.T, f *Figure) []bool {
	t.Helper()
	var buf bytes.Buffer
	if err := f.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	cols := make([]bool, b.Dx())
	for x := b.Min.X; x < b.Max.X; x++ {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r > 0xf000 && g < 0x1000 && bl < 0x1000 {
				cols[x-b.Min.X] = true
				break
			}
		}
	}
	return cols
}

// runs returns the [start, end) pixel-column ranges of true values.
func runs(cols []bool) [][2]int {
	var out [][2]int
	for x := 0; x < len(cols); x++ {
		if cols[x] && (x == 0 || !cols[x-1]) {
			out = append(out, [2]int{x, x})
		}
		if cols[x] {
			out[len(out)-1][1] = x + 1
		}
	}
	return out
}

// TestLegendOutsideAndSeriesStyle draws a red horizontal line across the
// whole x range at the height of the legend: with the legend inside, its
// text breaks the line into pieces; with Legend "right" the line is whole
// and the legend's red thumbnail is a separate segment right of the line's
// end (outside the axes).
func TestLegendOutsideAndSeriesStyle(t *testing.T) {
	red := color.RGBA{0xff, 0, 0, 0xff}
	panel := func(legend string) LinePanel {
		return LinePanel{Title: "p", Legend: legend, Series: []Series{
			{Name: "red series with a long name", X: []float64{0, 10}, Y: []float64{1, 1}, Color: red, Width: vg.Points(2)},
			{Name: "other", X: []float64{0, 10}, Y: []float64{0, 0.5}, Dashes: SeriesDashes(2)},
		}}
	}
	for _, legend := range []string{"top-right", "right"} {
		f, err := Lines("legend", "", 0, 0, panel(legend))
		if err != nil {
			t.Fatal(err)
		}
		rs := runs(redColumns(t, f))
		if legend != "right" {
			if len(rs) < 3 {
				t.Fatalf("inside legend: red column runs %v, want the line broken by the legend text", rs)
			}
			continue
		}
		if len(rs) != 2 {
			t.Fatalf("outside legend: red column runs %v, want the whole line and the thumbnail", rs)
		}
		line, thumb := rs[0], rs[1]
		if line[1]-line[0] < 200 || thumb[0]-line[1] < 5 || thumb[1]-thumb[0] > 60 {
			t.Fatalf("line %v, thumbnail %v: want a long line and a short thumbnail right of it", line, thumb)
		}
	}
	if _, err := Lines("bad", "", 0, 0, LinePanel{Title: "x", Legend: "outside", Series: panel("").Series}); err == nil {
		t.Fatal("unknown legend placement accepted")
	}
	seen := map[string]bool{}
	for i := 0; i < 7; i++ {
		k := fmt.Sprint(SeriesDashes(i))
		if seen[k] {
			t.Fatalf("dash pattern %d repeats %s", i, k)
		}
		seen[k] = true
	}
	if SeriesDashes(0) != nil {
		t.Fatal("pattern 0 must be solid")
	}
}
