package storage

import (
	"fmt"
	"strings"
	"testing"
)

// TestPaperFigures checks every storage figure printed in the paper, to the
// printed precision.
func TestPaperFigures(t *testing.T) {
	c := Paper()
	gib := func(b int64, prec int) string { return fmt.Sprintf("%.*f", prec, float64(b)/GiB) }
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"bank payload", gib(c.DensityKVBankPayload(), 2), "1.61"},
		{"bank total", gib(c.DensityKVBank(), 2), "1.67"},
		{"densitykv total", gib(c.DensityKV(), 2), "3.28"},
		{"longlive-rag 30 s", gib(c.LongLiveRAG(c.Frames(30)), 1), "32.1"},
		{"longlive-rag 60 s", gib(c.LongLiveRAG(c.Frames(60)), 1), "64.3"},
		{"longlive-rag 120 s", gib(c.LongLiveRAG(c.Frames(120)), 1), "128.5"},
		{"deep forcing", gib(c.DeepForcing(), 2), "3.76"},
		{"deep forcing metadata", gib(c.DeepForcingMeta(int64(c.CacheFrames*c.TokensPerFrame)), 2), "0.01"},
		{"frames 30 s", fmt.Sprint(c.Frames(30)), "120"},
		{"frames 120 s", fmt.Sprint(c.Frames(120)), "480"},
		{"reduction 30 s", fmt.Sprintf("%.1f", float64(c.LongLiveRAG(120))/float64(c.DensityKV())), "9.8"},
		{"reduction 60 s", fmt.Sprintf("%.1f", float64(c.LongLiveRAG(240))/float64(c.DensityKV())), "19.6"},
		{"reduction 120 s", fmt.Sprintf("%.1f", float64(c.LongLiveRAG(480))/float64(c.DensityKV())), "39.2"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %s, paper prints %s", tc.name, tc.got, tc.want)
		}
	}
	// Exact byte counts of the formulas (guards against silent changes).
	if got := c.KV(9360); got != 1725235200 {
		t.Errorf("S_KV(9360) = %d", got)
	}
	if got := c.DensityKVBank(); got != 1725235200+30*12*9360*20 {
		t.Errorf("bank = %d", got)
	}
	if got := c.BankStates(1) * int64(c.Layers*c.Heads); got != c.Bank(1) {
		t.Errorf("BankStates(1)·L·H = %d, Bank(1) = %d", got, c.Bank(1))
	}
}

func TestTable(t *testing.T) {
	rows, err := Table(Paper(), []float64{30, 60, 120})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 24 {
		t.Fatalf("%d rows, want 24", len(rows))
	}
	found := 0
	for _, r := range rows {
		if r.Policy == "densitykv" {
			found++
			want := map[float64]string{30: "9.8", 60: "19.6", 120: "39.2"}[r.Seconds]
			if got := fmt.Sprintf("%.1f", r.Reduction); got != want || fmt.Sprintf("%.2f", r.GiB()) != "3.28" {
				t.Errorf("%v s: reduction %s (want %s), %.2f GiB", r.Seconds, got, want, r.GiB())
			}
		}
		if r.Policy == "longlive-rag" && r.Reduction != 1 {
			t.Errorf("longlive-rag reduction %v", r.Reduction)
		}
	}
	if found != 3 {
		t.Fatalf("%d densitykv rows", found)
	}
	// Bounded policies do not grow with the horizon; LongLive-RAG is linear.
	if rows[2].Bytes*2-Descriptors(120, 1024)*2 != rows[10].Bytes-Descriptors(240, 1024) {
		t.Errorf("longlive-rag not linear: %d %d", rows[2].Bytes, rows[10].Bytes)
	}
	for _, bad := range [][]float64{{0}, {-30}, {30, 0}} {
		if _, err := Table(Paper(), bad); err == nil || !strings.Contains(err.Error(), "storage: table: horizon") {
			t.Errorf("horizons %v: %v", bad, err)
		}
	}
	c := Paper()
	c.Layers = 0
	if _, err := Table(c, []float64{30}); err == nil {
		t.Error("zero layers accepted")
	}
}
