package runfolder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/densitykv/densitykv/drift"
	"github.com/densitykv/densitykv/plots"
)

// FileDrift is the drift monitor's records (package drift), one JSON line
// per generated block.
const FileDrift = drift.File

// driftFigure draws drift.jsonl (the complete lines of a torn file); nil
// without one.
func driftFigure(dir string) (*plots.Figure, error) {
	recs, err := drift.ReadFile(filepath.Join(dir, FileDrift))
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(recs) == 0) {
		return nil, nil
	}
	if err != nil && !errors.Is(err, drift.ErrTorn) {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if len(recs) == 0 {
		return nil, nil
	}
	return drift.Figure("Drift proxies per block (model-free statistics, not VBench scores)", recs)
}
