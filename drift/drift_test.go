package drift

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// solid returns t frames h×w of one colour.
func solid(t, h, w int, r, g, b byte) []byte {
	out := make([]byte, t*h*w*3)
	for i := 0; i < len(out); i += 3 {
		out[i], out[i+1], out[i+2] = r, g, b
	}
	return out
}

func val(t *testing.T, name string, p *float64) float64 {
	t.Helper()
	if p == nil {
		t.Fatalf("%s absent", name)
	}
	return *p
}

func TestIdenticalBlocksNoChange(t *testing.T) {
	var s State
	lat := []float32{3, 4}
	for b := 0; b < 3; b++ {
		r, err := s.Next(b, lat, solid(4, 8, 8, 10, 200, 30), 4, 8, 8)
		if err != nil {
			t.Fatal(err)
		}
		if val(t, "first_diff", r.FirstDiff) != 0 || val(t, "hist_dist", r.HistDist) != 0 || val(t, "intra_change", r.IntraChange) != 0 {
			t.Fatalf("block %d: %+v", b, r)
		}
		if r.LatentRMS != math.Sqrt(12.5) || val(t, "latent_rms_ratio", r.LatentRMSRatio) != 1 {
			t.Fatalf("block %d latents: %+v", b, r)
		}
		if b == 0 {
			if r.SeamChange != nil || r.SeamFlicker != nil {
				t.Fatalf("block 0 has seam statistics: %+v", r)
			}
			continue
		}
		if val(t, "seam_change", r.SeamChange) != 0 || val(t, "seam_flicker", r.SeamFlicker) != 0 {
			t.Fatalf("block %d: %+v", b, r)
		}
	}
}

func TestColourShift(t *testing.T) {
	var s State
	if _, err := s.Next(0, []float32{3, 4}, solid(2, 4, 6, 10, 10, 10), 2, 4, 6); err != nil {
		t.Fatal(err)
	}
	// 10 → 74: 64 levels, from bin 1 to bin 9 in every channel.
	r, err := s.Next(1, []float32{6, 8}, solid(2, 4, 6, 74, 74, 74), 2, 4, 6)
	if err != nil {
		t.Fatal(err)
	}
	if got := val(t, "hist_dist", r.HistDist); got != 1 {
		t.Errorf("hist_dist %v, want 1", got)
	}
	if got := val(t, "first_diff", r.FirstDiff); got != 64 {
		t.Errorf("first_diff %v, want 64", got)
	}
	if got := val(t, "seam_change", r.SeamChange); got != 64 {
		t.Errorf("seam_change %v, want 64", got)
	}
	if got := val(t, "seam_flicker", r.SeamFlicker); got != 64/FlickerFloor {
		t.Errorf("seam_flicker %v, want %v", got, 64/FlickerFloor)
	}
	if got := val(t, "latent_rms_ratio", r.LatentRMSRatio); got != 2 {
		t.Errorf("latent_rms_ratio %v, want 2", got)
	}
}

func TestHalfFrameShift(t *testing.T) {
	// Half the pixels 0 and half 100; then 100 and 200: half the mass
	// moves (bins {0, 12} → {12, 25}), a distance of 0.5.
	a := append(solid(1, 2, 4, 0, 0, 0), solid(1, 2, 4, 100, 100, 100)...)
	b := append(solid(1, 2, 4, 100, 100, 100), solid(1, 2, 4, 200, 200, 200)...)
	if got := HistDistance(Histogram(a), Histogram(b)); got != 0.5 {
		t.Fatalf("hist distance %v, want 0.5", got)
	}
	// Only red moves: a third of that.
	c := solid(1, 4, 4, 0, 50, 50)
	d := solid(1, 4, 4, 255, 50, 50)
	if got := HistDistance(Histogram(c), Histogram(d)); math.Abs(got-1.0/3) > 1e-15 {
		t.Fatalf("hist distance %v, want 1/3", got)
	}
}

