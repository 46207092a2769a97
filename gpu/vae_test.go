package gpu

import (
	"testing"

	"github.com/densitykv/densitykv/compute/computetest"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestConvChunks runs the conformance cases with the convolutions' pixels
// cut into chunks of a few columns (an im2col buffer of at most 100
// values: chunks of one to 33 pixels, a last chunk shorter): the chains
// do not change, so neither do the bits.
func TestConvChunks(t *testing.T) {
	defer func(n int) { im2colElems = n }(im2colElems)
	im2colElems = 100
	b, err := NewBackend(vulkantest.Open(t))
	if err != nil {
		t.Fatal(err)
	}
	computetest.Run(t, b)
}
