package config

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/memory"
)

func resolved(t *testing.T, c Config) Config {
	t.Helper()
	r, err := c.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEstimateDefault: the paper-scale default (DensityKV, 30 layers, 60 s)
// is estimated near what it was measured to hold (about 150 MB per layer
// and 1.0 GB shared live; README, Known limits), with no archive, a
// reduced GC target and a time of the order of an hour on two cores.
func TestEstimateDefault(t *testing.T) {
	e := resolved(t, DefaultConfig()).Estimate(2)
	if e.PerLayerBytes < 130e6 || e.PerLayerBytes > 200e6 || e.SharedBytes < 0.8e9 || e.SharedBytes > 1.6e9 {
		t.Fatalf("per layer %d, shared %d", e.PerLayerBytes, e.SharedBytes)
	}
	if e.LiveBytes != 30*e.PerLayerBytes+e.SharedBytes || e.PeakBytes <= e.LiveBytes || e.GCPercent >= 100 || e.GCPercent != GCPercent(e.LiveBytes) || e.ArchiveBytes != 0 {
		t.Fatalf("%+v", e)
	}
	if e.Seconds < 20*60 || e.Seconds > 3*3600 {
		t.Fatalf("time %v s", e.Seconds)
	}
	if !strings.Contains(e.Summary(), "per layer × 30") {
		t.Fatalf("summary %q", e.Summary())
	}
}

// TestEstimateGrows: memory grows with layers, not with seconds (bounded
// policies); the unbounded policies' archives grow with seconds; more
// policies cost more.
func TestEstimateGrows(t *testing.T) {
	est := func(pols []string, layers int, secs float64) Estimate {
		c := DefaultConfig()
		c.Policies, c.Memory.Layout.Layers, c.Stream.Seconds = pols, layers, secs
		return resolved(t, c).Estimate(2)
	}
	for _, p := range memory.Names() {
		a, b := est([]string{p}, 2, 30), est([]string{p}, 4, 30)
		if b.LiveBytes <= a.LiveBytes || b.DiskBytes <= a.DiskBytes {
			t.Errorf("%s: 4 layers %d/%d vs 2 layers %d/%d", p, b.LiveBytes, b.DiskBytes, a.LiveBytes, a.DiskBytes)
		}
		long := est([]string{p}, 2, 120)
		unbounded := p == memory.NameFullHistory || p == memory.NameLongLiveRAG
		if unbounded != (long.ArchiveBytes > a.ArchiveBytes) {
			t.Errorf("%s: archive %d at 120 s, %d at 30 s", p, long.ArchiveBytes, a.ArchiveBytes)
		}
		if !unbounded && long.LiveBytes != a.LiveBytes {
			t.Errorf("%s: bounded policy's memory grows with the video: %d vs %d", p, long.LiveBytes, a.LiveBytes)
		}
	}
	one, two := est([]string{"native"}, 2, 30), est([]string{"native", "fifo"}, 2, 30)
	if two.LiveBytes <= one.LiveBytes {
		t.Error("a second policy costs nothing")
	}
}

// TestEstimateSuggestionFits: a run refused for memory suggests a layer
// count, and that many layers fit where one more does not; a run refused
// for disk suggests a length that fits. The refusal is a *FitError
// naming --force.
func TestEstimateSuggestionFits(t *testing.T) {
	layersRe := regexp.MustCompile(`--layers (\d+)`)
	for _, pols := range [][]string{{"densitykv"}, {"native", "deep-forcing"}, {"densitykv", "fifo", "longlive-rag"}} {
		for _, avail := range []int64{3 << 30, 6 << 30, 12 << 30} {
			c := DefaultConfig()
			c.Policies = pols
			r := resolved(t, c)
			e := r.Estimate(2)
			err := e.Check(r, avail, -1)
			if e.PeakBytes <= avail {
				if err != nil {
					t.Fatalf("%v in %d: fits (%d) but refused: %v", pols, avail, e.PeakBytes, err)
				}
				continue
			}
			var fe *FitError
			if errors.As(err, &fe) && strings.Contains(err.Error(), "even one layer does not fit") {
				c.Memory.Layout.Layers = 1
				if err := resolved(t, c).Estimate(2).Check(resolved(t, c), avail, -1); err == nil {
					t.Fatalf("%v: one layer fits %d, yet refused as not", pols, avail)
				}
				continue
			}
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "--first-layer") {
				t.Fatalf("%v in %d: %v", pols, avail, err)
			}
			m := layersRe.FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("%v in %d: no layer count in %q", pols, avail, err)
			}
			k, _ := strconv.Atoi(m[1])
			c.Memory.Layout.Layers = k
			if err := resolved(t, c).Estimate(2).Check(resolved(t, c), avail, -1); err != nil {
				t.Fatalf("%v: the suggested %d layers do not fit %d: %v", pols, k, avail, err)
			}
			c.Memory.Layout.Layers = k + 1
			if err := resolved(t, c).Estimate(2).Check(resolved(t, c), avail, -1); err == nil {
				t.Fatalf("%v: %d layers suggested but %d fit %d too", pols, k, k+1, avail)
			}
		}
	}
	c := DefaultConfig()
	c.Policies, c.Stream.Seconds = []string{"longlive-rag"}, 120
	r := resolved(t, c)
	e := r.Estimate(2)
	free := e.DiskBytes / 3
	err := e.Check(r, -1, free)
	m := regexp.MustCompile(`--seconds ([0-9.]+)`).FindStringSubmatch(fmtErr(err))
	if m == nil || !strings.Contains(err.Error(), "archives of longlive-rag") {
		t.Fatalf("disk refusal: %v", err)
	}
	c.Stream.Seconds, _ = strconv.ParseFloat(m[1], 64)
	r = resolved(t, c)
	if err := r.Estimate(2).Check(r, -1, free); err != nil {
		t.Fatalf("the suggested --seconds %v does not fit: %v", c.Stream.Seconds, err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 3 << 30: "3.0 GiB", 5 << 40: "5.0 TiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
