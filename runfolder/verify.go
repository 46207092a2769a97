package runfolder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// A run folder records what it wrote: manifest.json the SHA-256 of every
// latent shard, the checkpoint (state/checkpoint.json, itself sealed by
// the SHA-256 of its state) the SHA-256 of the configuration and of the
// shards of the blocks it covers, and the sizes of the logs written as
// the run goes. Every reader of those files checks them against the
// record before using them (resume, decode, trace, collect), so that a
// file changed or damaged since the run wrote it is refused, by name,
// before anything is written.

// ReadCheckpointState reads the state of a run folder's checkpoint, a
// generate or a simulate one, checking its seal. It returns nil, nil
// when the folder has none.
func ReadCheckpointState(dir string) (*GenerateState, error) {
	path := filepath.Join(dir, DirState, FileCheckpoint)
	var env struct {
		Format string `json:"format"`
	}
	if err := ReadJSON(path, &env); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("%s is damaged: %w", path, err)
	}
	if env.Format == SimulateCheckpoint {
		var rs RunState
		if err := readSealed(path, SimulateCheckpoint, simCheckpointVersion, &rs); err != nil {
			return nil, err
		}
		return &GenerateState{RunState: rs}, nil
	}
	return ReadGenerateCheckpointFile(path)
}

// CheckConfigRecord checks the run folder's config.resolved.yaml against
// the SHA-256 its checkpoint records (st nil or without one: nothing to
// check).
func CheckConfigRecord(dir string, st *GenerateState) error {
	if st == nil || st.ConfigSHA256 == "" {
		return nil
	}
	path := filepath.Join(dir, FileConfig)
	y, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if sum := sha256Hex(y); sum != st.ConfigSHA256 {
		return fmt.Errorf("%s has SHA-256 %.12s…, the run's checkpoint (%s) records %.12s…: the configuration was changed since the run wrote it",
			path, sum, filepath.Join(DirState, FileCheckpoint), st.ConfigSHA256)
	}
	return nil
}

// CheckRecorded checks, before a reader uses them, the files of run
// folder dir that its checkpoint (when it has one) records: the
// configuration's SHA-256 and the sizes of the memory log (exactly its
// size once the run is complete: Inspect) and of the lineage (at least:
// its closing lines follow the final checkpoint's record).
func CheckRecorded(dir string) error {
	st, err := ReadCheckpointState(dir)
	if err != nil || st == nil {
		return err
	}
	if err := CheckConfigRecord(dir, st); err != nil {
		return err
	}
	complete := Inspect(dir).Complete
	if err := checkLogRecord(filepath.Join(dir, FileLog), st.LogBytes, complete); err != nil {
		return err
	}
	if err := checkLogRecord(filepath.Join(dir, FileDrift), st.DriftBytes, complete); err != nil {
		return err
	}
	return checkLogRecord(filepath.Join(dir, FileLineage), st.LineageBytes, false)
}

// checkLogRecord checks a log the run writes as it goes (the memory log,
// the lineage) against the size its checkpoint records: the file holds
// at least those bytes (the lines after them are blocks the checkpoint
// does not cover yet, which resume cuts back), and once the run is
// complete nothing more than a torn line (a write that failed).
func checkLogRecord(path string, recorded int64, complete bool) error {
	if recorded <= 0 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < recorded {
		return fmt.Errorf("%s has %d bytes, fewer than the %d the run's checkpoint records: the file was cut or replaced since the run wrote it", path, st.Size(), recorded)
	}
	if complete && st.Size() > recorded {
		tail, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, recorded, st.Size()-recorded), 1<<20))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if bytes.IndexByte(tail, '\n') >= 0 || int64(len(tail)) < st.Size()-recorded {
			return fmt.Errorf("%s has %d bytes, the complete run's checkpoint records %d: lines were added since the run wrote it", path, st.Size(), recorded)
		}
	}
	return nil
}

// intact reports whether a checkpoint's state has the SHA-256 its
// envelope records (a damaged checkpoint is none: Inspect does not take
// it for the run's).
func (c sealedCheckpoint) intact() bool {
	var compact bytes.Buffer
	return json.Compact(&compact, c.State) == nil && sha256Hex(compact.Bytes()) == c.SHA256
}
