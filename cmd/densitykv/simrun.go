package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/memory"
)

// partsJSON is memory.Parts with JSON names.
type partsJSON struct {
	Sink   int `json:"sink"`
	Memory int `json:"memory"`
	Local  int `json:"local"`
}

// logLine is one line of memory_log.jsonl: one policy, block and layer,
// recorded after the block's clean pass.
type logLine struct {
	Policy string  `json:"policy"`
	Block  int     `json:"block"`
	Layer  int     `json:"layer"`
	Second float64 `json:"seconds"` // video time at the end of the block
	// Update is the DensityKV bank update index of this block (-1 when the
	// block offered nothing or the policy has no bank).
	Update int `json:"update"`
	// Occupancy is the historical memory per head read by this block.
	Occupancy []int `json:"occupancy"`
	OccMin    int   `json:"occupancy_min"`
	OccMax    int   `json:"occupancy_max"`
	// Offered candidates per head; Admitted per head (largest over heads);
	// AdmittedTotal and the evictions are summed over heads.
	Offered       int `json:"offered"`
	Admitted      int `json:"admitted"`
	AdmittedTotal int `json:"admitted_total"`
	// AdmittedHeads is the admitted count of each head (DensityKV only).
	AdmittedHeads    []int `json:"admitted_per_head,omitempty"`
	EvictedMandatory int   `json:"evicted_mandatory"`
	EvictedCapacity  int   `json:"evicted_capacity"`
	// Tokens counts this layer's attention keys by part.
	Tokens partsJSON `json:"tokens"`
	// Bytes is the policy's live persistent state after the block (sink,
	// window and memory); BankBytes is this layer's DensityKV bank alone
	// (K/V payload, densities, baselines, provenance).
	Bytes     int64 `json:"bytes"`
	BankBytes int64 `json:"bank_bytes,omitempty"`
	// Flags of the bank decision (DensityKV only).
	Flushed      bool `json:"flushed,omitempty"`
	FloorBlocked bool `json:"floor_blocked,omitempty"`
	Infeasible   bool `json:"infeasible,omitempty"`
	// Timings (wall clock, not reproducible): the whole policy's memory
	// update of this block, and this layer's Attend call.
	UpdateSeconds float64 `json:"update_seconds"`
	AttendSeconds float64 `json:"attend_seconds"`
}

// policyTotals accumulates one policy over a run.
type policyTotals struct {
	Policy           string  `json:"policy"`
	Admitted         int64   `json:"admitted_total"`
	EvictedMandatory int64   `json:"evicted_mandatory"`
	EvictedCapacity  int64   `json:"evicted_capacity"`
	Bytes            int64   `json:"bytes_final"`
	PeakBytes        int64   `json:"bytes_peak"`
	OccMin           int     `json:"occupancy_final_min"`
	OccMax           int     `json:"occupancy_final_max"`
	Tokens           int     `json:"attention_tokens_final"` // keys read by layer 0 in the last block
	UpdateSeconds    float64 `json:"update_seconds"`
	AttendSeconds    float64 `json:"attend_seconds"`
	// BytesByBlock is the live state after each block (storage vs horizon).
	BytesByBlock []int64 `json:"-"`
}

// admissions aggregates the DensityKV admission events of a run for the
// montage (each admitted state counted once per layer–head bank).
type admissions struct {
	Layers, Heads, Height, Width, Frames int
	FPS                                  float64
	// FirstLayer is the stream layer of LayerFrame's row 0.
	FirstLayer int `json:"first_layer"`
	// TokenBanks[f·P + p] counts the layer–head banks that admitted source
	// token p of frame f.
	TokenBanks []int32 `json:"token_banks"`
	// LayerFrame[l·Frames + f] counts admissions of layer l from frame f.
	LayerFrame []int64 `json:"layer_frame"`
	// UpdateBlock[u] is the block whose first call ran bank update u.
	UpdateBlock []int `json:"update_block"`
	// InitFrames is the number of source frames admitted by the first
	// (empty-bank) update.
	InitFrames int `json:"init_frames"`
}

