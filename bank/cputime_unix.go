//go:build unix

package bank

import (
	"syscall"
	"time"
)

// processCPU returns the user+system CPU time of the process so far (0 if
// unavailable).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
