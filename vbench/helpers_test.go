package vbench

import (
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/vbench/vbenchtest"
)

// Short names for the test inputs (package vbenchtest).
type fakeList = vbenchtest.List

var (
	writeList     = vbenchtest.WriteList
	writeFile     = vbenchtest.WriteFile
	writeJSONFile = vbenchtest.WriteJSON
)

// resultsFile writes the VBench-Long results file p of folder f, seen by
// VBench at videosPath (vbenchtest.WriteResults).
func resultsFile(t *testing.T, p, videosPath string, f *Folder, scores [nDims]float64, extra map[string]any) {
	t.Helper()
	var files []string
	for _, v := range f.Videos {
		files = append(files, v.File)
	}
	vbenchtest.WriteResults(t, p, videosPath, files, scores, extra)
}

func TestTestDimensions(t *testing.T) {
	if !slices.Equal(vbenchtest.Dimensions, DimensionNames()) {
		t.Errorf("vbenchtest.Dimensions %s, want %s", strings.Join(vbenchtest.Dimensions, ", "), strings.Join(DimensionNames(), ", "))
	}
}