func newAdmissions(c Config) *admissions {
	l := c.Memory.Layout
	F := c.Frames()
	return &admissions{Layers: l.Layers, Heads: l.Heads, Height: l.Height, Width: l.Width, Frames: F, FPS: c.Stream.FPS, FirstLayer: c.Stream.FirstLayer,
		TokenBanks: make([]int32, F*l.TokensPerFrame()), LayerFrame: make([]int64, l.Layers*F)}
}

func (a *admissions) add(block int, decs []bank.Decision, offered []int) {
	P := a.Height * a.Width
	recorded := false
	for l, d := range decs {
		if offered[l] == 0 {
			continue
		}
		if !recorded {
			for len(a.UpdateBlock) <= d.Update {
				a.UpdateBlock = append(a.UpdateBlock, -1)
			}
			a.UpdateBlock[d.Update] = block
			recorded = true
		}
		for _, h := range d.Heads {
			for _, src := range h.Admitted {
				f, p := int(src)/P, int(src)%P
				if f < 0 || f >= a.Frames {
					continue
				}
				a.TokenBanks[f*P+p]++
				a.LayerFrame[l*a.Frames+f]++
				if d.Empty && f+1 > a.InitFrames {
					a.InitFrames = f + 1
				}
			}
		}
	}
}

// runState is everything a run accumulates, saved with each checkpoint.
type runState struct {
	NextBlock int             `json:"next_block"`
	LogBytes  int64           `json:"log_bytes"`
	Totals    []*policyTotals `json:"totals"`
	Bytes     [][]int64       `json:"bytes_by_block"` // [policy][block]
	Adm       *admissions     `json:"admissions,omitempty"`
	// Snapshots reports that policy snapshots were saved with this
	// checkpoint (otherwise --resume replays blocks 0..NextBlock−1).
	Snapshots bool `json:"snapshots"`
}

// snapshotter is implemented by policies that can save and restore their
// state for --resume (an optional extension of memory.Policy).
type snapshotter interface {
	Save(w io.Writer) error
	Load(r io.Reader) error
}

// simOptions controls what a simulation prints.
type simOptions struct {
	stdout, stderr io.Writer
	// updates: "all" prints every policy per block, "densitykv" only the
	// bank updates, "none" nothing per block.
	updates string
	quiet   bool // no progress
	resume  bool
}

// simResult is what a finished (or interrupted) simulation leaves.
type simResult struct {
	Dir         string
	Cfg         Config
	State       *runState
	Elapsed     time.Duration
	Interrupted bool
	Replayed    int // blocks recomputed without logging on --resume
}

