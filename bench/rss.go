package bench

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/densitykv/densitykv/t5"
)

// The resident memory that `densitykv bench vae`, `bench text` (RunVAE,
// RunText) and `bench pipeline` (RunPipeline) report: the process's
// resident set (RSS, from /proc/self/status on Linux: what the machine has
// to hold), sampled while each stage runs.

// RSS returns the process's resident and peak resident bytes (Linux; 0
// elsewhere).
func RSS() (rss, peak int64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) != 2 || fs[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(fs[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return rss, peak
}

// rssSampler records the peak RSS while a stage runs.
type rssSampler struct {
	peak atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func startRSS() *rssSampler {
	s := &rssSampler{stop: make(chan struct{})}
	sample := func() {
		if r, _ := RSS(); r > s.peak.Load() {
			s.peak.Store(r)
		}
	}
	sample()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return s
}

// done stops the sampler (once) and returns the peak.
func (s *rssSampler) done() int64 {
	s.once.Do(func() { close(s.stop); s.wg.Wait() })
	return s.peak.Load()
}

// release hands freed memory back to the operating system.
func release() {
	runtime.GC()
	debug.FreeOSMemory()
}

// embedBytes is the bf16 token embedding of c.
func embedBytes(c t5.Config) int64 { return 2 * int64(c.Vocab) * int64(c.Dim) }
