package generate

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/densitykv/densitykv/video"
)

// Provenance records what made a video: the prompt schedule, the seed,
// the memory policy, the backbone and the identity of every file read.
// It goes into the mp4 metadata (Tags) and the run folder.
type Provenance struct {
	Prompts  []PromptRecord `json:"prompts"`
	Seed     uint64         `json:"seed"`
	Policy   string         `json:"policy"`
	Backbone string         `json:"backbone"` // architecture (1.3b, tiny)
	// Preset is the backbone preset (self-forcing, causal-forcing,
	// longlive; "" for none), Entry the checkpoint entry loaded ("" for a
	// safetensors file), Precision the models' precision (fp32, bf16).
	Preset    string `json:"backbone_preset,omitempty"`
	Entry     string `json:"entry,omitempty"`
	Precision string `json:"precision,omitempty"`
	// Device is where the DiT computed when the run started: "cpu" or
	// "vulkan:N NAME (DRIVER)" (exact mode: the same bits either way; a
	// resumed run may continue elsewhere). It is not among the video's
	// Tags, so the video's bytes are the same on every device.
	Device string       `json:"device,omitempty"`
	Files  []FileRecord `json:"files"`
}

// PromptRecord is one entry of the prompt schedule: a prompt (Text, as
// given, with its tokens) or a text-embedding file (File).
type PromptRecord struct {
	FromBlock int    `json:"from_block"`
	Text      string `json:"text,omitempty"`
	Cleaned   string `json:"cleaned,omitempty"`
	Pieces    int    `json:"pieces,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// File is the embedding file used (a --text file, or the prompt's
	// embedding saved in the run folder).
	File string `json:"file"`
}

// FileRecord identifies one input file.
type FileRecord struct {
	Role string `json:"role"` // checkpoint, lora, text_encoder, tokenizer, vae, text
	Path string `json:"path"`
	Size int64  `json:"size"`
	// Sum is filehash.Sum.String(): "sha256:…", or "sampled-sha256:…" for
	// files over 256 MiB (their size and 64 evenly spaced MiB).
	Sum string `json:"sum"`
}

// Tags are the mp4 metadata: title (the first prompt), comment (seed,
// policy, backbone), and densitykv_* keys for the schedule and every
// field.
func (p Provenance) Tags() []video.Tag {
	title := ""
	if len(p.Prompts) > 0 {
		title = p.Prompts[0].Text
		if title == "" {
			title = filepath.Base(p.Prompts[0].File)
		}
	}
	type entry struct {
		FromBlock int    `json:"from_block"`
		Prompt    string `json:"prompt,omitempty"`
		File      string `json:"file,omitempty"`
	}
	var sched []entry
	for _, r := range p.Prompts {
		e := entry{FromBlock: r.FromBlock, Prompt: r.Text}
		if r.Text == "" {
			e.File = filepath.Base(r.File)
		}
		sched = append(sched, e)
	}
	js, _ := json.Marshal(sched)
	preset := ""
	if p.Preset != "" {
		preset = " (" + p.Preset + " preset)"
	}
	tags := []video.Tag{
		{Key: "title", Value: title},
		{Key: "comment", Value: fmt.Sprintf("densitykv generate: seed %d, policy %s, backbone %s%s, precision %s", p.Seed, p.Policy, p.Backbone, preset, p.Precision)},
		{Key: "densitykv_prompts", Value: string(js)},
		{Key: "densitykv_seed", Value: strconv.FormatUint(p.Seed, 10)},
		{Key: "densitykv_policy", Value: p.Policy},
		{Key: "densitykv_backbone", Value: p.Backbone},
	}
	for _, kv := range [][2]string{{"densitykv_backbone_preset", p.Preset}, {"densitykv_entry", p.Entry}, {"densitykv_precision", p.Precision}} {
		if kv[1] != "" {
			tags = append(tags, video.Tag{Key: kv[0], Value: kv[1]})
		}
	}
	n := map[string]int{}
	for _, f := range p.Files {
		key := "densitykv_" + f.Role
		if f.Role == "text" {
			key += "_" + strconv.Itoa(n[f.Role])
		}
		n[f.Role]++
		tags = append(tags, video.Tag{Key: key, Value: f.Sum + " " + filepath.Base(f.Path)})
	}
	return tags
}