// runSimulation runs cfg's policies over its stream block by block, writing
// the run folder. On ctx cancellation it finishes the current block, saves a
// checkpoint and returns errInterrupted with the partial result.
func runSimulation(ctx context.Context, cfg Config, dir string, o simOptions) (*simResult, error) {
	start := time.Now()
	L := cfg.Memory.Layout.Layers
	blocks := cfg.Blocks()
	res := &simResult{Dir: dir, Cfg: cfg}

	pols := make([]memory.Policy, len(cfg.Policies))
	for i, name := range cfg.Policies {
		p, err := memory.New(name, cfg.Memory)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", name, err)
		}
		pols[i] = p
	}
	st := &runState{Adm: newAdmissions(cfg)}
	for _, n := range cfg.Policies {
		st.Totals = append(st.Totals, &policyTotals{Policy: n})
	}
	st.Bytes = make([][]int64, len(pols))

	stateDir := filepath.Join(dir, dirState)
	replayTo := 0
	if o.resume {
		var saved runState
		if err := readSealed(filepath.Join(stateDir, fileCheckpoint), simCheckpointFormat, simCheckpointVersion, &saved); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				again := "start it again without --resume"
				if _, logged := runProgress(dir); logged {
					again += " and with --force (its log has blocks it cannot continue from)"
				}
				return nil, usagef("--resume: %s has no checkpoint (%s): the run stopped before saving one; %s", dir, filepath.Join(dirState, fileCheckpoint), again)
			}
			return nil, fmt.Errorf("--resume: %w", err)
		}
		if saved.NextBlock > blocks {
			return nil, fmt.Errorf("--resume: checkpoint at block %d beyond the run's %d blocks", saved.NextBlock, blocks)
		}
		if saved.NextBlock == blocks {
			return nil, usagef("--resume: %s is already complete (%d blocks); densitykv trace %s re-renders its plots", dir, blocks, dir)
		}
		if saved.Snapshots {
			for i, p := range pols {
				sn, ok := p.(snapshotter)
				if !ok {
					return nil, fmt.Errorf("--resume: policy %s cannot load the checkpoint's snapshot", cfg.Policies[i])
				}
				if err := loadSnapshot(filepath.Join(stateDir, snapshotName(i, cfg.Policies[i], saved.NextBlock)), sn); err != nil {
					return nil, fmt.Errorf("--resume: policy %s: %w", cfg.Policies[i], err)
				}
			}
			*st = saved
			if st.Adm == nil {
				st.Adm = newAdmissions(cfg)
			}
		} else {
			replayTo = saved.NextBlock
		}
		st.LogBytes = saved.LogBytes
		res.Replayed = replayTo
	}
	logw, err := openLog(filepath.Join(dir, fileLog), st.LogBytes)
	if err != nil {
		return nil, fmt.Errorf("memory log: %w", err)
	}
	defer logw.close()

	stream, err := openStream(cfg)
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	canSnap := true
	for _, p := range pols {
		if _, ok := p.(snapshotter); !ok {
			canSnap = false
		}
	}

	// Skip blocks already covered by restored snapshots.
	for b := 0; b < st.NextBlock; b++ {
		if _, err := stream.NextBlock(); err != nil {
			return nil, fmt.Errorf("stream: skip to block %d: %w", st.NextBlock, err)
		}
	}
	if replayTo > 0 && !o.quiet {
		fmt.Fprintf(o.stderr, "resume: policies cannot be snapshotted; recomputing blocks 0..%d (not logged again)\n", replayTo-1)
	}
	prog := newProgress(o.stderr, "simulate", blocks, st.NextBlock, o.quiet)
	defer prog.finish()

	// checkpoint records the completed blocks; with snaps it also saves the
	// policies' state (not needed once the run is complete).
	checkpoint := func(snaps bool) error {
		n, err := logw.sync()
		if err != nil {
			return fmt.Errorf("memory log: %w", err)
		}
		st.LogBytes = n
		snaps = snaps && canSnap
		st.Snapshots = snaps
		if snaps {
			for i, p := range pols {
				if err := saveSnapshot(filepath.Join(stateDir, snapshotName(i, cfg.Policies[i], st.NextBlock)), p.(snapshotter)); err != nil {
					return fmt.Errorf("checkpoint: policy %s: %w", cfg.Policies[i], err)
				}
			}
		}
		// checkpoint.json names the block of its snapshots; it is written
		// last, so a crash in between leaves the previous checkpoint valid.
		if err := writeSealed(filepath.Join(stateDir, fileCheckpoint), simCheckpointFormat, simCheckpointVersion, st); err != nil {
			return err
		}
		old, _ := filepath.Glob(filepath.Join(stateDir, "policy-*.snap"))
		for _, f := range old {
			if !strings.HasSuffix(f, fmt.Sprintf("-b%06d.snap", st.NextBlock)) || !snaps {
				os.Remove(f)
			}
		}
		return nil
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, err
	}

	offered := make([]int, L)
	var qc, kc, vc []float32
	for b := st.NextBlock; b < blocks; b++ {
		replaying := b < replayTo
		if replaying && ctx.Err() != nil {
			// The saved checkpoint is still valid: nothing was logged.
			res.State, res.Interrupted, res.Elapsed = st, true, time.Since(start)
			return res, errInterrupted
		}
		if !replaying && ctx.Err() != nil {
			if err := checkpoint(true); err != nil {
				return nil, err
			}
			if err := writeArtifacts(dir, cfg, pols, st); err != nil {
				return nil, err
			}
			res.State, res.Interrupted, res.Elapsed = st, true, time.Since(start)
			return res, errInterrupted
		}
		info, err := stream.NextBlock()
		if err == io.EOF {
			fmt.Fprintf(o.stderr, "stream ended after %d blocks (config asked for %d)\n", b, blocks)
			blocks = b
			break
		}
		if err != nil {
			return nil, fmt.Errorf("stream: block %d: %w", b, err)
		}
		call := memory.Call{Block: b, Step: 0, Clean: true, First: true, Latent: info.Latent}
		for i, p := range pols {
			if err := p.Begin(call); err != nil {
				return nil, fmt.Errorf("policy %s: block %d: %w", cfg.Policies[i], b, err)
			}
		}
		attend := make([][]float64, len(pols))
		for i := range attend {
			attend[i] = make([]float64, L)
		}
		for l := 0; l < L; l++ {
			q, k, v, err := stream.Layer(cfg.Stream.FirstLayer + l)
			if err != nil {
				return nil, fmt.Errorf("stream: block %d layer %d: %w", b, cfg.Stream.FirstLayer+l, err)
			}
			for i, p := range pols {
				// Each policy gets its own copy: one that writes into its
				// inputs cannot affect the next.
				qc = append(qc[:0], q...)
				kc = append(kc[:0], k...)
				vc = append(vc[:0], v...)
				t0 := time.Now()
				if _, err := p.Attend(l, qc, kc, vc); err != nil {
					return nil, fmt.Errorf("policy %s: block %d layer %d: %w", cfg.Policies[i], b, l, err)
				}
				attend[i][l] = time.Since(t0).Seconds()
			}
		}
		sec := float64((b+1)*cfg.Memory.Layout.FramesPerBlock) / cfg.Stream.FPS
		var lines []logLine
		for i, p := range pols {
			if err := p.End(); err != nil {
				return nil, fmt.Errorf("policy %s: block %d: end: %w", cfg.Policies[i], b, err)
			}
			s := statsOf(p)
			var decs []bank.Decision
			if d, ok := p.(*memory.DensityKV); ok {
				decs = d.LastDecisions()
				for l := range offered {
					offered[l] = s.Offered[l]
				}
				st.Adm.add(b, decs, offered)
			}
			tot := st.Totals[i]
			tot.Bytes = p.Bytes()
			tot.PeakBytes = max(tot.PeakBytes, tot.Bytes)
			tot.UpdateSeconds += s.UpdateSeconds
			st.Bytes[i] = append(st.Bytes[i], tot.Bytes)
			tot.OccMin, tot.OccMax = 1<<62, 0
			banks := bankBytes(p)
			for l := 0; l < L; l++ {
				ln := lineFor(cfg.Policies[i], b, l, sec, s, decs, tot.Bytes, attend[i][l])
				ln.Layer += cfg.Stream.FirstLayer
				if banks != nil {
					ln.BankBytes = banks[l]
				}
				tot.Admitted += int64(ln.AdmittedTotal)
				tot.EvictedMandatory += int64(ln.EvictedMandatory)
				tot.EvictedCapacity += int64(ln.EvictedCapacity)
				tot.AttendSeconds += ln.AttendSeconds
				tot.OccMin, tot.OccMax = min(tot.OccMin, ln.OccMin), max(tot.OccMax, ln.OccMax)
				if l == 0 {
					tot.Tokens = ln.Tokens.Sink + ln.Tokens.Memory + ln.Tokens.Local
				}
				lines = append(lines, ln)
			}
		}
		if replaying {
			st.NextBlock = b + 1
			prog.add(1)
			continue
		}
		for _, ln := range lines {
			if err := logw.write(ln); err != nil {
				return nil, fmt.Errorf("memory log: %w", err)
			}
		}
		printUpdates(o, cfg, b, lines, prog)
		st.NextBlock = b + 1
		if afterBlockHook != nil {
			afterBlockHook(b)
		}
		prog.add(1)
		if cfg.Run.SnapshotEvery > 0 && st.NextBlock%cfg.Run.SnapshotEvery == 0 && st.NextBlock < blocks {
			if err := checkpoint(true); err != nil {
				return nil, err
			}
		}
	}
	if err := checkpoint(false); err != nil {
		return nil, err
	}
	prog.finish()
	if err := writeArtifacts(dir, cfg, pols, st); err != nil {
		return nil, err
	}
	res.State, res.Elapsed = st, time.Since(start)
	return res, nil
}

