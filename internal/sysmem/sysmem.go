// Package sysmem reports what the machine can give a run: memory (the
// kernel's MemAvailable, capped by the process's cgroup limit) and the
// free space of a folder's filesystem. Each value is −1 when it cannot be
// read (a system without /proc, an unknown filesystem).
package sysmem

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory is what the machine reports about its memory, in bytes.
type Memory struct {
	Total     int64 // MemTotal
	Available int64 // MemAvailable, or what the cgroup limit leaves if less
	// CgroupLimit is the process's cgroup memory limit (−1: none or
	// unknown) and CgroupUsage the cgroup's current usage.
	CgroupLimit, CgroupUsage int64
}

// Read reads /proc/meminfo and the process's cgroup (v2, else v1).
func Read() Memory {
	m := Memory{Total: -1, Available: -1, CgroupLimit: -1, CgroupUsage: -1}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 2 {
				continue
			}
			kb, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				continue
			}
			switch fs[0] {
			case "MemTotal:":
				m.Total = kb << 10
			case "MemAvailable:":
				m.Available = kb << 10
			}
		}
		f.Close()
	}
	m.CgroupLimit, m.CgroupUsage = cgroup()
	if m.CgroupLimit > 0 && m.CgroupUsage >= 0 {
		if left := max(m.CgroupLimit-m.CgroupUsage, 0); m.Available < 0 || left < m.Available {
			m.Available = left
		}
	}
	return m
}

// unlimited: cgroup limits at or above this are "no limit" (v1 writes
// 2^63 rounded down to the page size).
const unlimited = 1 << 62

// cgroup returns the memory limit and usage of the process's cgroup, or
// −1, −1.
func cgroup() (limit, usage int64) {
	paths := cgroupPaths()
	for _, c := range []struct{ root, limit, usage, key string }{
		{"/sys/fs/cgroup", "memory.max", "memory.current", ""},
		{"/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "memory"},
	} {
		// The process's own cgroup, then the mount's root (a container
		// sees its own cgroup there).
		for _, dir := range []string{filepath.Join(c.root, paths[c.key]), c.root} {
			l, err := readInt(filepath.Join(dir, c.limit))
			if err != nil {
				continue
			}
			u, err := readInt(filepath.Join(dir, c.usage))
			if err != nil {
				continue
			}
			if l >= unlimited {
				return -1, u
			}
			return l, u
		}
	}
	return -1, -1
}

// cgroupPaths maps the controllers of /proc/self/cgroup ("" for v2) to
// the process's cgroup path.
func cgroupPaths() map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return unlimited, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// FreeDisk returns the bytes available to this user on the filesystem of
// dir, or of its nearest existing parent (−1 if unknown).
func FreeDisk(dir string) int64 {
	d, err := filepath.Abs(dir)
	if err != nil {
		return -1
	}
	for {
		if _, err := os.Stat(d); err == nil {
			return freeDisk(d)
		}
		p := filepath.Dir(d)
		if p == d {
			return -1
		}
		d = p
	}
}
