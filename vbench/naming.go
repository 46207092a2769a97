package vbench

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Dimension is one VBench dimension of the paper's protocol.
type Dimension struct {
	Name  string // VBench's name (--dimension, the results' key)
	Label string // the paper's column header
}

// Dimensions are the six dimensions of the paper's tables, in its column
// order (all higher-is-better).
var Dimensions = []Dimension{
	{"subject_consistency", "Subject"},
	{"background_consistency", "Background"},
	{"motion_smoothness", "Smoothness"},
	{"dynamic_degree", "Dynamic"},
	{"aesthetic_quality", "Aesthetic"},
	{"imaging_quality", "Imaging"},
}

// DimensionNames are Dimensions' VBench names.
func DimensionNames() []string {
	out := make([]string, len(Dimensions))
	for i, d := range Dimensions {
		out[i] = d.Name
	}
	return out
}

func dimensionIndex(name string) int {
	for i, d := range Dimensions {
		if d.Name == name {
			return i
		}
	}
	return -1
}

// MaxPromptChars is how much of a prompt a VBench file name keeps: its
// first 180 characters (VBench-2.0's prompt[:180]).
const MaxPromptChars = 180

// maxStemBytes bounds a video's name without ".mp4" so that VBench-Long's
// clip names, {stem}_{NNN}.mp4, fit a file name (255 bytes).
const maxStemBytes = 255 - len("_000.mp4")

// promptName is the prompt part of a video's file name: the prompt
// without surrounding white space; "/", "\" and "_" (which VBench-Long
// reads as the end of a video's name in a clip's name) and control
// characters as spaces; ".mp4" (where VBench-Long's clip splitter ends a
// video's name) as " mp4"; cut to MaxPromptChars characters and to the
// bytes a clip name leaves (room for the "-{index}" suffix of up to
// indexDigits digits). An empty result is "prompt".
func promptName(prompt string, indexDigits int) string {
	s := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == '_' || unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, strings.TrimSpace(prompt))
	s = strings.ReplaceAll(s, ".mp4", " mp4")
	if utf8.RuneCountInString(s) > MaxPromptChars {
		s = string([]rune(s)[:MaxPromptChars])
	}
	for budget := maxStemBytes - 1 - indexDigits; len(s) > budget; {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	if strings.TrimSpace(s) == "" {
		return "prompt"
	}
	return s
}

// namer gives the videos of one folder their file names, in the order
// they are asked for: {promptName}-{k}.mp4, k the number of earlier videos
// of the folder with the same name (compared without case, for file
// systems that ignore it).
type namer struct{ seen map[string]int }

func (n *namer) name(prompt string) string {
	if n.seen == nil {
		n.seen = map[string]int{}
	}
	// Room for up to 6 index digits (a folder holds at most a prompts
	// file's lines; equal names are rare).
	p := promptName(prompt, 6)
	key := strings.ToLower(p)
	k := n.seen[key]
	n.seen[key] = k + 1
	return p + "-" + strconv.Itoa(k) + ".mp4"
}

// PromptFromName is the prompt VBench recovers from a video's file name
// (vbench/utils.py get_prompt_from_filename): the name without its
// extension and without a final "-{digits}".
func PromptFromName(file string) string {
	stem := file
	if i := strings.LastIndexByte(stem, '.'); i > 0 {
		stem = stem[:i]
	}
	i := strings.LastIndexByte(stem, '-')
	if i < 0 || i == len(stem)-1 {
		return stem
	}
	for _, c := range stem[i+1:] {
		if c < '0' || c > '9' {
			return stem
		}
	}
	return stem[:i]
}
