package wan

// The element-wise steps below write every product that meets an addition
// through an explicit float32 (or float64) conversion, which Go's
// specification forbids fusing into a multiply-add: the results are the
// same bits whatever GOAMD64 level the binary is built for.

// modulate sets y = y·(1+scale) + shift in place for each row; scale and
// shift are [d] vectors per row group (rows/groups rows each).
func modulate(y []float32, rows, d, rowsPerFrame int, shift, scale func(f int) []float32) {
	for r := 0; r < rows; r++ {
		f := r / rowsPerFrame
		sh, sc := shift(f), scale(f)
		yr := y[r*d : (r+1)*d]
		for j := range yr {
			yr[j] = float32(yr[j]*(1+sc[j])) + sh[j]
		}
	}
}

// gatedAdd sets x += o·g row by row, g = gate(frame of the row) [d].
func gatedAdd(x, o []float32, rows, d, rowsPerFrame int, gate func(f int) []float32) {
	for r := 0; r < rows; r++ {
		g := gate(r / rowsPerFrame)
		xr, or := x[r*d:(r+1)*d], o[r*d:(r+1)*d]
		for j := range xr {
			xr[j] += float32(or[j] * g[j])
		}
	}
}

// addInto sets x += y.
func addInto(x, y []float32) {
	for i, v := range y[:len(x)] {
		x[i] += v
	}
}
