package runfolder

import (
	"fmt"
	"path/filepath"
)

// The formats of state/checkpoint.json ("format" in the file).
const (
	SimulateCheckpoint = "densitykv-simulate-checkpoint"
	GenerateCheckpoint = "densitykv-generate-checkpoint"
)

const simCheckpointVersion = 1

// ReadSimulateCheckpoint reads and checks the resume checkpoint of a
// simulate (or demo) run folder.
func ReadSimulateCheckpoint(dir string) (*RunState, error) {
	var st RunState
	if err := readSealed(filepath.Join(dir, DirState, FileCheckpoint), SimulateCheckpoint, simCheckpointVersion, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Hooks report a run's progress to its caller (printing, progress bars,
// tests). Every field is optional; they run on the run's goroutine.
type Hooks struct {
	// Start is called once the run is set up, with the first block it
	// computes and the total (a resumed run starts past the blocks it
	// restores).
	Start func(first, total int)
	// Block is called after every block: lines are the block's log lines
	// (every policy, then every layer), nil for a block recomputed on
	// resume without being logged again.
	Block func(block int, lines []LogLine)
	// Info reports what the run does besides its blocks (resuming,
	// stopping); Warn what the caller should see even when quiet.
	Info, Warn func(msg string)
	// Progress reports a stage besides the blocks: done of total steps of
	// stage ("encode": prompts through the text encoder; "video warm-up":
	// latent blocks decoded again to resume a video).
	Progress func(stage string, done, total int)
}

func (h Hooks) Infof(format string, a ...any) {
	if h.Info != nil {
		h.Info(fmt.Sprintf(format, a...))
	}
}

func (h Hooks) Warnf(format string, a ...any) {
	if h.Warn != nil {
		h.Warn(fmt.Sprintf(format, a...))
	}
}

// Result is what a finished (or stopped) run leaves: its summary, also in
// summary.json.
type Result struct {
	Summary     *Summary
	Interrupted bool
	// Preview says where a generate run's latent preview is (and its
	// video, or why there is none); empty without one.
	Preview string
	// Video says where a generate run's video is (video.mp4, or PNG
	// frames without ffmpeg); empty without a VAE.
	Video string
	// Batch lists the prompts of a batch (GenerateBatch) and their runs;
	// Summary is then the last run's.
	Batch []BatchEntry
}

// WriteSimulateCheckpoint writes a simulate run's state/checkpoint.json
// (path) atomically, sealed.
func WriteSimulateCheckpoint(path string, st *RunState) error {
	return writeSealed(path, SimulateCheckpoint, simCheckpointVersion, st)
}

// ReadSimulateCheckpointFile reads and checks a simulate run's
// state/checkpoint.json (path) into st.
func ReadSimulateCheckpointFile(path string, st *RunState) error {
	return readSealed(path, SimulateCheckpoint, simCheckpointVersion, st)
}

// ArchiveName names policy i's archive in DirState (memory.Archiver: the
// frames of full-history and longlive-rag, removed once the run is
// complete).
func ArchiveName(i int, policy string) string {
	return fmt.Sprintf("archive-%02d-%s.f32", i, policy)
}
