package vbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/densitykv/densitykv/internal/limitread"
	"github.com/densitykv/densitykv/runfolder"
)

// Files of an export.
const (
	FileManifest = "manifest.json" // what went where (Manifest)
	FileCommands = "vbench.sh"     // the VBench-Long command of every folder
	FilePrompts  = "prompts.json"  // in each folder: VBench's --prompt_file map, file → prompt
	// ManifestFormat and ManifestVersion identify a manifest.
	ManifestFormat  = "densitykv-vbench-export"
	ManifestVersion = 1
	// maxManifest bounds a manifest read back (128 prompts × 45 folders is
	// a few MiB).
	maxManifest = 256 << 20
)

// Manifest is an export's manifest.json: the runs it took, the methods and
// prompt sets (suites) it found, and every exported video with where it
// came from. Table reads it to place VBench's results.
type Manifest struct {
	Format     string   `json:"format"`
	Version    int      `json:"version"`
	Dimensions []string `json:"dimensions"`
	// Link is how videos were to be exported (hard, symlink, copy); each
	// Video says how it was (a hard link falls back to a copy across file
	// systems).
	Link string `json:"link"`
	// Horizons are --horizons (empty: each run's own).
	Horizons []float64 `json:"horizons,omitempty"`
	Runs     []Run     `json:"runs"`
	Suites   []Suite   `json:"suites"`
	Methods  []Method  `json:"methods"`
	Folders  []Folder  `json:"folders"`
	Warnings []string  `json:"warnings,omitempty"`
}

// Run is one run: a prompt list (its folders: one, or one per shard copied
// from several machines) or a single generate run folder.
type Run struct {
	Dirs          []string  `json:"dirs"`
	Kind          string    `json:"kind"` // "list" or "generate"
	PromptsSHA256 string    `json:"prompts_sha256,omitempty"`
	ConfigSHA256  string    `json:"config_sha256"`
	Selected      []int     `json:"selected"`
	Blank         []int     `json:"blank,omitempty"`
	Suite         string    `json:"suite"`
	Method        string    `json:"method"`
	Policy        string    `json:"policy"`
	Backbone      string    `json:"backbone"`
	Seed          int64     `json:"seed"`
	Seconds       float64   `json:"seconds"`
	Horizons      []float64 `json:"horizons"` // exported
}

// Suite is a prompt set: the runs of one prompts file and selection.
// Methods are compared within a suite only.
type Suite struct {
	ID            string `json:"id"`
	PromptsSHA256 string `json:"prompts_sha256"`
	Selected      []int  `json:"selected"`
	Videos        int    `json:"videos"` // prompts with a video (blank lines have none)
}

// Method is a memory policy with its settings: runs with the same policy
// and the same memory configuration (the keys the policy reads) are one
// method.
type Method struct {
	ID     string `json:"id"`
	Policy string `json:"policy"`
	Label  string `json:"label"`
	TeX    string `json:"tex"`
	// Settings are the memory keys whose values set the method apart from
	// its policy's reference (the value most of the policy's methods
	// share), key → value; empty for the reference.
	Settings map[string]string `json:"settings,omitempty"`
	// Values are the method's values of the keys in which its policy's
	// methods differ (the reference's included): the ablation table's
	// settings column.
	Values map[string]string `json:"values,omitempty"`
	// SHA256 identifies the memory configuration.
	SHA256 string `json:"memory_sha256"`
}

// Folder is one exported folder: one suite, backbone, method and horizon,
// the unit VBench evaluates (--videos_path).
type Folder struct {
	Dir      string  `json:"dir"` // relative to the export, "/"-separated
	Suite    string  `json:"suite"`
	Backbone string  `json:"backbone"`
	Method   string  `json:"method"`
	Horizon  float64 `json:"horizon"`
	Videos   []Video `json:"videos"`
}

// Video is one exported video.
type Video struct {
	File     string  `json:"file"`
	Prompt   string  `json:"prompt"`
	Index    int     `json:"prompt_index"`
	Run      int     `json:"run"`     // index into Runs
	RunDir   string  `json:"run_dir"` // the prompt's run folder
	Source   string  `json:"source"`
	Policy   string  `json:"policy"`
	Backbone string  `json:"backbone"`
	Seed     int64   `json:"seed"`
	Horizon  float64 `json:"horizon"`
	Link     string  `json:"link"` // hard, symlink or copy
	Bytes    int64   `json:"bytes"`
}

