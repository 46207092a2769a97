package runfolder

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
)

// WriteArtifacts writes the provenance of the banks, the admission counts
// and the storage by block as they stand (at the end, or when stopped).
func WriteArtifacts(dir string, cfg config.Config, pols []memory.Policy, st *RunState) error {
	return WriteArtifactsIDs(dir, cfg, pols, st, 0)
}

// WriteArtifactsIDs is writeArtifacts with provenance ids less offset (the
// authors' ids: offset = sink frames × tokens per frame).
func WriteArtifactsIDs(dir string, cfg config.Config, pols []memory.Policy, st *RunState, offset int64) error {
	if err := writeProvenance(filepath.Join(dir, FileProvenance), cfg, pols, st.Adm, offset); err != nil {
		return err
	}
	if err := WriteJSON(filepath.Join(dir, FileAdmissions), st.Adm); err != nil {
		return err
	}
	return writeStorageRun(filepath.Join(dir, FileStorage), cfg, st)
}

// writeProvenance writes one CSV row per state of every final DensityKV
// bank, with source ids (and their frames) less offset.
func writeProvenance(path string, cfg config.Config, pols []memory.Policy, adm *Admissions, offset int64) error {
	var sb strings.Builder
	sb.WriteString(ProvenanceHeader + "\n")
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
					src := e.Source - offset
					f, pos := src/int64(P), int(src%int64(P))
					fmt.Fprintf(&sb, "%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%s,%s\n", cfg.Policies[i], cfg.Stream.FirstLayer+l, h, slot, src, f, pos/W, pos%W,
						e.Admitted, blk, strconv.FormatFloat(e.Density, 'g', -1, 64), strconv.FormatFloat(e.Baseline, 'g', -1, 64))
				}
			}
		}
	}
	return WriteFile(path, []byte(sb.String()))
}

// StorageRun is storage.json: the live persistent bytes of each policy after
// every block.
type StorageRun struct {
	Seconds  []float64          `json:"seconds"`
	Policies map[string][]int64 `json:"bytes"`
}

func writeStorageRun(path string, cfg config.Config, st *RunState) error {
	sr := StorageRun{Policies: map[string][]int64{}}
	F := cfg.Memory.Layout.FramesPerBlock
	n := 0
	for i, name := range cfg.Policies {
		sr.Policies[name] = st.Bytes[i]
		n = max(n, len(st.Bytes[i]))
	}
	for b := 0; b < n; b++ {
		sr.Seconds = append(sr.Seconds, float64((b+1)*F)/cfg.Stream.FPS)
	}
	return WriteJSON(path, sr)
}

// Summary is summary.json.
type Summary struct {
	Command         string          `json:"command"`
	RunDir          string          `json:"run_dir"`
	Complete        bool            `json:"complete"`
	Blocks          int             `json:"blocks"`
	CompletedBlocks int             `json:"completed_blocks"`
	Frames          int             `json:"frames"`
	VideoSeconds    float64         `json:"video_seconds"`
	FPS             float64         `json:"fps"`
	Layout          memory.Layout   `json:"layout"`
	Capacity        int             `json:"capacity"`
	Policies        []*PolicyTotals `json:"policies"`
	ElapsedSeconds  float64         `json:"elapsed_seconds"`
	ReplayedBlocks  int             `json:"replayed_blocks,omitempty"`
	Plots           []string        `json:"plots,omitempty"`
	Files           []string        `json:"files"`
}

func NewSummary(command, dir string, cfg config.Config, st *RunState, interrupted bool, elapsed time.Duration, replayed int) *Summary {
	s := &Summary{Command: command, RunDir: dir, Complete: !interrupted, Blocks: cfg.Blocks(),
		Frames: cfg.Frames(), FPS: cfg.Stream.FPS, Layout: cfg.Memory.Layout, Capacity: cfg.Memory.Capacity,
		ElapsedSeconds: elapsed.Seconds(), ReplayedBlocks: replayed}
	if st != nil {
		s.CompletedBlocks = st.NextBlock
		s.Policies = st.Totals
	}
	s.VideoSeconds = float64(s.CompletedBlocks*cfg.Memory.Layout.FramesPerBlock) / cfg.Stream.FPS
	for _, f := range []string{FileConfig, FileLog, FileProvenance, FileAdmissions, FileStorage, FileSummary} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil || f == FileSummary {
			s.Files = append(s.Files, filepath.Join(dir, f))
		}
	}
	return s
}
