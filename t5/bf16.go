package t5

import "math"

// The weight matrices are held as bfloat16 bits (uint16: the high half of
// a float32). These are the conversions of loading and embedding; the
// products read the bits through nn.Linear[uint16] (streamed).

// widen returns the float32 value of bfloat16 bits h (exact).
func widen(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// roundBF16 rounds f to the nearest bfloat16 (ties to even), as torch's
// .to(torch.bfloat16) does; a NaN stays a (quiet) NaN, values beyond the
// largest bfloat16 round to ±Inf.
func roundBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// finiteBF16 reports whether bfloat16 bits h are a finite value.
func finiteBF16(h uint16) bool { return h&0x7f80 != 0x7f80 }
