package riesz

import (
	"testing"

	"github.com/densitykv/densitykv/internal/asmtext"
)

// TestGeneratedAssemblyUpToDate regenerates epilogue_amd64.s with gen_epilogue.go and requires
// the checked-in file to match it (edit the generator, then run go generate
// ./riesz).
func TestGeneratedAssemblyUpToDate(t *testing.T) {
	asmtext.CheckGenerated(t, "gen_epilogue.go", "epilogue_amd64.s")
}
