package runfolder

import (
	"fmt"
	"path/filepath"
)

// A list folder (generate --prompts FILE) holds one run folder per prompt,
// NNNNN/ (the prompt's zero-based line index in the file, as the authors'
// output names carry it), beside the list's shared files, which every
// shard of the list writes once and then only compares (FileBatch,
// FileBatchPrompts, FileBatchExtended, FileList), and each shard's own
// status file in DirShards. Shards of one list may share the folder: they
// take disjoint prompts (Shard.Take) and write only their prompts'
// folders, their lock files (DirLocks) and their status file.
const (
	FileBatch         = "batch.yaml"           // the list's configuration (config.ListIdentity), every shard's
	FileBatchPrompts  = "prompts.txt"          // a byte copy of the prompts file
	FileBatchExtended = "extended_prompts.txt" // a byte copy of the extended prompts file, when given
	FileList          = "list.json"            // the list's identity: hashes of the prompts and the configuration
	DirShards         = "shards"               // each shard's status, shard-I-of-N.json
	DirLocks          = "locks"                // NNNNN.lock: held (flock) by the worker making prompt NNNNN
	// MaxPromptsFile bounds a prompts file.
	MaxPromptsFile = 64 << 20
	// MaxPromptBytes bounds one prompt of a prompts file: the text
	// encoder's tokenizer accepts no more (tokenizer.MaxTextBytes, which
	// package generate's tests check it equals).
	MaxPromptBytes = 1 << 18
	// MaxRecordFile bounds a run folder's JSON and YAML records
	// (checkpoints, markers, configurations, manifests) and traces.
	MaxRecordFile = 1 << 30
)

// ListCommand is the command a list folder's marker (FileOwner) names: the
// folder belongs to a prompt list, whose shards all join it; each prompt's
// folder NNNNN/ is a run folder of its own, claimed as a "generate" run.
const ListCommand = "generate --prompts"

// ListManifest is list.json: what makes two shards parts of one list.
type ListManifest struct {
	Version        int    `json:"version"`
	PromptsSHA256  string `json:"prompts_sha256"`
	ExtendedSHA256 string `json:"extended_prompts_sha256,omitempty"`
	Prompts        int    `json:"prompts"`  // lines of the prompts file
	Selected       []int  `json:"selected"` // the indices the list makes, in run order
	// ConfigSHA256 is the SHA-256 of the list's configuration without the
	// input files' paths (listKey; version 1: of FileBatch).
	ConfigSHA256 string `json:"config_sha256"`
	// Inputs identify the files every prompt reads by content (version 2;
	// their paths are where the list's first worker read them).
	Inputs []FileFingerprint `json:"inputs,omitempty"`
}

// BatchEntry is one prompt of a list and what became of it.
type BatchEntry struct {
	Index  int    `json:"index"`
	Prompt string `json:"prompt"`
	Dir    string `json:"dir"`
	// State is "done" (complete before this call: skipped), "generated",
	// "resumed", "interrupted", "blank" (an empty line: no video),
	// "busy" (another worker holds its lock), "pending" (not reached), or in
	// a dry run "to generate", "to resume", "to redo".
	State string `json:"state"`
	Video string `json:"video,omitempty"`
	// Started and Finished are RFC 3339 times of this worker's run of it.
	Started  string `json:"started,omitempty"`
	Finished string `json:"finished,omitempty"`
}

// ShardStatus is a shard's status file, shards/shard-I-of-N.json.
type ShardStatus struct {
	Shard    string       `json:"shard"` // I/N
	Host     string       `json:"host,omitempty"`
	Started  string       `json:"started"`
	Updated  string       `json:"updated"`
	Complete bool         `json:"complete"`
	Entries  []BatchEntry `json:"entries"`
}

// BatchDir is the run folder of prompt i of a list in dir.
func BatchDir(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("%05d", i)) }

// SameListInputs compares the input files of two workers of a list by
// role and content, and names the first that differs.
func SameListInputs(have, now []FileFingerprint) error {
	for k := range max(len(have), len(now)) {
		switch {
		case k >= len(have):
			return fmt.Errorf("this run also reads %s %s", now[k].Role, now[k].Path)
		case k >= len(now):
			return fmt.Errorf("the list also read %s %s", have[k].Role, have[k].Path)
		case have[k].Role != now[k].Role:
			return fmt.Errorf("its input %d is %s %s, this run's %s %s", k, have[k].Role, have[k].Path, now[k].Role, now[k].Path)
		case have[k].Size != now[k].Size || have[k].SHA256 != now[k].SHA256:
			return fmt.Errorf("its %s (read from %s) has %d bytes, SHA-256 %.12s…; %s has %d bytes, %.12s…",
				have[k].Role, have[k].Path, have[k].Size, have[k].SHA256, now[k].Path, now[k].Size, now[k].SHA256)
		}
	}
	return nil
}

// PromptFolderIndex parses a prompt folder's name (NNNNN).
func PromptFolderIndex(name string) (int, bool) {
	var i int
	if _, err := fmt.Sscanf(name, "%05d", &i); err != nil || fmt.Sprintf("%05d", i) != name {
		return 0, false
	}
	return i, true
}
