package plots

import (
	"bytes"
	"fmt"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"io"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// DPI is the resolution of PNG output.
const DPI = 110

// Figure is a finished drawing of a fixed size that can be written as PNG or
// SVG any number of times.
type Figure struct {
	// Name is used in error messages ("plots: occupancy: ...").
	Name string
	// Width and Height are the page size.
	Width, Height vg.Length

	draw func(dc draw.Canvas)
}

// WritePNG renders the figure as a PNG image to w.
func (f *Figure) WritePNG(w io.Writer) (err error) {
	defer recoverDraw(f.Name, &err)
	c := vgimg.NewWith(vgimg.UseWH(f.Width, f.Height), vgimg.UseDPI(DPI))
	f.draw(draw.New(c))
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
		return fmt.Errorf("plots: %s: write PNG: %w", f.Name, err)
	}
	return nil
}

// WriteSVG renders the figure as an SVG document to w.
func (f *Figure) WriteSVG(w io.Writer) (err error) {
	defer recoverDraw(f.Name, &err)
	c := vgsvg.New(f.Width, f.Height)
	f.draw(draw.New(c))
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("plots: %s: write SVG: %w", f.Name, err)
	}
	return nil
}

// Save writes base+".png" and base+".svg" atomically (each through a
// temporary file in the same directory and a rename) and returns the two
// paths, PNG first.
func (f *Figure) Save(base string) ([]string, error) {
	var png, svg bytes.Buffer
	if err := f.WritePNG(&png); err != nil {
		return nil, err
	}
	if err := f.WriteSVG(&svg); err != nil {
		return nil, err
	}
	paths := []string{base + ".png", base + ".svg"}
	for i, buf := range []*bytes.Buffer{&png, &svg} {
		if err := writeAtomic(paths[i], buf.Bytes()); err != nil {
			return nil, fmt.Errorf("plots: %s: %w", f.Name, err)
		}
	}
	return paths, nil
}

// recoverDraw turns a panic inside gonum/plot (it panics on degenerate axis
// ranges) into an error naming the figure.
func recoverDraw(name string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("plots: %s: drawing failed: %v", name, r)
	}
}

func writeAtomic(path string, data []byte) error { return atomicfile.WriteBytes(path, data) }
