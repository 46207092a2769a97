package generate

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/drift"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/storage"
	"github.com/densitykv/densitykv/video"
)

// Report is what CollectJob makes of a prompt list's folders (report.json).
type Report struct {
	List    runfolder.ListManifest `json:"list"`
	Folders []string               `json:"folders"`
	// Prompts are the selected prompts in run order; Missing the indices
	// with no complete video in any folder (blank lines are not missing).
	Prompts  []ReportPrompt `json:"prompts"`
	Complete int            `json:"complete"`
	Blank    int            `json:"blank"`
	Missing  []int          `json:"missing"`
	// Duplicates are prompts complete in more than one folder (the first
	// folder's is reported).
	Duplicates []int `json:"duplicates,omitempty"`
	// Shards are the shard status files found.
	Shards []ReportShard `json:"shards"`
	// MemoryLog aggregates memory_log.jsonl over the complete prompts, per
	// policy.
	MemoryLog []LogStats `json:"memory_log"`
	// Storage is the live persistent bytes (storage.json) at each horizon
	// (the list's generate.horizons, or the video's end) over the complete
	// prompts, with the paper's formula for the same configuration.
	Storage []StorageStats `json:"storage"`
	// Drift aggregates drift.jsonl (package drift: proxies, not VBench
	// scores) over the complete prompts, per policy.
	Drift []DriftStats `json:"drift,omitempty"`
}

// ReportPrompt is one prompt of the list.
type ReportPrompt struct {
	Index  int    `json:"index"`
	Prompt string `json:"prompt"`
	State  string `json:"state"` // complete, blank, stopped, missing
	Dir    string `json:"dir,omitempty"`
	Video  string `json:"video,omitempty"`
	// Horizons are the horizon videos present.
	Horizons []string                `json:"horizons,omitempty"`
	Blocks   int                     `json:"completed_blocks"`
	Policy   *runfolder.PolicyTotals `json:"totals,omitempty"`
	// Drift summarises the prompt's drift.jsonl against drift.Watch.
	Drift *drift.Summary `json:"drift,omitempty"`
}

// ReportShard is one shard status file.
type ReportShard struct {
	File     string `json:"file"`
	Shard    string `json:"shard"`
	Host     string `json:"host,omitempty"`
	Updated  string `json:"updated"`
	Complete bool   `json:"complete"`
	Prompts  int    `json:"prompts"`
}

// LogStats aggregates a policy's memory-log lines.
type LogStats struct {
	Policy  string `json:"policy"`
	Prompts int    `json:"prompts"`
	Lines   int    `json:"lines"`
	Updates int    `json:"bank_updates"` // lines with a bank update
	// Per layer-block line, over every prompt: admitted (summed over
	// heads), evictions, the occupancy per head at the end.
	AdmittedTotal    int64   `json:"admitted_total"`
	EvictedMandatory int64   `json:"evicted_mandatory"`
	EvictedCapacity  int64   `json:"evicted_capacity"`
	AdmittedPerLine  float64 `json:"admitted_per_update_mean"`
	FinalOccMean     float64 `json:"occupancy_final_mean"`
	FinalOccMin      int     `json:"occupancy_final_min"`
	FinalOccMax      int     `json:"occupancy_final_max"`
	Flushed          int     `json:"flushed"`
	FloorBlocked     int     `json:"floor_blocked"`
	Infeasible       int     `json:"infeasible"`
	// The authors' memory-log means, averaged over the lines that carry
	// them (nil when none does).
	CandidateDensityMean *float64 `json:"candidate_density_mean,omitempty"`
	AdmissionScoreMean   *float64 `json:"admission_score_mean,omitempty"`
	// UpdateSeconds is the wall-clock update time summed over prompts
	// (machine- and load-dependent).
	UpdateSeconds float64 `json:"update_seconds"`
}

// StorageStats is one policy at one horizon.
type StorageStats struct {
	Policy  string  `json:"policy"`
	Seconds float64 `json:"seconds"`
	Prompts int     `json:"prompts"`
	Mean    float64 `json:"bytes_mean"`
	Min     int64   `json:"bytes_min"`
	Max     int64   `json:"bytes_max"`
	// Formula is the paper's accounting (package storage) for the list's
	// configuration (0 for a policy it has no row for).
	Formula int64 `json:"bytes_formula"`
}

// FileReport and FileReportMD are CollectJob's outputs.
const (
	FileReport   = "report.json"
	FileReportMD = "report.md"
)