// writeArtifacts writes the provenance of the banks, the admission counts
// and the storage by block as they stand (at the end, or when stopped).
func writeArtifacts(dir string, cfg Config, pols []memory.Policy, st *runState) error {
	if err := writeProvenance(filepath.Join(dir, fileProvenance), cfg, pols, st.Adm); err != nil {
		return err
	}
	if err := writeJSONAtomic(filepath.Join(dir, fileAdmissions), st.Adm); err != nil {
		return err
	}
	return writeStorageRun(filepath.Join(dir, fileStorageRun), cfg, st)
}

// bankBytes returns the live bytes of each layer's DensityKV bank, or nil
// for other policies.
func bankBytes(p memory.Policy) []int64 {
	d, ok := p.(*memory.DensityKV)
	if !ok {
		return nil
	}
	out := make([]int64, len(d.Banks()))
	for l, b := range d.Banks() {
		out[l] = b.Bytes()
	}
	return out
}

// afterBlockHook, when set (tests), runs after every logged block.
var afterBlockHook func(block int)

// statsOf returns the policy's latest per-call record.
func statsOf(p memory.Policy) memory.Stats {
	if r, ok := p.(memory.StatsReporter); ok {
		return r.LastStats()
	}
	return memory.Stats{}
}

func lineFor(policy string, b, l int, sec float64, s memory.Stats, decs []bank.Decision, bytes int64, attend float64) logLine {
	ln := logLine{Policy: policy, Block: b, Layer: l, Second: sec, Update: -1, Bytes: bytes,
		UpdateSeconds: s.UpdateSeconds, AttendSeconds: attend}
	if l < len(s.Occupancy) {
		ln.Occupancy = append([]int(nil), s.Occupancy[l]...)
	}
	if len(ln.Occupancy) > 0 {
		ln.OccMin, ln.OccMax = slices.Min(ln.Occupancy), slices.Max(ln.Occupancy)
	}
	if l < len(s.Offered) {
		ln.Offered, ln.Admitted = s.Offered[l], s.Admitted[l]
		ln.EvictedMandatory, ln.EvictedCapacity = s.EvictedMandatory[l], s.EvictedCapacity[l]
		ln.AdmittedTotal = s.Admitted[l] * max(1, len(ln.Occupancy))
	}
	if l < len(s.Parts) {
		ln.Tokens = partsJSON{Sink: s.Parts[l].Sink, Memory: s.Parts[l].Memory, Local: s.Parts[l].Local}
	}
	if l < len(decs) && ln.Offered > 0 {
		d := decs[l]
		ln.Update = d.Update
		ln.AdmittedTotal = 0
		for _, h := range d.Heads {
			ln.AdmittedTotal += len(h.Admitted)
			ln.AdmittedHeads = append(ln.AdmittedHeads, len(h.Admitted))
		}
		ln.Flushed, ln.FloorBlocked, ln.Infeasible = d.Flushed, d.FloorBlocked, d.Infeasible
	}
	return ln
}

