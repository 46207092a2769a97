package main

import (
	"bufio"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// tuneGC sets the garbage collector's target (GOGC) to percent for a run
// whose estimated live heap is large (config.GCPercent: about 1 GiB of
// headroom instead of Go's default 100 %), unless GOGC is set.
func tuneGC(percent int) {
	if os.Getenv("GOGC") != "" || percent <= 0 {
		return
	}
	debug.SetGCPercent(percent)
}

// setMemoryLimit makes the garbage collector work harder as the heap nears
// 3/4 of the machine's memory (paper-scale runs hold many GiB of K/V), unless
// GOMEMLIMIT is set. It is a soft limit: nothing fails when it is exceeded.
func setMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if total := totalMemory(); total > 0 {
		debug.SetMemoryLimit(total / 4 * 3)
	}
}

// totalMemory returns MemTotal from /proc/meminfo in bytes (0 if unknown).
func totalMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
