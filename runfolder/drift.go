package runfolder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

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