// printUpdates prints the block's per-update lines.
func printUpdates(o simOptions, cfg Config, b int, lines []logLine, prog *progress) {
	if o.updates == "none" || o.stdout == nil {
		return
	}
	L := cfg.Memory.Layout.Layers
	capacity := cfg.Memory.Capacity
	F := cfg.Memory.Layout.FramesPerBlock
	for i := 0; i < len(lines); i += L {
		ls := lines[i : i+L]
		name := ls[0].Policy
		if o.updates == "densitykv" && name != memory.NameDensityKV {
			continue
		}
		var adm, mand, capv, omin, omax int
		var bankB int64
		omin = 1 << 62
		var flags []string
		upd := -1
		for _, ln := range ls {
			adm += ln.AdmittedTotal
			bankB += ln.BankBytes
			mand += ln.EvictedMandatory
			capv += ln.EvictedCapacity
			omin, omax = min(omin, ln.OccMin), max(omax, ln.OccMax)
			if ln.Update >= 0 {
				upd = ln.Update
			}
			if ln.Flushed {
				flags = appendOnce(flags, "FLUSHED")
			}
			if ln.FloorBlocked {
				flags = appendOnce(flags, "FLOOR-BLOCKED")
			}
			if ln.Infeasible {
				flags = appendOnce(flags, "INFEASIBLE")
			}
		}
		u := "  -"
		if upd >= 0 {
			u = fmt.Sprintf("%3d", upd)
		}
		if prog.bar != nil {
			_ = prog.bar.Clear()
		}
		occ := fmt.Sprintf("%d", omin)
		if omax != omin {
			occ = fmt.Sprintf("%d-%d", omin, omax)
		}
		bytes := "bytes " + humanBytes(ls[0].Bytes)
		if name == memory.NameDensityKV {
			bytes = "bank " + humanBytes(bankB) + " (with sink+window " + humanBytes(ls[0].Bytes) + ")"
		}
		fmt.Fprintf(o.stdout, "%-14s block %3d (frames %3d-%3d, %6.2fs) update %s  admitted %7d  evicted %6d mandatory %6d capacity  occupancy %s/%d per head  %s%s\n",
			name, b, b*F, b*F+F-1, ls[0].Second, u, adm, mand, capv, occ, capacity, bytes, flagStr(flags))
	}
}