func TestSeamFlicker(t *testing.T) {
	// Frames ramp by 2 levels a frame inside each block; the seam jumps 20.
	block := func(base byte) []byte {
		var out []byte
		for f := 0; f < 3; f++ {
			v := base + byte(2*f)
			out = append(out, solid(1, 2, 2, v, v, v)...)
		}
		return out
	}
	var s State
	if _, err := s.Next(0, []float32{1}, block(0), 3, 2, 2); err != nil {
		t.Fatal(err)
	}
	r, err := s.Next(1, []float32{1}, block(24), 3, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if val(t, "intra_change", r.IntraChange) != 2 || val(t, "seam_change", r.SeamChange) != 20 || val(t, "seam_flicker", r.SeamFlicker) != 10 {
		t.Fatalf("%+v", r)
	}
}

func TestThumbnail(t *testing.T) {
	// 130 rows: cells of 3 (⌈130/64⌉), 44 rows of cells, the last of one
	// pixel row.
	h, w := 130, 4
	f := solid(1, h, w, 0, 0, 0)
	for x := 0; x < w; x++ {
		f[((h-1)*w+x)*3] = 255
	}
	f[0] = 1 // (1+0+0+0+0+0)/6 rounds to 0 (cells are 3×3, 4 columns → 2 cells: 3 wide and 1 wide)
	sc := 3
	th, tw := (h+sc-1)/sc, (w+sc-1)/sc
	dst := make([]byte, th*tw*3)
	thumbnail(dst, f, h, w, sc)
	if th != 44 || tw != 2 {
		t.Fatalf("thumb %d×%d", th, tw)
	}
	if dst[0] != 0 || dst[((th-1)*tw)*3] != 255 || dst[((th-1)*tw+1)*3] != 255 || dst[((th-2)*tw)*3] != 0 {
		t.Fatalf("thumbnail %v", dst)
	}
}

func records(t *testing.T, s *State, from, to int) []byte {
	t.Helper()
	var buf bytes.Buffer
	for b := from; b < to; b++ {
		fr := make([]byte, 3*5*7*3)
		for i := range fr {
			fr[i] = byte((i*7 + b*13 + i*i*b) % 256)
		}
		lat := []float32{float32(b) + 1, -2, float32(b * b)}
		r, err := s.Next(b, lat, fr, 3, 5, 7)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(r)
		buf.Write(append(line, '\n'))
	}
	return buf.Bytes()
}

func TestResumeSameRecords(t *testing.T) {
	var whole State
	want := records(t, &whole, 0, 6)
	var first State
	got := records(t, &first, 0, 3)
	js, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	var resumed State
	if err := json.Unmarshal(js, &resumed); err != nil {
		t.Fatal(err)
	}
	got = append(got, records(t, &resumed, 3, 6)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("resumed records differ:\n%s\nwant\n%s", got, want)
	}
	var again State
	if again := records(t, &again, 0, 6); !bytes.Equal(again, want) {
		t.Fatal("two runs differ")
	}
}

func TestLatentsOnly(t *testing.T) {
	var s State
	r, err := s.Next(0, []float32{1, 1}, nil, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(r)
	if string(js) != `{"block":0,"latent_rms":1,"latent_rms_ratio":1}` {
		t.Fatalf("latents-only record %s", js)
	}
	if _, err := s.Next(1, []float32{1}, solid(1, 2, 2, 0, 0, 0), 1, 2, 2); err == nil || !strings.Contains(err.Error(), "has frames and the first block has no") {
		t.Fatalf("frames after a latents-only block: %v", err)
	}
}

func TestNextRefusesBadInput(t *testing.T) {
	var s State
	if _, err := s.Next(0, []float32{1}, solid(2, 2, 2, 1, 1, 1), 2, 2, 2); err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(s)
	for _, tc := range []struct {
		name      string
		b         int
		lat       []float32
		fr        []byte
		t, h, w   int
		wantError string
	}{
		{"order", 2, []float32{1}, solid(2, 2, 2, 1, 1, 1), 2, 2, 2, "want block 1"},
		{"nan", 1, []float32{1, float32(math.NaN())}, solid(2, 2, 2, 1, 1, 1), 2, 2, 2, "latent 1 is NaN"},
		{"no latents", 1, nil, solid(2, 2, 2, 1, 1, 1), 2, 2, 2, "no latents"},
		{"size", 1, []float32{1}, solid(2, 2, 2, 1, 1, 1), 3, 2, 2, "bytes of frames"},
		{"frame size", 1, []float32{1}, solid(2, 2, 1, 1, 1, 1), 2, 2, 1, "the first block's 2×2"},
		{"no frames", 1, []float32{1}, nil, 0, 0, 0, "has no frames and the first block has"},
	} {
		_, err := s.Next(tc.b, tc.lat, tc.fr, tc.t, tc.h, tc.w)
		if err == nil || !strings.Contains(err.Error(), tc.wantError) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantError)
		}
		if after, _ := json.Marshal(s); !bytes.Equal(after, before) {
			t.Errorf("%s: the state changed", tc.name)
		}
	}
}

