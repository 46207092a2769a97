package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// LatentFPS is the latent frame rate of the Wan backbones (4 latent
// frames per second; the VAE decodes latent frame 0 into 1 video frame and
// every later one into 4, at 16 fps).
const LatentFPS = 4

// MaxHorizons bounds generate.horizons.
const MaxHorizons = 64

// HorizonBlocks is the number of blocks of framesPerBlock latent frames
// that a horizon of seconds covers: ⌈LatentFPS·seconds / framesPerBlock⌉,
// the rule --seconds uses (30 s of 3-frame blocks: 40 blocks, 120 latent
// frames).
func HorizonBlocks(seconds float64, framesPerBlock int) int {
	return int(math.Ceil(seconds*LatentFPS/float64(framesPerBlock) - 1e-9))
}

// VideoFrames is the number of video frames the Wan VAE decodes from
// latent frames: 1 + 4·(latent − 1) (0 for none). 30 s (120 latent
// frames) is 477 frames at 16 fps, 60 s 957, 120 s 1,917.
func VideoFrames(latent int) int {
	if latent <= 0 {
		return 0
	}
	return 1 + 4*(latent-1)
}

// HorizonName is the file of a horizon's video: video_30s.mp4 (seconds
// written as Go's shortest %g form: video_1.5s.mp4).
func HorizonName(seconds float64) string {
	return "video_" + strconv.FormatFloat(seconds, 'g', -1, 64) + "s.mp4"
}

// resolveList checks the prompt-list keys (prompt_indices,
// extended_prompts_file) and the horizons against the run's blocks.
func (G *GenerateSection) resolveList(framesPerBlock int) error {
	if G.PromptsFile == "" {
		if G.PromptIndices != nil {
			return fmt.Errorf("--prompt-indices (generate.prompt_indices) selects lines of a --prompts file; give --prompts")
		}
		if G.ExtendedPromptsFile != "" {
			return fmt.Errorf("--extended-prompts (generate.extended_prompts_file) extends the lines of a --prompts file; give --prompts")
		}
	}
	if len(G.PromptIndices) > MaxPromptIndices {
		return fmt.Errorf("--prompt-indices (generate.prompt_indices) lists %d indices, at most %d accepted", len(G.PromptIndices), MaxPromptIndices)
	}
	seen := map[int]bool{}
	for _, i := range G.PromptIndices {
		if i < 0 {
			return fmt.Errorf("--prompt-indices (generate.prompt_indices): index %d is negative (indices count the prompts file's lines from 0)", i)
		}
		if seen[i] {
			return fmt.Errorf("--prompt-indices (generate.prompt_indices): index %d is listed twice", i)
		}
		seen[i] = true
	}
	if len(G.Horizons) > MaxHorizons {
		return fmt.Errorf("--horizons (generate.horizons) lists %d horizons, at most %d accepted", len(G.Horizons), MaxHorizons)
	}
	for k, h := range G.Horizons {
		if !(h > 0) || math.IsInf(h, 0) {
			return fmt.Errorf("--horizons (generate.horizons): %v is not a positive number of seconds", h)
		}
		if k > 0 && h <= G.Horizons[k-1] {
			return fmt.Errorf("--horizons (generate.horizons) %v: list the horizons in increasing order, each once", G.Horizons)
		}
		if b := HorizonBlocks(h, framesPerBlock); b > G.Blocks {
			return fmt.Errorf("--horizons (generate.horizons): %v s needs %d blocks of %d latent frames, the run has %d (--seconds/--blocks)", h, b, framesPerBlock, G.Blocks)
		}
	}
	if len(G.Horizons) > 0 && G.VAE == "" {
		return fmt.Errorf("--horizons (generate.horizons) writes decoded video prefixes; give --vae")
	}
	return nil
}

// MaxPromptIndices bounds generate.prompt_indices.
const MaxPromptIndices = 1 << 20

// ListIdentity is the part of a list run's configuration that every shard
// of the list must share: the configuration with what may differ between
// workers cleared (the run folder's parent and name as spelled on each
// worker, the text cache's place, the prompts files' paths, whose contents
// are compared by hash instead, and skip_existing, which changes what a
// worker does but not what it makes).
func ListIdentity(gc GenerateConfig) GenerateConfig {
	id := gc
	id.Run.Out, id.Run.Name = "", ""
	g := &id.Generate
	g.TextCache, g.PromptsFile, g.ExtendedPromptsFile = "", "", ""
	g.SkipExisting = true
	g.PromptIndices = slices.Clone(g.PromptIndices)
	return id
}
