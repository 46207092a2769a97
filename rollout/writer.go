package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/internal/filehash"
	"github.com/densitykv/densitykv/internal/limitread"
)

// ManifestFile and LatentDir name the outputs of a Writer inside its folder.
const (
	ManifestFile = "manifest.json"
	LatentDir    = "latents"
)

// Manifest describes a rollout's output folder. It is rewritten (atomically)
// after every block, so a partial rollout is always readable.
type Manifest struct {
	Version        int       `json:"version"`
	Created        string    `json:"created"`
	Policy         string    `json:"policy"`
	Channels       int       `json:"channels"`
	Height         int       `json:"height"`
	Width          int       `json:"width"`
	FramesPerBlock int       `json:"frames_per_block"`
	BlocksPlanned  int       `json:"blocks_planned"`
	Timesteps      []float32 `json:"timesteps"`
	Sigmas         []float32 `json:"sigmas"`
	// FirstTimesteps and FirstSigmas are block 0's when it has its own
	// step list; Update names the denoising update when it is not
	// x0_renoise.
	FirstTimesteps []float32         `json:"first_timesteps,omitempty"`
	FirstSigmas    []float32         `json:"first_sigmas,omitempty"`
	Update         string            `json:"update,omitempty"`
	Seed           *uint64           `json:"seed,omitempty"`
	Extra          map[string]string `json:"extra,omitempty"`
	Shards         []Shard           `json:"shards"`
	Complete       bool              `json:"complete"`
}

// Shard is one block's latent file.
type Shard struct {
	Block   int     `json:"block"`
	Frames  [2]int  `json:"frames"` // [start, end)
	File    string  `json:"file"`   // relative to the folder
	Tensor  string  `json:"tensor"` // "latents" [F][C][H][W]
	Seconds float64 `json:"seconds"`
	// SHA256 is the file's SHA-256 (hex), checked when a rollout resumes.
	SHA256 string `json:"sha256,omitempty"`
}

// Writer streams latent shards (one safetensors file per block) and the
// manifest into a folder.
type Writer struct {
	dir string
	man Manifest
}

// NewWriter creates dir (and dir/latents) and writes the initial manifest.
// man describes the rollout; its Shards must be empty.
func NewWriter(dir string, man Manifest) (*Writer, error) {
	if err := os.MkdirAll(filepath.Join(dir, LatentDir), 0o755); err != nil {
		return nil, fmt.Errorf("rollout: writer: %w", err)
	}
	if len(man.Shards) != 0 {
		return nil, fmt.Errorf("rollout: writer: manifest already lists %d shards", len(man.Shards))
	}
	man.Version = 1
	if man.Created == "" {
		man.Created = time.Now().UTC().Format(time.RFC3339)
	}
	w := &Writer{dir: dir, man: man}
	return w, w.flush()
}

// ResumeWriter reopens the folder of a stopped rollout to continue at block
// next (see Options.Start). It reads the manifest and checks that it lists
// shards 0..next−1 in order and that their files exist with the SHA-256 the
// manifest recorded (the files are hashed, not decoded). Shards from next
// on — blocks written after the state the rollout resumes from — are
// dropped from the manifest and their files removed; the manifest is
// rewritten.
func ResumeWriter(dir string, next int) (*Writer, error) {
	man, err := ReadManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("rollout: resume: %w", err)
	}
	if next < 0 || next > len(man.Shards) {
		return nil, fmt.Errorf("rollout: resume at block %d: %s lists %d shards", next, filepath.Join(dir, ManifestFile), len(man.Shards))
	}
	F := man.FramesPerBlock
	for b, sh := range man.Shards[:next] {
		want := fmt.Sprintf("%s/block_%05d.safetensors", LatentDir, b)
		if sh.Block != b || sh.File != want || sh.Frames != [2]int{b * F, (b + 1) * F} {
			return nil, fmt.Errorf("rollout: resume: %s: shard %d is block %d in %s, want block %d in %s", ManifestFile, b, sh.Block, sh.File, b, want)
		}
		sum, err := filehash.WholeFile(filepath.Join(dir, sh.File))
		if err != nil {
			return nil, fmt.Errorf("rollout: resume: latents of completed block %d: %w", b, err)
		}
		if sh.SHA256 != "" && sum != sh.SHA256 {
			return nil, fmt.Errorf("rollout: resume: latents of completed block %d: %s has SHA-256 %s, the manifest records %s", b, filepath.Join(dir, sh.File), sum, sh.SHA256)
		}
	}
	// Blocks beyond next: listed or not (a crash between a shard and its
	// manifest), their files go.
	stale, _ := filepath.Glob(filepath.Join(dir, LatentDir, "block_*.safetensors*"))
	for _, f := range stale {
		var b int
		_, err := fmt.Sscanf(filepath.Base(f), "block_%d.safetensors", &b)
		if err == nil && (b >= next || strings.HasSuffix(f, ".tmp")) {
			if err := os.Remove(f); err != nil {
				return nil, fmt.Errorf("rollout: resume: %w", err)
			}
		}
	}
	man.Shards = man.Shards[:next]
	man.Complete = man.BlocksPlanned > 0 && next == man.BlocksPlanned
	w := &Writer{dir: dir, man: man}
	return w, w.flush()
}

