package t5

import "github.com/densitykv/densitykv/internal/vmath"

// geluTanh is GELU with the tanh approximation (Wan's t5.GELU):
// 0.5·u·(1 + tanh(√(2/π)·(u + 0.044715·u³))), evaluated as
// u / (1 + e^(−2z)), which is the same function (the exponential is
// vmath.Exp32Cephes).
func geluTanh(u float32) float32 {
	const c = 0.7978845608028654 // √(2/π)
	z := c * (u + float32(0.044715*u*u*u))
	return u / (1 + vmath.Exp32Cephes(-2*z))
}
