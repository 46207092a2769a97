package runfolder

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/densitykv/densitykv/drift"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/internal/filehash"
	"github.com/densitykv/densitykv/memory"
)

// A generate run's resume checkpoint is state/checkpoint.json (a
// genCheckpoint, written last and atomically: it is the commit point) and
// the policy snapshot it names (memory.Snapshotter, itself checksummed).
// Together with the files the run writes as it goes (latent shards and
// manifest, memory log, --record-stream file) they hold everything the
// rollout needs to continue from block NextBlock bit-identically; the
// positions of those files at the checkpoint are in the state, and resume
// cuts them back to it. The noise needs no state (it is addressed by frame
// and draw index), nor do the prompt schedule (chosen by block index) and
// the cross-attention K/V (fixed by the text and the weights, which the
// state fingerprints).
const genCheckpointVersion = 1

// sealedCheckpoint is the envelope of state/checkpoint.json (generate and
// simulate): State is checked against SHA256, the SHA-256 of its compact
// JSON, and Format names the command that wrote it.
type sealedCheckpoint struct {
	Format  string          `json:"format"`
	Version int             `json:"version"`
	SHA256  string          `json:"sha256"`
	State   json.RawMessage `json:"state"`
}

// GenerateState is what a generate checkpoint saves besides the policy
// snapshot.
type GenerateState struct {
	// RunState: the next block, the memory log's size, the totals, the
	// bytes by block and the admissions as they stood after block
	// NextBlock−1.
	RunState
	// ConfigSHA256 is the SHA-256 of config.resolved.yaml.
	ConfigSHA256 string `json:"config_sha256"`
	// Inputs fingerprints the checkpoint, LoRA and text files (and
	// LongLive-RAG's autoencoder).
	Inputs []FileFingerprint `json:"inputs"`
	// Snapshot names the policy snapshot in state/ and gives its SHA-256
	// ("" once the run is complete).
	Snapshot       string `json:"snapshot,omitempty"`
	SnapshotSHA256 string `json:"snapshot_sha256,omitempty"`
	// Shards are the SHA-256 of the latent shards of blocks 0..NextBlock−1.
	Shards []string `json:"shards_sha256"`
	// TraceMass is the attention tracer's accumulated (unnormalised) mass.
	TraceMass []float64 `json:"trace_mass,omitempty"`
	// TraceLayers names the per-layer attention trace saved in state/ with
	// this checkpoint, and gives its SHA-256 ("" without per-layer
	// tracing; a checkpoint of an older version read the run folder's
	// attention_trace_layers.safetensors).
	TraceLayers       string `json:"trace_layers,omitempty"`
	TraceLayersSHA256 string `json:"trace_layers_sha256,omitempty"`
	// RecordBytes is the size of the --record-stream file after block
	// NextBlock−1 (−1 without a recording), RecordSHA256 the SHA-256 of
	// those bytes (empty in checkpoints written before it was recorded:
	// resume then checks every record's CRC-32).
	RecordBytes  int64  `json:"record_bytes"`
	RecordSHA256 string `json:"record_sha256,omitempty"`
	// LineageBytes is the size of density_kv_lineage.jsonl after block
	// NextBlock−1 (0 without one).
	LineageBytes int64 `json:"lineage_bytes,omitempty"`
	// Drift is the drift monitor's comparisons after block NextBlock−1
	// (nil in checkpoints of runs that began without it), DriftBytes the
	// size of drift.jsonl then, DriftSpent the --stop-on-drift rules that
	// have stopped the run (a resumed run is not stopped by them again).
	Drift      *drift.State `json:"drift,omitempty"`
	DriftBytes int64        `json:"drift_bytes,omitempty"`
	DriftSpent []string     `json:"drift_spent,omitempty"`
	// Video is how the run writes its video: "mp4" (one segment per
	// block), "png" (frames: no ffmpeg) or "" (no VAE).
	Video string `json:"video,omitempty"`
	// SegmentsSHA256 are the SHA-256 of the mp4 segments of blocks
	// 0..NextBlock−1.
	SegmentsSHA256 []string `json:"segments_sha256,omitempty"`
	// LosslessSHA256 are the SHA-256 of the segments' lossless copies
	// (state/video/, from which video.mp4 and the horizons are encoded) of
	// blocks 0..NextBlock−1; a checkpoint of an earlier version has none,
	// and resume makes them again from the latents.
	LosslessSHA256 []string `json:"lossless_sha256,omitempty"`
}

