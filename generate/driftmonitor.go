package generate

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/densitykv/densitykv/drift"
	"github.com/densitykv/densitykv/runfolder"
)

// ErrDriftStop is matched (errors.Is) by the error of a generate run that
// --stop-on-drift stopped after a resume checkpoint, as is ErrInterrupted.
var ErrDriftStop = errors.New("stopped by --stop-on-drift")

// driftStopError says which rule stopped the run.
type driftStopError struct{ why string }

func (e *driftStopError) Error() string { return ErrDriftStop.Error() + ": " + e.why }

func (e *driftStopError) Is(target error) bool {
	return target == ErrDriftStop || target == runfolder.ErrInterrupted
}

// driftMonitor writes a generate run's drift.jsonl: one record per block
// from the block's latents and, with a VAE, its pixel frames (collected
// from the video stream while the block is decoded).
type driftMonitor struct {
	st    drift.State
	log   *runfolder.LogWriter
	rules []drift.Rule
	// spent are the rules that stopped the run once: a resumed run is not
	// stopped by them again (its configuration cannot change on resume).
	spent []string
	// The block's frames so far: t frames of h×w rgb24.
	frames  []byte
	t, h, w int
}

// openDrift opens drift.jsonl for a new run (empty) or, on resume, cut
// back to the checkpoint's size with the checkpoint's comparisons. A run
// resumed from a checkpoint written before the monitor existed has no
// comparisons: it writes no drift.jsonl (nil, nil).
func openDrift(dir string, gs *runfolder.GenerateState, resume bool, start int, rules string, hooks runfolder.Hooks) (*driftMonitor, error) {
	rs, err := drift.ParseRules(rules, "--stop-on-drift (generate.stop_on_drift)")
	if err != nil {
		return nil, &runfolder.UserError{Err: err}
	}
	d := &driftMonitor{rules: rs}
	size := int64(0)
	if resume && start > 0 {
		if gs.Drift == nil {
			hooks.Infof("resume: the run began without the drift monitor; no %s for its remaining blocks", runfolder.FileDrift)
			return nil, nil
		}
		if gs.Drift.Blocks != start {
			return nil, fmt.Errorf("--resume: the checkpoint's drift state is after block %d, the run's after block %d", gs.Drift.Blocks-1, start-1)
		}
		d.st, size, d.spent = *gs.Drift, gs.DriftBytes, slices.Clone(gs.DriftSpent)
	}
	if d.log, err = runfolder.OpenLog(filepath.Join(dir, runfolder.FileDrift), size); err != nil {
		return nil, fmt.Errorf("drift: %w", err)
	}
	return d, nil
}

// frame adds one pixel frame (rgb24 [h][w][3]) of the block being decoded.
func (d *driftMonitor) frame(rgb []byte, h, w int) error {
	if d.t > 0 && (h != d.h || w != d.w) {
		return fmt.Errorf("drift: a frame of %d×%d after frames of %d×%d", h, w, d.h, d.w)
	}
	d.frames = append(d.frames, rgb...)
	d.t, d.h, d.w = d.t+1, h, w
	return nil
}

// block writes block b's record from its latents and the frames collected
// since the last block, and returns the rule it trips first, if any rule
// not yet spent trips (the rule is then spent).
func (d *driftMonitor) block(b int, latents []float32) (drift.Record, *drift.Rule, error) {
	var fr []byte
	if d.t > 0 {
		fr = d.frames
	}
	rec, err := d.st.Next(b, latents, fr, d.t, d.h, d.w)
	d.frames, d.t = d.frames[:0], 0
	if err != nil {
		return rec, nil, err
	}
	// Synced every block, so that it can be watched while the run goes.
	if err := d.log.Write(rec); err != nil {
		return rec, nil, fmt.Errorf("drift: %w", err)
	}
	if _, err := d.log.Sync(); err != nil {
		return rec, nil, fmt.Errorf("drift: %w", err)
	}
	for _, r := range d.rules {
		if r.Trips(rec) && !slices.Contains(d.spent, r.String()) {
			d.spent = append(d.spent, r.String())
			return rec, &r, nil
		}
	}
	return rec, nil, nil
}

// stage syncs drift.jsonl and records its size and the comparisons in gs.
func (d *driftMonitor) stage(gs *runfolder.GenerateState) error {
	if d == nil {
		gs.Drift, gs.DriftBytes, gs.DriftSpent = nil, 0, nil
		return nil
	}
	n, err := d.log.Sync()
	if err != nil {
		return fmt.Errorf("drift: %w", err)
	}
	st := d.st
	gs.Drift, gs.DriftBytes, gs.DriftSpent = &st, n, slices.Clone(d.spent)
	return nil
}

func (d *driftMonitor) close() {
	if d != nil {
		d.log.Close()
	}
}

// tripMessage says which rule block b tripped and with what value.
func tripMessage(b int, r drift.Rule, rec drift.Record) string {
	v, _ := rec.Stat(r.Stat)
	return fmt.Sprintf("block %d tripped %s (%s = %s)", b, r, r.Stat, strconv.FormatFloat(v, 'g', 4, 64))
}