// readListFolders reads the list of the folders dirs (the first's
// configuration and prompts; the others must hold the same list) into
// rep.List, with every shard's status in rep.Shards.
func readListFolders(dirs []string, rep *Report) (gc config.GenerateConfig, prompts *runfolder.PromptList, err error) {
	for k, d := range dirs {
		var man runfolder.ListManifest
		if err := runfolder.ReadJSON(filepath.Join(d, runfolder.FileList), &man); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return gc, nil, userf("collect: %s is not a prompt-list folder (no %s; generate --prompts makes one)", d, runfolder.FileList)
			}
			return gc, nil, fmt.Errorf("collect: %w", err)
		}
		if k == 0 {
			rep.List = man
			b, err := runfolder.ReadRecord(filepath.Join(d, runfolder.FileBatch))
			if err != nil {
				return gc, nil, fmt.Errorf("collect: %w", err)
			}
			if _, err := config.Decode(b, &gc, false); err != nil {
				return gc, nil, fmt.Errorf("collect: %s: %w", filepath.Join(d, runfolder.FileBatch), err)
			}
			ext := ""
			if _, err := os.Stat(filepath.Join(d, runfolder.FileBatchExtended)); err == nil {
				ext = filepath.Join(d, runfolder.FileBatchExtended)
			}
			if prompts, err = runfolder.ReadPromptList(filepath.Join(d, runfolder.FileBatchPrompts), ext); err != nil {
				return gc, nil, fmt.Errorf("collect: %w", err)
			}
		} else if man.PromptsSHA256 != rep.List.PromptsSHA256 || man.ConfigSHA256 != rep.List.ConfigSHA256 || !slices.Equal(man.Selected, rep.List.Selected) ||
			runfolder.SameListInputs(man.Inputs, rep.List.Inputs) != nil {
			return gc, nil, userf("collect: %s holds another list than %s (prompts %.12s…/%.12s…, configuration %.12s…/%.12s…)",
				d, dirs[0], man.PromptsSHA256, rep.List.PromptsSHA256, man.ConfigSHA256, rep.List.ConfigSHA256)
		}
		shards, _ := filepath.Glob(filepath.Join(d, runfolder.DirShards, "shard-*.json"))
		for _, f := range shards {
			var st runfolder.ShardStatus
			if err := runfolder.ReadJSON(f, &st); err != nil {
				return gc, nil, fmt.Errorf("collect: %w", err)
			}
			rep.Shards = append(rep.Shards, ReportShard{File: f, Shard: st.Shard, Host: st.Host, Updated: st.Updated, Complete: st.Complete, Prompts: len(st.Entries)})
		}
	}
	return gc, prompts, nil
}

// CollectJob merges the folders of one prompt list (one folder shared by
// its shards, or one folder per shard, copied from several machines) into
// one report (densitykv collect). Every folder must hold the same list
// (list.json: prompts, configuration, selection); a prompt counts when one
// folder holds its complete run.
type CollectJob struct {
	// Dirs are the list folders.
	Dirs []string
}

// Run reads the list the folders share, then each selected prompt's run
// (the memory log, drift records and storage of a complete one), and
// summarises them per policy. It writes nothing.
func (j *CollectJob) Run() (*Report, error) {
	if len(j.Dirs) == 0 {
		return nil, userf("collect: no list folder given")
	}
	c := &collector{dirs: j.Dirs, rep: &Report{Folders: j.Dirs}, logs: map[string]*logAcc{}, drifts: map[string]*driftAcc{},
		stor: map[string]map[float64][]int64{}}
	var err error
	if c.gc, c.prompts, err = readListFolders(j.Dirs, c.rep); err != nil {
		return nil, err
	}
	c.horizons = c.gc.Generate.Horizons
	if len(c.horizons) == 0 {
		c.horizons = []float64{float64(c.gc.Generate.Blocks*c.gc.Generate.BlockFrames()) / config.LatentFPS}
	}
	for _, i := range c.rep.List.Selected {
		if err := c.prompt(i); err != nil {
			return nil, err
		}
	}
	c.summarize()
	return c.rep, nil
}

// collector is a CollectJob's report as it reads the prompts' runs.
type collector struct {
	dirs     []string
	rep      *Report
	gc       config.GenerateConfig
	prompts  *runfolder.PromptList
	horizons []float64 // the storage's (the list's horizons, else its length)
	// logs and drifts accumulate per policy, in order of appearance.
	logs       map[string]*logAcc
	order      []string
	drifts     map[string]*driftAcc
	driftOrder []string
	stor       map[string]map[float64][]int64 // [policy][horizon] bytes of each prompt
}

