// Package cputime reads the CPU time the process has used, the measure the
// benchmarks report beside wall time: on a machine shared with other work,
// CPU time divided by the busy cores estimates the uncontended wall time.
package cputime

import "time"

// Process returns the user + system CPU time of the process so far, all
// threads together (0 where the platform does not report it).
func Process() time.Duration { return process() }
