package attn

import (
	"testing"

	"github.com/densitykv/densitykv/internal/asmtext"
)

// TestGeneratedAssemblyUpToDate regenerates softmax_amd64.s with gen_softmax.go and requires
// the checked-in file to match it (edit the generator, then run go generate
// ./attn).
func TestGeneratedAssemblyUpToDate(t *testing.T) {
	asmtext.CheckGenerated(t, "gen_softmax.go", "softmax_amd64.s")
}