// prompt reports prompt i: blank, missing, stopped or complete (in one
// folder; more are duplicates), its complete run's records added.
func (c *collector) prompt(i int) error {
	rep := c.rep
	p := ReportPrompt{Index: i, Prompt: c.prompts.Prompts[i], State: "missing"}
	if c.prompts.Blank(i) {
		p.State = "blank"
		rep.Blank++
		rep.Prompts = append(rep.Prompts, p)
		return nil
	}
	found := 0
	for _, d := range c.dirs {
		sd := runfolder.BatchDir(d, i)
		var s runfolder.Summary
		if runfolder.ReadJSON(filepath.Join(sd, runfolder.FileSummary), &s) != nil {
			continue
		}
		// Complete: the summary and the final checkpoint, written after
		// every result file, agree (Inspect).
		if !s.Complete || !runfolder.Inspect(sd).Complete {
			if p.State == "missing" {
				p.State, p.Dir, p.Blocks = "stopped", sd, s.CompletedBlocks
			}
			continue
		}
		if found++; found > 1 {
			continue
		}
		p.State, p.Dir, p.Blocks = "complete", sd, s.CompletedBlocks
		if len(s.Policies) > 0 {
			p.Policy = s.Policies[0]
		}
		if err := c.complete(&p, i, sd); err != nil {
			return err
		}
	}
	if found > 1 {
		rep.Duplicates = append(rep.Duplicates, i)
	}
	if p.State == "complete" {
		rep.Complete++
	} else {
		rep.Missing = append(rep.Missing, i)
	}
	rep.Prompts = append(rep.Prompts, p)
	return nil
}

// complete adds prompt i's complete run in sd: its video and horizons,
// its memory log, drift records and storage (its records checked first).
func (c *collector) complete(p *ReportPrompt, i int, sd string) error {
	if _, err := os.Stat(filepath.Join(sd, video.FileVideo)); err == nil {
		p.Video = filepath.Join(sd, video.FileVideo)
	}
	for _, h := range c.gc.Generate.Horizons {
		if _, err := os.Stat(filepath.Join(sd, config.HorizonName(h))); err == nil {
			p.Horizons = append(p.Horizons, config.HorizonName(h))
		}
	}
	if err := runfolder.CheckRecorded(sd); err != nil {
		return fmt.Errorf("collect: prompt %d: %w; no report was written", i, err)
	}
	lines, err := runfolder.ReadLog(filepath.Join(sd, runfolder.FileLog))
	if err != nil {
		return fmt.Errorf("collect: prompt %d: %w", i, err)
	}
	for _, ln := range lines {
		a := c.logs[ln.Policy]
		if a == nil {
			a = &logAcc{s: LogStats{Policy: ln.Policy, FinalOccMin: math.MaxInt}, last: map[int]runfolder.LogLine{}}
			c.logs[ln.Policy] = a
			c.order = append(c.order, ln.Policy)
		}
		a.add(ln)
	}
	for _, a := range c.logs {
		a.endPrompt()
	}
	recs, err := readPromptDrift(sd)
	if err != nil {
		return fmt.Errorf("collect: prompt %d: %w", i, err)
	}
	if len(recs) > 0 && p.Policy != nil {
		watch, _ := drift.ParseRules(drift.Watch, "drift.Watch")
		ds := drift.Summarize(recs, watch)
		p.Drift = &ds
		a := c.drifts[p.Policy.Policy]
		if a == nil {
			a = &driftAcc{s: DriftStats{Policy: p.Policy.Policy}}
			c.drifts[p.Policy.Policy] = a
			c.driftOrder = append(c.driftOrder, p.Policy.Policy)
		}
		a.add(i, recs)
	}
	c.addStorage(sd)
	return nil
}

// addStorage adds the bytes of each policy at each horizon from sd's
// storage file (the block at the horizon, or the first past it).
func (c *collector) addStorage(sd string) {
	var sr runfolder.StorageRun
	if err := runfolder.ReadJSON(filepath.Join(sd, runfolder.FileStorage), &sr); err != nil {
		return
	}
	for pol, bytes := range sr.Policies {
		for _, h := range c.horizons {
			for b, sec := range sr.Seconds {
				if math.Abs(sec-h) < 1e-9 || (sec > h && (b == 0 || sr.Seconds[b-1] < h)) {
					if c.stor[pol] == nil {
						c.stor[pol] = map[float64][]int64{}
					}
					c.stor[pol][h] = append(c.stor[pol][h], bytes[b])
				}
			}
		}
	}
}

