package parity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
)

// Kinds of folders a Side reads.
const (
	KindRun     = "densitykv run"
	KindAuthors = "authors' outputs"
)

// Side is one folder of a comparison, opened (Open): what it holds and
// where each part was read from.
type Side struct {
	Dir  string
	Kind string // KindRun or KindAuthors
	// FramesPerBlock is a run folder's block length (0 for the authors':
	// their files do not record it).
	FramesPerBlock int
	// Files names the files read, by part: latents, lineage, trace (the
	// first latent shard stands for the others).
	Files map[string]string

	lat     latentSource // nil without latents
	lineage *lineage     // nil without a lineage
	trace   *trace       // nil without a trace
}

// Open reads the folder dir: a densitykv run folder when it holds
// manifest.json, else a folder of the authors' outputs (see the package
// comment). The lineage and trace are read whole; the latents are read
// block by block as they are compared. Errors name the file at fault.
func Open(dir string) (*Side, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("parity: %s is not a folder (a run folder, or a folder of the authors' outputs)", dir)
	}
	s := &Side{Dir: dir, Files: map[string]string{}}
	if _, err := os.Stat(filepath.Join(dir, rollout.ManifestFile)); err == nil {
		err = s.openRun()
		if err != nil {
			return nil, fmt.Errorf("parity: run folder %s: %w", dir, err)
		}
		return s, nil
	}
	if err := s.openAuthors(); err != nil {
		return nil, fmt.Errorf("parity: %s: %w", dir, err)
	}
	return s, nil
}

func (s *Side) openRun() error {
	s.Kind = KindRun
	man, err := rollout.ReadManifest(s.Dir)
	if err != nil {
		return err
	}
	if man.FramesPerBlock <= 0 || man.Channels <= 0 || man.Height <= 0 || man.Width <= 0 {
		return fmt.Errorf("%s: frames per block %d, latents [%d, %d, %d]", rollout.ManifestFile, man.FramesPerBlock, man.Channels, man.Height, man.Width)
	}
	s.FramesPerBlock = man.FramesPerBlock
	if len(man.Shards) > 0 {
		s.lat = &runLatents{dir: s.Dir, man: man, cached: -1}
		s.Files["latents"] = filepath.Join(s.Dir, man.Shards[0].File)
	}
	if p := filepath.Join(s.Dir, runfolder.FileLineage); exists(p) {
		if s.lineage, err = readLineageJSONL(p); err != nil {
			return err
		}
		s.Files["lineage"] = p
	}
	if p := filepath.Join(s.Dir, runfolder.FileTraceLayers); exists(p) {
		if s.trace, err = readTraceSafetensors(p); err != nil {
			return err
		}
		s.Files["trace"] = p
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// one returns the single file of the patterns' matches under dir ("" for
// none); several are an error naming them.
func one(dir, what string, patterns ...string) (string, error) {
	seen := map[string]bool{}
	var all []string
	for _, p := range patterns {
		m, _ := filepath.Glob(filepath.Join(dir, p))
		for _, f := range m {
			if !seen[f] {
				seen[f] = true
				all = append(all, f)
			}
		}
	}
	sort.Strings(all)
	if len(all) > 1 {
		return "", fmt.Errorf("%d files could be the %s (%s): leave one in the folder", len(all), what, strings.Join(all, ", "))
	}
	if len(all) == 0 {
		return "", nil
	}
	return all[0], nil
}

func (s *Side) openAuthors() error {
	s.Kind = KindAuthors
	// Latents: their streaming shards, or one file.
	var shardDirs []string
	for _, p := range []string{"latents", "*_stream/latents"} {
		m, _ := filepath.Glob(filepath.Join(s.Dir, p))
		for _, d := range m {
			if fs, _ := filepath.Glob(filepath.Join(d, "latent_*.pt")); len(fs) > 0 {
				shardDirs = append(shardDirs, d)
			}
		}
	}
	file, err := one(s.Dir, "latents", "latents.pt", "*_latents.pt")
	if err != nil {
		return err
	}
	switch {
	case len(shardDirs) > 1 || len(shardDirs) == 1 && file != "":
		return fmt.Errorf("several sets of latents (%s %s): leave one in the folder", strings.Join(shardDirs, ", "), file)
	case len(shardDirs) == 1:
		l, err := openAuthorsShards(shardDirs[0])
		if err != nil {
			return err
		}
		s.lat, s.Files["latents"] = l, l.shards[0].path
	case file != "":
		l, err := readAuthorsLatents(file)
		if err != nil {
			return err
		}
		s.lat, s.Files["latents"] = l, file
	}
	if p, err := one(s.Dir, "lineage", "*density_lineage.pt", runfolder.FileLineage); err != nil {
		return err
	} else if p != "" {
		if strings.HasSuffix(p, ".pt") {
			s.lineage, err = readLineagePT(p)
		} else {
			s.lineage, err = readLineageJSONL(p)
		}
		if err != nil {
			return err
		}
		s.Files["lineage"] = p
	}
	if p, err := one(s.Dir, "attention trace", "*temporal_attention.pt", runfolder.FileTraceLayers); err != nil {
		return err
	} else if p != "" {
		if strings.HasSuffix(p, ".pt") {
			s.trace, err = readTracePT(p)
		} else {
			s.trace, err = readTraceSafetensors(p)
		}
		if err != nil {
			return err
		}
		s.Files["trace"] = p
	}
	if s.lat == nil && s.lineage == nil && s.trace == nil {
		return errors.New("neither a densitykv run folder (no manifest.json) nor a folder of the authors' outputs (no latents/latent_*.pt, latents.pt, *_density_lineage.pt or *_temporal_attention.pt)")
	}
	return nil
}
