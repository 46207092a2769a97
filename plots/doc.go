// Package plots draws the figures of a densitykv run folder with
// gonum.org/v1/plot: line panels with min/max bands (occupancy and admissions
// over blocks), heat maps with linear or logarithmic colour scales (the
// admission montage of the paper's supplementary figure, the temporal
// attention trace), and the storage-versus-horizon figure.
//
// Every figure is written twice, as PNG (for viewing) and SVG (for papers), by
// Save, atomically (temporary file + rename), so a run stopped half-way never
// leaves a truncated image. The package knows nothing about banks or policies:
// callers hand it plain numbers, and it validates them (lengths, NaN) before
// drawing, returning errors that name the figure, panel and series at fault.
package plots