func appendOnce(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

func flagStr(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return "  [" + strings.Join(f, " ") + "]"
}

// humanBytes formats n with binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// snapshotName names policy i's snapshot taken before block (the number of
// completed blocks).
func snapshotName(i int, policy string, block int) string {
	return fmt.Sprintf("policy-%02d-%s-b%06d.snap", i, policy, block)
}

func saveSnapshot(path string, s snapshotter) error {
	if err := atomicfile.Write(path, s.Save); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

func loadSnapshot(path string, s snapshotter) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := s.Load(f); err != nil {
		return fmt.Errorf("snapshot %s: %w", path, err)
	}
	return nil
}

// writeProvenance writes one CSV row per state of every final DensityKV bank.
func writeProvenance(path string, cfg Config, pols []memory.Policy, adm *admissions) error {
	var sb strings.Builder
	sb.WriteString(fileProvenanceH + "\n")
	P := cfg.Memory.Layout.TokensPerFrame()
	W := cfg.Memory.Layout.Width
	for i, p := range pols {
		d, ok := p.(*memory.DensityKV)
		if !ok {
			continue
		}
		for l, bk := range d.Banks() {
			for h := 0; h < cfg.Memory.Layout.Heads; h++ {
				for slot, e := range bk.Entries(h) {
					blk := -1
					if int(e.Admitted) < len(adm.UpdateBlock) {
						blk = adm.UpdateBlock[e.Admitted]
					}
					f, pos := e.Source/int64(P), int(e.Source%int64(P))
					fmt.Fprintf(&sb, "%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%s,%s\n", cfg.Policies[i], cfg.Stream.FirstLayer+l, h, slot, e.Source, f, pos/W, pos%W,
						e.Admitted, blk, strconv.FormatFloat(e.Density, 'g', -1, 64), strconv.FormatFloat(e.Baseline, 'g', -1, 64))
				}
			}
		}
	}
	return writeFileAtomic(path, []byte(sb.String()))
}

// storageRun is storage.json: the live persistent bytes of each policy after
// every block.
type storageRun struct {
	Seconds  []float64          `json:"seconds"`
	Policies map[string][]int64 `json:"bytes"`
}

func writeStorageRun(path string, cfg Config, st *runState) error {
	sr := storageRun{Policies: map[string][]int64{}}
	F := cfg.Memory.Layout.FramesPerBlock
	n := 0
	for i, name := range cfg.Policies {
		sr.Policies[name] = st.Bytes[i]
		n = max(n, len(st.Bytes[i]))
	}
	for b := 0; b < n; b++ {
		sr.Seconds = append(sr.Seconds, float64((b+1)*F)/cfg.Stream.FPS)
	}
	return writeJSONAtomic(path, sr)
}