// ReadManifest reads an export's manifest (the file, or the export folder
// holding it) and checks it.
func ReadManifest(p string) (*Manifest, error) {
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		p = filepath.Join(p, FileManifest)
	}
	b, err := limitread.File(p, maxManifest, "export manifest")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, userf("vbench: manifest %s: no such file (densitykv vbench export writes it)", p)
		}
		return nil, fmt.Errorf("vbench: %w", err)
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, userf("vbench: %s is not an export manifest: %v", p, err)
	}
	if err := m.check(); err != nil {
		return nil, userf("vbench: manifest %s: %w", p, err)
	}
	return &m, nil
}

// check checks a manifest read back: its format, and that every folder
// names a known suite and method and holds distinct, well-formed files.
func (m *Manifest) check() error {
	if m.Format != ManifestFormat {
		return fmt.Errorf("format %q, want %q", m.Format, ManifestFormat)
	}
	if m.Version != ManifestVersion {
		return fmt.Errorf("version %d; this densitykv reads version %d", m.Version, ManifestVersion)
	}
	if !slices.Equal(m.Dimensions, DimensionNames()) {
		return fmt.Errorf("dimensions %v, want the paper's six %v", m.Dimensions, DimensionNames())
	}
	suites, methods := map[string]bool{}, map[string]bool{}
	for _, s := range m.Suites {
		suites[s.ID] = true
	}
	for _, x := range m.Methods {
		if x.ID == "" || methods[x.ID] {
			return fmt.Errorf("method %q is empty or listed twice", x.ID)
		}
		methods[x.ID] = true
	}
	dirs := map[string]bool{}
	cells := map[string]string{}
	for _, f := range m.Folders {
		if f.Dir == "" || path.IsAbs(f.Dir) || path.Clean(f.Dir) != f.Dir || strings.HasPrefix(f.Dir, "..") || dirs[f.Dir] {
			return fmt.Errorf("folder %q is not a distinct relative path", f.Dir)
		}
		dirs[f.Dir] = true
		if !suites[f.Suite] || !methods[f.Method] {
			return fmt.Errorf("folder %s names suite %q and method %q, not both listed", f.Dir, f.Suite, f.Method)
		}
		if !(f.Horizon > 0) || math.IsInf(f.Horizon, 0) {
			return fmt.Errorf("folder %s: horizon %v", f.Dir, f.Horizon)
		}
		key := fmt.Sprintf("%s|%s|%s|%g", f.Suite, f.Backbone, f.Method, f.Horizon)
		if other, ok := cells[key]; ok {
			return fmt.Errorf("folders %s and %s are the same suite, backbone, method and horizon", other, f.Dir)
		}
		cells[key] = f.Dir
		if len(f.Videos) == 0 {
			return fmt.Errorf("folder %s lists no video", f.Dir)
		}
		files := map[string]bool{}
		for _, v := range f.Videos {
			if !strings.HasSuffix(v.File, ".mp4") || strings.ContainsAny(v.File, "/\\") || files[v.File] {
				return fmt.Errorf("folder %s: video file %q is not a distinct .mp4 name", f.Dir, v.File)
			}
			files[v.File] = true
			if v.Run < 0 || v.Run >= len(m.Runs) {
				return fmt.Errorf("folder %s: video %s names run %d of %d", f.Dir, v.File, v.Run, len(m.Runs))
			}
		}
	}
	return nil
}

// folder returns the folder with relative path dir.
func (m *Manifest) folder(dir string) *Folder {
	for i := range m.Folders {
		if m.Folders[i].Dir == dir {
			return &m.Folders[i]
		}
	}
	return nil
}

func (m *Manifest) method(id string) *Method {
	for i := range m.Methods {
		if m.Methods[i].ID == id {
			return &m.Methods[i]
		}
	}
	return nil
}

// userf is a refusal of bad input: a runfolder.UserError, which the
// command reports with the usage exit code.
func userf(format string, a ...any) error {
	return &runfolder.UserError{Err: fmt.Errorf(format, a...)}
}
