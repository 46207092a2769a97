// Package finite checks float32 data for NaN and ±Inf, the test the model
// and the memory policies apply to their inputs.
package finite

import "math"

// First returns the index of the first NaN or ±Inf in x, or −1.
func First(x []float32) int {
	for i, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 { // exponent all ones
			return i
		}
	}
	return -1
}