// Next returns the block the writer expects next.
func (w *Writer) Next() int { return len(w.man.Shards) }

// Manifest returns a copy of the current manifest.
func (w *Writer) Manifest() Manifest {
	m := w.man
	m.Shards = append([]Shard(nil), m.Shards...)
	return m
}

// WriteBlock writes block b's latents [F][C][H][W] and updates the manifest.
// Blocks must arrive in order.
func (w *Writer) WriteBlock(b int, latents []float32, seconds float64) error {
	F, C, H, W := w.man.FramesPerBlock, w.man.Channels, w.man.Height, w.man.Width
	if b != len(w.man.Shards) {
		return fmt.Errorf("rollout: writer: block %d out of order (next %d)", b, len(w.man.Shards))
	}
	if len(latents) != F*C*H*W {
		return fmt.Errorf("rollout: writer: block %d has %d values, want %d×%d×%d×%d", b, len(latents), F, C, H, W)
	}
	name := fmt.Sprintf("%s/block_%05d.safetensors", LatentDir, b)
	sum, err := writeShard(filepath.Join(w.dir, name),
		[]checkpoint.WriteTensor{{Name: "latents", Shape: []int{F, C, H, W}, Data: latents}},
		map[string]string{"block": fmt.Sprint(b), "first_frame": fmt.Sprint(b * F)})
	if err != nil {
		return fmt.Errorf("rollout: writer: block %d: %w", b, err)
	}
	w.man.Shards = append(w.man.Shards, Shard{Block: b, Frames: [2]int{b * F, (b + 1) * F}, File: name, Tensor: "latents", Seconds: seconds, SHA256: sum})
	w.man.Complete = w.man.BlocksPlanned > 0 && len(w.man.Shards) == w.man.BlocksPlanned
	return w.flush()
}

// writeShard writes a safetensors file atomically (package atomicfile:
// synced temporary file, rename, folder sync) and returns its SHA-256.
func writeShard(path string, tensors []checkpoint.WriteTensor, metadata map[string]string) (string, error) {
	h := sha256.New()
	if err := atomicfile.Write(path, func(w io.Writer) error {
		return checkpoint.WriteSafetensors(io.MultiWriter(w, h), tensors, metadata)
	}); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (w *Writer) flush() error {
	b, err := json.MarshalIndent(w.man, "", "  ")
	if err != nil {
		return fmt.Errorf("rollout: writer: manifest: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(w.dir, ManifestFile), append(b, '\n')); err != nil {
		return fmt.Errorf("rollout: writer: manifest: %w", err)
	}
	return nil
}

// maxManifest bounds manifest.json (a line per block: far below this).
const maxManifest = 256 << 20

// ReadManifest reads dir/manifest.json.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := limitread.File(filepath.Join(dir, ManifestFile), maxManifest, "rollout manifests")
	if err != nil {
		return m, fmt.Errorf("rollout: manifest: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("rollout: manifest %s: %w", dir, err)
	}
	return m, nil
}

// ReadBlock reads the latents of shard i of a manifest in dir.
func ReadBlock(dir string, m Manifest, i int) ([]float32, error) {
	if i < 0 || i >= len(m.Shards) {
		return nil, fmt.Errorf("rollout: read block %d: manifest lists %d shards", i, len(m.Shards))
	}
	sh := m.Shards[i]
	s, err := checkpoint.OpenSafetensors(filepath.Join(dir, sh.File))
	if err != nil {
		return nil, fmt.Errorf("rollout: read block %d: %w", i, err)
	}
	defer s.Close()
	v, shape, err := s.Float32(sh.Tensor)
	if err != nil {
		return nil, fmt.Errorf("rollout: read block %d: %w", i, err)
	}
	want := []int{m.FramesPerBlock, m.Channels, m.Height, m.Width}
	if len(shape) != 4 || shape[0] != want[0] || shape[1] != want[1] || shape[2] != want[2] || shape[3] != want[3] {
		return nil, fmt.Errorf("rollout: read block %d: shape %v, want %v", i, shape, want)
	}
	return v, nil
}