// FileFingerprint identifies an input file. A file of the run folder
// itself (Role embedding) is recorded by its path relative to the folder
// (text/prompt_00.safetensors), so that a folder moved or copied
// elsewhere resumes there; a file outside it by the path the run read it
// from, which resume does not require: such a file is identified by its
// content (Size, SHA256), wherever it is now.
type FileFingerprint struct {
	Role   string `json:"role"` // checkpoint, lora, text, embedding, vae or rag-ae
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Fingerprint identifies an input file (package filehash: SHA-256 of the
// whole file, or of its size and sampled pieces for files over 256 MiB)
// or model folder (a diffusers folder: filehash.Path, by its files).
func Fingerprint(role, path string) (FileFingerprint, error) {
	s, err := filehash.Path(path)
	if err != nil {
		return FileFingerprint{Role: role, Path: path}, err
	}
	return FileFingerprint{Role: role, Path: path, Size: s.Size, SHA256: s.SHA256}, nil
}

// ownFile reports whether an input of role is a file of the run folder
// itself (recorded relative to the folder).
func ownFile(role string) bool { return role == "embedding" }

// sameOwnFile reports whether recorded, the path a checkpoint records for
// a file of the run folder, names the file rel (its path in the folder):
// rel itself, or in the checkpoints of earlier versions the file's path
// as the run spelled it when it began (<out>/<name>/rel, relative or
// absolute), wherever the folder was then. Either way the file is read
// in the folder where it is now.
func sameOwnFile(recorded, rel string) bool {
	r, want := filepath.ToSlash(filepath.Clean(recorded)), filepath.ToSlash(filepath.Clean(rel))
	return r == want || strings.HasSuffix(r, "/"+want)
}

// CheckInputs compares the run's input files with the checkpoint's
// fingerprints and names the first that changed. A file outside the run
// folder is identified by its content: one read from another path than
// the checkpoint's with the same content is accepted and listed in moved
// ("checkpoint /new/w.safetensors (was /old/w.safetensors)").
func CheckInputs(saved, now []FileFingerprint) (moved []string, err error) {
	if len(saved) != len(now) {
		return nil, fmt.Errorf("the checkpoint fingerprints %d input files, the configuration names %d", len(saved), len(now))
	}
	for i, s := range saved {
		n := now[i]
		own := ownFile(s.Role)
		if s.Role != n.Role || (own && !sameOwnFile(s.Path, n.Path)) {
			return nil, fmt.Errorf("the checkpoint's input %d is %s %s, the configuration's %s %s", i, s.Role, s.Path, n.Role, n.Path)
		}
		if s.Size != n.Size || s.SHA256 != n.SHA256 {
			if !own && s.Path != n.Path {
				return nil, fmt.Errorf("%s %s is not the file the run started with (%d bytes, SHA-256 %.12s…; the checkpoint's %s %s has %d bytes, %.12s…); resume needs the files the run started with",
					s.Role, n.Path, n.Size, n.SHA256, s.Role, s.Path, s.Size, s.SHA256)
			}
			return nil, fmt.Errorf("%s %s changed since the checkpoint (%d bytes, SHA-256 %.12s…; was %d bytes, %.12s…); resume needs the files the run started with",
				s.Role, n.Path, n.Size, n.SHA256, s.Size, s.SHA256)
		}
		if !own && s.Path != n.Path {
			moved = append(moved, fmt.Sprintf("%s %s (was %s)", s.Role, n.Path, s.Path))
		}
	}
	return moved, nil
}

func sha256Hex(b []byte) string { return filehash.Bytes(b) }

// WriteGenerateCheckpoint writes state/checkpoint.json atomically.
func WriteGenerateCheckpoint(path string, st *GenerateState) error {
	return writeSealed(path, GenerateCheckpoint, genCheckpointVersion, st)
}

// ReadGenerateCheckpoint reads and checks the resume checkpoint of a
// generate run folder.
func ReadGenerateCheckpoint(dir string) (*GenerateState, error) {
	return ReadGenerateCheckpointFile(filepath.Join(dir, DirState, FileCheckpoint))
}

// ReadGenerateCheckpointFile reads and checks state/checkpoint.json.
func ReadGenerateCheckpointFile(path string) (*GenerateState, error) {
	st := new(GenerateState)
	if err := readSealed(path, GenerateCheckpoint, genCheckpointVersion, st); err != nil {
		return nil, err
	}
	return st, nil
}

// writeSealed writes state as a sealed checkpoint (format, version and the
// SHA-256 of the state's compact JSON) to path atomically.
func writeSealed(path, format string, version int, state any) error {
	js, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return WriteJSON(path, sealedCheckpoint{Format: format, Version: version, SHA256: sha256Hex(js), State: js})
}

// readSealed reads a checkpoint written by writeSealed into state, checking
// its format, version and checksum; unknown fields are errors.
func readSealed(path, format string, version int, state any) error {
	b, err := ReadRecord(path)
	if err != nil {
		return err
	}
	var env sealedCheckpoint
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s is damaged: %w", path, err)
	}
	if env.Format != format {
		return fmt.Errorf("%s is not a %s (format %q); it was written by another densitykv command or version", path, format, env.Format)
	}
	if env.Version != version {
		return fmt.Errorf("%s has format version %d; this densitykv reads version %d", path, env.Version, version)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, env.State); err != nil {
		return fmt.Errorf("%s is damaged: state: %w", path, err)
	}
	if sum := sha256Hex(compact.Bytes()); sum != env.SHA256 {
		return fmt.Errorf("%s is damaged: its state has SHA-256 %s, the file records %s", path, sum, env.SHA256)
	}
	dec := json.NewDecoder(&compact)
	dec.DisallowUnknownFields()
	if err := dec.Decode(state); err != nil {
		return fmt.Errorf("%s is damaged: state: %w", path, err)
	}
	return nil
}

// SaveSnapshotSum is saveSnapshot that also returns the file's SHA-256.
func SaveSnapshotSum(path string, s memory.Snapshotter) (string, error) {
	h := sha256.New()
	if err := atomicfile.Write(path, func(w io.Writer) error { return s.Save(io.MultiWriter(w, h)) }); err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// LoadSnapshotSum loads a snapshot into s, checking the file's SHA-256
// (read once: hashed while the policy decodes it). On error s is unchanged
// (memory.Snapshotter's contract) unless only the hash is wrong; the
// caller then discards s.
func LoadSnapshotSum(path, want string, s memory.Snapshotter) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	tr := io.TeeReader(f, h)
	lerr := s.Load(tr)
	if _, err := io.Copy(h, f); err != nil && lerr == nil {
		lerr = err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != want {
		return fmt.Errorf("snapshot %s has SHA-256 %s, the checkpoint records %s (a snapshot of another run or block, or damaged)", path, sum, want)
	}
	if lerr != nil {
		return fmt.Errorf("snapshot %s: %w", path, lerr)
	}
	return nil
}

// SnapshotName names policy i's snapshot in DirState taken before block
// (the number of completed blocks).
func SnapshotName(i int, policy string, block int) string {
	return fmt.Sprintf("policy-%02d-%s-b%06d.snap", i, policy, block)
}

func SaveSnapshot(path string, s memory.Snapshotter) error {
	if err := atomicfile.Write(path, s.Save); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

func LoadSnapshot(path string, s memory.Snapshotter) error {
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

// EmbeddingName is prompt i's embedding's path in the run folder.
func EmbeddingName(i int) string {
	return filepath.Join(DirText, fmt.Sprintf("prompt_%02d.safetensors", i))
}

// EmbeddingPath is the run folder's copy of prompt i's embedding.
func EmbeddingPath(dir string, i int) string { return filepath.Join(dir, EmbeddingName(i)) }
