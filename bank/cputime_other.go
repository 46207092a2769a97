//go:build !unix

package bank

import "time"

// processCPU is unavailable on this platform.
func processCPU() time.Duration { return 0 }
