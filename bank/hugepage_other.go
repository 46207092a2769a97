//go:build !linux

package bank

// adviseHuge is a no-op off Linux (see hugepage_linux.go).
func adviseHuge(x []float32) int { return 0 }
