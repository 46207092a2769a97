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

func sampleMontage(h, w, layers, frames int) Montage {
	m := Montage{Title: "test montage", Height: h, Width: w, Layers: layers, Frames: frames, FPS: 4, InitFrames: 6}
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

func TestHeatRangeLog(t *testing.T) {
	lo, hi := heatRange(HeatPanel{Log: true, Grid: Grid{Cols: 3, Rows: 1, Z: []float64{0, 3, 250}}})
	if lo != 0 || hi != 3 {
		t.Fatalf("log range = [%v, %v], want [0, 3] (decades around 3..250)", lo, hi)
	}
	lo, hi = heatRange(HeatPanel{Grid: Grid{Cols: 2, Rows: 1, Z: []float64{5, 5}}})
	if lo != 5 || hi != 6 {
		t.Fatalf("constant range = [%v, %v], want [5, 6]", lo, hi)
	}
	var ts []string
	for _, tk := range (pow10Ticks{}).Ticks(0, 5) {
		ts = append(ts, tk.Label)
	}
	if got := strings.Join(ts, ","); got != "1,10,100,1000,10000,1e5" {
		t.Fatalf("ticks %s", got)
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
