package runfolder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/densitykv/densitykv/drift"
	"github.com/densitykv/densitykv/plots"
)

// FileDrift is the drift monitor's records (package drift), one JSON line
// per generated block.
const FileDrift = drift.File

// ErrDriftStop is matched (errors.Is) by the error of a generate run that
// --stop-on-drift stopped after a resume checkpoint, as is ErrInterrupted.
var ErrDriftStop = errors.New("stopped by --stop-on-drift")

// driftStopError says which rule stopped the run.
type driftStopError struct{ why string }

func (e *driftStopError) Error() string { return ErrDriftStop.Error() + ": " + e.why }

func (e *driftStopError) Is(target error) bool {
	return target == ErrDriftStop || target == ErrInterrupted
}

// driftMonitor writes a generate run's drift.jsonl: one record per block
// from the block's latents and, with a VAE, its pixel frames (collected
// from the video stream while the block is decoded).
type driftMonitor struct {
	st    drift.State
	log   *LogWriter
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
func openDrift(dir string, gs *GenerateState, resume bool, start int, rules string, hooks Hooks) (*driftMonitor, error) {
	rs, err := drift.ParseRules(rules, "--stop-on-drift (generate.stop_on_drift)")
	if err != nil {
		return nil, &UserError{err}
	}
	d := &driftMonitor{rules: rs}
	size := int64(0)
	if resume && start > 0 {
		if gs.Drift == nil {
			hooks.info("resume: the run began without the drift monitor; no %s for its remaining blocks", FileDrift)
			return nil, nil
		}
		if gs.Drift.Blocks != start {
			return nil, fmt.Errorf("--resume: the checkpoint's drift state is after block %d, the run's after block %d", gs.Drift.Blocks-1, start-1)
		}
		d.st, size, d.spent = *gs.Drift, gs.DriftBytes, slices.Clone(gs.DriftSpent)
	}
	if d.log, err = OpenLog(filepath.Join(dir, FileDrift), size); err != nil {
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
func (d *driftMonitor) stage(gs *GenerateState) error {
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

// DriftStats aggregates one policy's drift.jsonl over a list's complete
// prompts (Collect).
type DriftStats struct {
	Policy  string `json:"policy"`
	Prompts int    `json:"prompts"` // prompts with drift records
	// Stats summarise each statistic over every block of every prompt.
	Stats map[string]DriftStat `json:"stats"`
	// Watch is, for each of drift.Watch's thresholds, how many prompts
	// cross it and the earliest block that does.
	Watch []DriftWatch `json:"watch"`
}

// DriftStat is one statistic over a policy's blocks.
type DriftStat struct {
	Blocks    int     `json:"blocks"`
	Median    float64 `json:"median"`
	Max       float64 `json:"max"`
	MaxPrompt int     `json:"max_prompt"` // the prompt index and block of the maximum
	MaxBlock  int     `json:"max_block"`
}

// DriftWatch is one threshold over a policy's prompts.
type DriftWatch struct {
	Rule    string `json:"rule"`
	Prompts int    `json:"prompts"` // prompts with a block beyond it
	// FirstBlock is the earliest such block over the prompts (−1: none),
	// FirstPrompt its prompt.
	FirstBlock  int `json:"first_block"`
	FirstPrompt int `json:"first_prompt"`
}

// driftAcc accumulates one policy's drift records.
type driftAcc struct {
	s      DriftStats
	values map[string][]float64
}

// readPromptDrift reads prompt folder sd's drift.jsonl for Collect: nil
// without one (a run without the monitor).
func readPromptDrift(sd string) ([]drift.Record, error) {
	recs, err := drift.ReadFile(filepath.Join(sd, FileDrift))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return recs, err
}

func (a *driftAcc) add(prompt int, recs []drift.Record) {
	if a.values == nil {
		a.values = map[string][]float64{}
		a.s.Stats = map[string]DriftStat{}
		rs, _ := drift.ParseRules(drift.Watch, "drift.Watch")
		for _, r := range rs {
			a.s.Watch = append(a.s.Watch, DriftWatch{Rule: r.String(), FirstBlock: -1, FirstPrompt: -1})
		}
	}
	a.s.Prompts++
	for _, r := range recs {
		for _, name := range drift.Names {
			v, ok := r.Stat(name)
			if !ok {
				continue
			}
			st := a.s.Stats[name]
			if st.Blocks == 0 || v > st.Max {
				st.Max, st.MaxPrompt, st.MaxBlock = v, prompt, r.Block
			}
			st.Blocks++
			a.s.Stats[name] = st
			a.values[name] = append(a.values[name], v)
		}
	}
	for i := range a.s.Watch {
		w := &a.s.Watch[i]
		rs, _ := drift.ParseRules(w.Rule, "drift.Watch")
		for _, r := range recs {
			if rs[0].Trips(r) {
				w.Prompts++
				if w.FirstBlock < 0 || r.Block < w.FirstBlock {
					w.FirstBlock, w.FirstPrompt = r.Block, prompt
				}
				break
			}
		}
	}
}

func (a *driftAcc) stats() DriftStats {
	for name, vs := range a.values {
		st := a.s.Stats[name]
		sorted := slices.Clone(vs)
		slices.Sort(sorted)
		if m := len(sorted) / 2; len(sorted)%2 == 1 {
			st.Median = sorted[m]
		} else {
			st.Median = (sorted[m-1] + sorted[m]) / 2
		}
		a.s.Stats[name] = st
	}
	return a.s
}