func TestParseRules(t *testing.T) {
	rs, err := ParseRules(" seam_flicker>3, hist_dist<0.25 ", "--stop-on-drift")
	if err != nil {
		t.Fatal(err)
	}
	if FormatRules(rs) != "seam_flicker>3,hist_dist<0.25" {
		t.Fatalf("rules %v", rs)
	}
	hi, lo := 4.0, 0.2
	if r, ok := Tripped(rs, Record{SeamFlicker: &hi}); !ok || r.Stat != "seam_flicker" {
		t.Fatal("seam_flicker 4 does not trip >3")
	}
	if _, ok := Tripped(rs, Record{HistDist: &lo}); !ok {
		t.Fatal("hist_dist 0.2 does not trip <0.25")
	}
	if _, ok := Tripped(rs, Record{LatentRMS: 100}); ok {
		t.Fatal("a record without the statistics trips")
	}
	if rs, err := ParseRules("", "x"); err != nil || rs != nil {
		t.Fatal("empty rules", rs, err)
	}
	for in, want := range map[string]string{
		"seam_flicker":            "want STAT>VALUE",
		"flicker>3":               `unknown statistic "flicker"`,
		"seam_flicker>":           "not a finite number",
		"seam_flicker>NaN":        "not a finite number",
		"seam_flicker>inf":        "not a finite number",
		"seam_flicker>3x":         "not a finite number",
		"hist_dist>1,":            "want STAT>VALUE",
		"hist_dist>1,hist_dist>1": "given twice",
	} {
		if _, err := ParseRules(in, "--stop-on-drift"); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--stop-on-drift") {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

func TestSummarize(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	recs := []Record{
		{Block: 0, LatentRMS: 1},
		{Block: 1, LatentRMS: 3, SeamFlicker: f(5)},
		{Block: 2, LatentRMS: 2, SeamFlicker: f(1)},
		{Block: 3, LatentRMS: 3, SeamFlicker: f(4)},
	}
	rs, _ := ParseRules("seam_flicker>3,latent_rms>10", "x")
	s := Summarize(recs, rs)
	lr := s.Stats["latent_rms"]
	if lr.Blocks != 4 || lr.Median != 2.5 || lr.Max != 3 || lr.MaxBlock != 1 || lr.Last != 3 {
		t.Errorf("latent_rms %+v", lr)
	}
	sf := s.Stats["seam_flicker"]
	if sf.Blocks != 3 || sf.Median != 4 || sf.Max != 5 || sf.MaxBlock != 1 {
		t.Errorf("seam_flicker %+v", sf)
	}
	if _, ok := s.Stats["hist_dist"]; ok {
		t.Error("hist_dist summarised without values")
	}
	if len(s.FirstOver) != 1 || s.FirstOver["seam_flicker>3"] != 1 {
		t.Errorf("first over %v", s.FirstOver)
	}
}

func TestReadFileAndFigure(t *testing.T) {
	dir := t.TempDir()
	var s State
	recs := records(t, &s, 0, 4)
	path := filepath.Join(dir, File)
	if err := os.WriteFile(path, recs, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil || len(got) != 4 || got[3].SeamFlicker == nil {
		t.Fatalf("read %d records: %v", len(got), err)
	}
	torn := append(append([]byte(nil), recs...), `{"block":4,"lat`...)
	os.WriteFile(path, torn, 0o644)
	if got, err := ReadFile(path); !errors.Is(err, ErrTorn) || len(got) != 4 {
		t.Fatalf("torn: %d records, %v", len(got), err)
	}
	os.WriteFile(path, []byte(`{"block":1,"latent_rms":1}`+"\n"), 0o644)
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), "want block 0") {
		t.Fatalf("out of order: %v", err)
	}
	fig, err := Figure("drift", got)
	if err != nil {
		t.Fatal(err)
	}
	files, err := fig.Save(filepath.Join(dir, "drift"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := Figure("drift", nil); err == nil {
		t.Fatal("a figure of no records")
	}
}
