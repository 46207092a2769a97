package main

import (
	"bufio"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// tuneGC sets the garbage collector for a run from its estimate
// (config.Estimate): the target GOGC = percent (config.GCPercent: about
// 1 GiB of headroom instead of Go's default 100 % for large runs), unless
// GOGC is set, and the soft memory limit lowered to the estimated peak,
// unless GOMEMLIMIT is set, so that the runtime returns freed memory to
// the system instead of keeping it (without it the resident set of a
// paper-scale run stays about 1.3× its live heap). The limit is soft:
// a run that needs more is slowed by extra collections, not stopped.
func tuneGC(percent int, peak int64) {
	if os.Getenv("GOGC") == "" && percent > 0 {
		debug.SetGCPercent(percent)
	}
	if os.Getenv("GOMEMLIMIT") == "" && peak > 0 {
		if cur := debug.SetMemoryLimit(-1); peak < cur {
			debug.SetMemoryLimit(max(peak, 256<<20))
		}
	}
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
