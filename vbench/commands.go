package vbench

import (
	"fmt"
	"path/filepath"
	"strings"
)

// EvalScript is VBench-Long's evaluation script, run from a checkout of
// Vchitect/VBench.
const EvalScript = "vbench2_beta_long/eval_long.py"

// vbenchCommand is the VBench-Long command for one exported folder:
// VBench-Long's custom-input evaluation (vbench2_beta_long/README.md,
// "Evaluation on Your Own Videos": --mode long_custom_input --dev_flag)
// of the six dimensions, its results into a folder of their own.
func vbenchCommand(videos, results string) string {
	return fmt.Sprintf("python %s --videos_path %s --dimension %s --mode long_custom_input --dev_flag --output_path %s",
		EvalScript, videos, strings.Join(DimensionNames(), " "), results)
}

// commandsScript is vbench.sh: every folder's command, the export and
// results folders found from the script's place.
func commandsScript(m *Manifest) string {
	var b strings.Builder
	b.WriteString(`#!/usr/bin/env bash
# VBench-Long evaluation of a densitykv vbench export: the six dimensions of
# the paper's protocol (LongLive-RAG's VBench-Long reporting) for every
# exported folder, each into its own results folder.
#
# Run it from a checkout of github.com/Vchitect/VBench, in VBench's Python
# environment, on a machine with a GPU:
#
#   cd VBench && bash /path/to/export/vbench.sh [RESULTS_DIR]
#
# RESULTS_DIR defaults to results/ inside the export. VBench-Long writes its
# 2 s clips (split_clip/) and first-frame videos into each videos folder.
# Then: densitykv vbench table --manifest /path/to/export RESULTS_DIR
set -euo pipefail
EXPORT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RESULTS="${1:-$EXPORT/results}"
if [ ! -f ` + EvalScript + ` ]; then
  echo "vbench.sh: run it from a checkout of Vchitect/VBench (no ` + EvalScript + ` here)" >&2
  exit 2
fi
`)
	for _, f := range m.Folders {
		fmt.Fprintf(&b, "\n# %s on %s, %s, %g s: %d videos\n", methodText(m, f.Method), f.Backbone, f.Suite, f.Horizon, len(f.Videos))
		fmt.Fprintf(&b, "mkdir -p \"$RESULTS/%s\"\n", f.Dir)
		b.WriteString(vbenchCommand(`"$EXPORT/`+f.Dir+`"`, `"$RESULTS/`+f.Dir+`"`) + "\n")
	}
	return b.String()
}

func methodText(m *Manifest, id string) string {
	if x := m.method(id); x != nil {
		return x.Label
	}
	return id
}

// exampleCommand is the first folder's command with the export's path.
func exampleCommand(out string, m *Manifest) string {
	if len(m.Folders) == 0 {
		return ""
	}
	d := m.Folders[0].Dir
	return vbenchCommand(shellQuote(filepath.Join(out, filepath.FromSlash(d))), shellQuote(filepath.Join(out, "results", filepath.FromSlash(d))))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
