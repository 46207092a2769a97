package plots

import (
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot/palette"
)

// Palettes are the sequential colour ramps a heat map may name; low values
// map to the first colour.
var Palettes = map[string][]color.RGBA{
	// oranges: white to dark orange (the paper's admission-count panel).
	"oranges": {{0xff, 0xf5, 0xeb, 0xff}, {0xfd, 0xd0, 0xa2, 0xff}, {0xfd, 0x8d, 0x3c, 0xff}, {0xd9, 0x48, 0x01, 0xff}, {0x7f, 0x27, 0x04, 0xff}},
	// blues: white to dark blue.
	"blues": {{0xf7, 0xfb, 0xff, 0xff}, {0xc6, 0xdb, 0xef, 0xff}, {0x6b, 0xae, 0xd6, 0xff}, {0x21, 0x71, 0xb5, 0xff}, {0x08, 0x30, 0x6b, 0xff}},
	// magma: black through purple and red to pale yellow (attention mass).
	"magma": {{0x00, 0x00, 0x04, 0xff}, {0x3b, 0x0f, 0x70, 0xff}, {0x8c, 0x29, 0x81, 0xff}, {0xde, 0x49, 0x68, 0xff}, {0xfe, 0x9f, 0x6d, 0xff}, {0xfc, 0xfd, 0xbf, 0xff}},
}

// PaletteNames returns the names of Palettes, sorted.
func PaletteNames() []string {
	names := make([]string, 0, len(Palettes))
	for n := range Palettes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// seriesColors is a qualitative palette (Okabe–Ito, readable by people with
// colour-vision deficiencies) for line series.
var seriesColors = []color.RGBA{
	{0x00, 0x72, 0xb2, 0xff}, // blue
	{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	{0x00, 0x9e, 0x73, 0xff}, // green
	{0xcc, 0x79, 0xa7, 0xff}, // purple
	{0xe6, 0x9f, 0x00, 0xff}, // orange
	{0x56, 0xb4, 0xe9, 0xff}, // sky blue
	{0x00, 0x00, 0x00, 0xff}, // black
	{0xf0, 0xe4, 0x42, 0xff}, // yellow
}

// SeriesColor returns the colour of the i-th line series.
func SeriesColor(i int) color.RGBA {
	return seriesColors[((i%len(seriesColors))+len(seriesColors))%len(seriesColors)]
}

// ramp is a palette.ColorMap interpolating linearly between anchor colours.
type ramp struct {
	anchors  []color.RGBA
	min, max float64
	alpha    float64
}

func newRamp(name string, min, max float64) (*ramp, error) {
	if name == "" {
		name = "oranges"
	}
	a, ok := Palettes[name]
	if !ok {
		return nil, fmt.Errorf("unknown palette %q (have %v)", name, PaletteNames())
	}
	return &ramp{anchors: a, min: min, max: max, alpha: 1}, nil
}

// At implements palette.ColorMap.
func (r *ramp) At(v float64) (color.Color, error) {
	if math.IsNaN(v) || v < r.min || v > r.max {
		return nil, palette.ErrOverflow
	}
	t := 0.0
	if r.max > r.min {
		t = (v - r.min) / (r.max - r.min)
	}
	return r.at(t), nil
}

func (r *ramp) at(t float64) color.RGBA {
	n := len(r.anchors) - 1
	x := t * float64(n)
	i := int(math.Floor(x))
	if i >= n {
		i = n - 1
	}
	if i < 0 {
		i = 0
	}
	f := x - float64(i)
	a, b := r.anchors[i], r.anchors[i+1]
	mix := func(p, q uint8) uint8 { return uint8(math.Round(float64(p) + f*(float64(q)-float64(p)))) }
	al := uint8(math.Round(255 * r.alpha))
	// Premultiplied alpha, as color.RGBA requires.
	pm := func(c uint8) uint8 { return uint8(math.Round(float64(c) * r.alpha)) }
	return color.RGBA{pm(mix(a.R, b.R)), pm(mix(a.G, b.G)), pm(mix(a.B, b.B)), al}
}

func (r *ramp) Max() float64           { return r.max }
func (r *ramp) SetMax(v float64)       { r.max = v }
func (r *ramp) Min() float64           { return r.min }
func (r *ramp) SetMin(v float64)       { r.min = v }
func (r *ramp) Alpha() float64         { return r.alpha }
func (r *ramp) SetAlpha(alpha float64) { r.alpha = alpha }

// Palette implements palette.ColorMap.
func (r *ramp) Palette(n int) palette.Palette {
	cs := make(rampPalette, n)
	for i := range cs {
		t := 0.0
		if n > 1 {
			t = float64(i) / float64(n-1)
		}
		cs[i] = r.at(t)
	}
	return cs
}

type rampPalette []color.Color

func (p rampPalette) Colors() []color.Color { return p }
