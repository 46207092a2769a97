package runfolder

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/video"
)

// FileOwner is the marker of a run folder: the command that made it. A
// run folder belongs to that command; another command (or a new run of
// the same one, unless it is the demo) overwrites it only with --force.
const FileOwner = "densitykv-run.json"

// Owner is the content of FileOwner.
type Owner struct {
	Format  string `json:"format"`
	Command string `json:"command"`
}

const OwnerFormat = "densitykv-run-folder"

// ReadOwner returns the command that made the run folder dir ("" for a
// folder without a marker: made before markers existed, or not a run
// folder).
func ReadOwner(dir string) (string, error) {
	b, err := ReadRecord(filepath.Join(dir, FileOwner))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var o Owner
	if err := json.Unmarshal(b, &o); err != nil || o.Format != OwnerFormat || o.Command == "" {
		return "", fmt.Errorf("%s is damaged (want {\"format\": %q, \"command\": …})", filepath.Join(dir, FileOwner), OwnerFormat)
	}
	return o.Command, nil
}

// RunFiles are the files and folders a run writes in its folder (and
// removes when it starts over).
var RunFiles = []string{FileOwner, FileConfig, FileLog, FileSummary, FileProvenance, FileAdmissions, FileStorage,
	FileTrace, FileTraceLayers, FileLineage, FileDrift, DirPlots, DirState, DirPreview, "preview.mp4", "manifest.json", "latents",
	FilePreviewVideo, FileGeneration, DirText, video.FileVideo, video.DirSegments, video.DirFrames}

// runDirs are the folders among runFiles.
var runDirs = map[string]bool{DirPlots: true, DirState: true, DirPreview: true, "latents": true, DirText: true, video.DirSegments: true, video.DirFrames: true}

// Outputs lists what a run writes in its folder dir, for
// atomicfile.CheckOutputs: an input there would be overwritten.
func Outputs(dir string) []atomicfile.Output {
	var out []atomicfile.Output
	for _, f := range RunFiles {
		out = append(out, atomicfile.Output{Role: "the run folder's", Path: filepath.Join(dir, f), Dir: runDirs[f]})
	}
	return out
}

// Claim prepares dir for a new run of command, before anything is written
// there:
//   - a missing folder is made and marked as command's;
//   - a folder of another command (its marker, or for a folder written
//     before markers its summary.json), a run folder of unknown command or
//     a non-empty folder that is no run folder is refused unless force;
//   - a folder of the same command is refused unless force or
//     overwriteOwn (the demo reuses its own folder), or unless it holds
//     nothing to continue (no checkpoint, no logged block: a run that
//     stopped before its first block), as Prepare does.
//
// A folder that is taken over has the run's own files removed first
// (runFiles; other files stay). Refusals are UserErrors naming what to do.
func Claim(dir, command string, force, overwriteOwn bool) error {
	owner, err := ReadOwner(dir)
	if err != nil {
		if !force {
			return userf("run folder %s: %v; overwrite it with --force or pick another --name", dir, err)
		}
		owner = ""
	}
	if owner == "" {
		owner = LegacyOwner(dir)
	}
	st, serr := os.Stat(dir)
	switch {
	case errors.Is(serr, os.ErrNotExist):
	case serr != nil:
		return fmt.Errorf("run folder: %w", serr)
	case !st.IsDir():
		return userf("run folder %s exists and is not a folder; pick another --name or --out", dir)
	case owner != "" && owner != command && !force:
		return userf("run folder %s belongs to a %s run; pick another --name, or overwrite it with --force", dir, owner)
	case owner == "" && !force:
		if _, err := os.Stat(filepath.Join(dir, FileConfig)); err == nil {
			if _, logged := Status(dir); logged || command == "demo" {
				return userf("run folder %s holds an earlier run (made before run folders recorded their command); pick another --name, or overwrite it with --force", dir)
			}
		} else if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			return userf("%s exists and is not a densitykv run folder (%d entries); pick another --name or --out, or write the run's files into it with --force", dir, len(ents))
		}
	}
	if owner == command && overwriteOwn {
		force = true
	}
	if err := prepare(dir, force); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("run folder: %w", err)
	}
	b, _ := json.Marshal(Owner{Format: OwnerFormat, Command: command})
	return WriteFile(filepath.Join(dir, FileOwner), append(b, '\n'))
}

// LegacyOwner is the command of a run folder written before markers
// existed, from its summary.json ("" when unknown).
func LegacyOwner(dir string) string {
	var sum struct {
		Command string `json:"command"`
	}
	if ReadJSON(filepath.Join(dir, FileSummary), &sum) != nil {
		return ""
	}
	switch sum.Command {
	case "demo", "simulate", "generate":
		return sum.Command
	}
	return ""
}

// CheckOwner refuses to continue (--resume) a run folder made by another
// command, naming the command to use.
func CheckOwner(dir, command string) error {
	owner, err := ReadOwner(dir)
	if err != nil {
		return userf("--resume: %v", err)
	}
	if owner == "" {
		owner = LegacyOwner(dir)
	}
	if owner != "" && owner != command {
		return userf("--resume: run folder %s belongs to a %s run; continue it with densitykv %s --resume", dir, owner, owner)
	}
	return nil
}

// State describes how far a run folder got, for trace and for messages.
type State struct {
	// Command made the folder ("" when unknown).
	Command string
	// Complete: the final checkpoint records every block, written after
	// every result file.
	Complete bool
	// NextBlock is the checkpoint's next block (0 without one).
	NextBlock int
	// TornLog: the memory log ends in a torn line (a write that failed).
	TornLog bool
}

// Inspect reads a run folder's state: who made it, its checkpoint, and
// whether its memory log ends in a torn line.
func Inspect(dir string) State {
	var s State
	s.Command, _ = ReadOwner(dir)
	var sc sealedCheckpoint
	if b, err := ReadRecord(filepath.Join(dir, DirState, FileCheckpoint)); err == nil && json.Unmarshal(b, &sc) == nil && sc.intact() {
		var st struct {
			NextBlock int `json:"next_block"`
		}
		json.Unmarshal(sc.State, &st)
		s.NextBlock = st.NextBlock
		var sum Summary
		// Complete: summary.json says so and the checkpoint (written after
		// it) agrees.
		if ReadJSON(filepath.Join(dir, FileSummary), &sum) == nil && sum.Complete && sum.CompletedBlocks == st.NextBlock && st.NextBlock == sum.Blocks {
			s.Complete = true
		}
		if s.Command == "" && sc.Format == GenerateCheckpoint {
			s.Command = "generate"
		}
	}
	_, err := ReadLog(filepath.Join(dir, FileLog))
	s.TornLog = errors.Is(err, ErrTornLine)
	return s
}