// summarize fills the report's per-policy memory-log, drift and storage
// summaries.
func (c *collector) summarize() {
	rep := c.rep
	for _, pol := range c.order {
		rep.MemoryLog = append(rep.MemoryLog, c.logs[pol].stats())
	}
	for _, pol := range c.driftOrder {
		rep.Drift = append(rep.Drift, c.drifts[pol].stats())
	}
	formula := storageFormula(c.gc, c.horizons)
	var pols []string
	for pol := range c.stor {
		pols = append(pols, pol)
	}
	sort.Strings(pols)
	for _, pol := range pols {
		for _, h := range c.horizons {
			v := c.stor[pol][h]
			if len(v) == 0 {
				continue
			}
			st := StorageStats{Policy: pol, Seconds: h, Prompts: len(v), Min: slices.Min(v), Max: slices.Max(v), Formula: formula[pol][h]}
			for _, x := range v {
				st.Mean += float64(x) / float64(len(v))
			}
			rep.Storage = append(rep.Storage, st)
		}
	}
}

// logAcc accumulates one policy's memory-log lines.
type logAcc struct {
	s           LogStats
	last        map[int]runfolder.LogLine // per layer, the prompt's last line
	finalN      int
	dens, score struct {
		sum float64
		n   int
	}
}

func (a *logAcc) add(ln runfolder.LogLine) {
	s := &a.s
	s.Lines++
	if ln.Update >= 0 {
		s.Updates++
	}
	s.AdmittedTotal += int64(ln.AdmittedTotal)
	s.EvictedMandatory += int64(ln.EvictedMandatory)
	s.EvictedCapacity += int64(ln.EvictedCapacity)
	s.UpdateSeconds += ln.UpdateSeconds
	if ln.Flushed {
		s.Flushed++
	}
	if ln.FloorBlocked {
		s.FloorBlocked++
	}
	if ln.Infeasible {
		s.Infeasible++
	}
	if ln.CandidateDensityMean != nil {
		a.dens.sum += *ln.CandidateDensityMean
		a.dens.n++
	}
	if ln.AdmissionScoreMean != nil {
		a.score.sum += *ln.AdmissionScoreMean
		a.score.n++
	}
	if prev, ok := a.last[ln.Layer]; !ok || ln.Block >= prev.Block {
		a.last[ln.Layer] = ln
	}
}

// endPrompt closes a prompt: its last block's occupancy per layer.
func (a *logAcc) endPrompt() {
	if len(a.last) == 0 {
		return
	}
	a.s.Prompts++
	for _, ln := range a.last {
		a.s.FinalOccMin = min(a.s.FinalOccMin, ln.OccMin)
		a.s.FinalOccMax = max(a.s.FinalOccMax, ln.OccMax)
		a.s.FinalOccMean += float64(ln.OccMin+ln.OccMax) / 2
		a.finalN++
	}
	a.last = map[int]runfolder.LogLine{}
}

func (a *logAcc) stats() LogStats {
	s := a.s
	if s.Updates > 0 {
		s.AdmittedPerLine = float64(s.AdmittedTotal) / float64(s.Updates)
	}
	if a.finalN > 0 {
		s.FinalOccMean /= float64(a.finalN)
	}
	if s.FinalOccMin == math.MaxInt {
		s.FinalOccMin = 0
	}
	if a.dens.n > 0 {
		m := a.dens.sum / float64(a.dens.n)
		s.CandidateDensityMean = &m
	}
	if a.score.n > 0 {
		m := a.score.sum / float64(a.score.n)
		s.AdmissionScoreMean = &m
	}
	return s
}

// storageFormula is the paper's storage accounting (package storage) for
// the list's model and memory settings, by policy and horizon.
func storageFormula(gc config.GenerateConfig, horizons []float64) map[string]map[float64]int64 {
	l, m := gc.Memory.Layout, gc.Memory
	c := storage.Paper()
	if l.Layers > 0 {
		c.Model = storage.Model{Layers: l.Layers, Heads: l.Heads, KeyDim: l.HeadDim, ValueDim: l.HeadDim, TokensPerFrame: l.Height * l.Width}
		c.SinkFrames, c.WindowFrames, c.CacheFrames = m.SinkFrames, m.WindowFrames, m.CacheFrames
		if m.Capacity > 0 {
			c.Capacity = m.Capacity
		}
	}
	out := map[string]map[float64]int64{}
	rows, err := storage.Table(c, horizons)
	if err != nil {
		return out
	}
	for _, r := range rows {
		if out[r.Policy] == nil {
			out[r.Policy] = map[float64]int64{}
		}
		out[r.Policy][r.Seconds] = r.Bytes
	}
	return out
}

// DriftStats aggregates one policy's drift.jsonl over a list's complete
// prompts (CollectJob).
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

// readPromptDrift reads prompt folder sd's drift.jsonl for CollectJob: nil
// without one (a run without the monitor).
func readPromptDrift(sd string) ([]drift.Record, error) {
	recs, err := drift.ReadFile(filepath.Join(sd, runfolder.FileDrift))
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
