package rollout

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/internal/torchtest"
)

// noiseLayout is a small layout with a shorter first block (block 0 makes
// one draw, the others two).
var noiseLayout = NoiseLayout{Blocks: 3, FramesPerBlock: 2, Channels: 2, Height: 2, Width: 3, Draws: 2, FirstDraws: 1}

// TestNoiseFileReplaysSeeded: a file SaveNoise wrote from a seed gives
// every draw the seed gives, in any order (a resumed rollout starts at a
// later block; a list of prompts goes back to block 0), and zeros where a
// block makes fewer draws; NewNoiseLayout counts the draws of a schedule.
func TestNoiseFileReplaysSeeded(t *testing.T) {
	l := noiseLayout
	src := Seeded{Seed: 7, StepsPerBlock: l.Draws}
	p := filepath.Join(t.TempDir(), "n.safetensors")
	if err := SaveNoise(p, src, l, "seed 7"); err != nil {
		t.Fatal(err)
	}
	n, err := OpenNoise(p, l)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.Frames != 6 || n.Blocks != 3 {
		t.Fatalf("file of %d frames, %d blocks", n.Frames, n.Blocks)
	}
	fs, bs := l.frameSize(), l.FramesPerBlock*l.frameSize()
	got, want := make([]float32, bs), make([]float32, bs)
	for _, f := range []int{4, 5, 0, 3, 1, 2} {
		n.Initial(f, got[:fs])
		src.Initial(f, want[:fs])
		if !slices.Equal(got[:fs], want[:fs]) || want[0] == 0 {
			t.Fatalf("initial frame %d: %v, want %v", f, got[:fs], want[:fs])
		}
	}
	for _, d := range [][2]int{{2, 1}, {1, 0}, {0, 0}, {2, 0}, {1, 1}} {
		if err := n.Renoise(d[0], d[1], got); err != nil {
			t.Fatal(err)
		}
		src.Renoise(d[0], d[1], want)
		if !slices.Equal(got, want) {
			t.Fatalf("renoise block %d step %d differs", d[0], d[1])
		}
	}
	if err := n.Renoise(0, 1, got); err == nil {
		t.Fatal("block 0's second draw, which the run does not make, was served")
	}
	if err := n.Initial(6, got[:fs]); err == nil {
		t.Fatal("frame 6 of a 6-frame file was served")
	}
	s, err := checkpoint.OpenSafetensors(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, shape, err := s.Float32(NoiseRenoise)
	if err != nil || !slices.Equal(shape, []int{3, 2, 2, 2, 2, 3}) || s.Metadata["source"] != "seed 7" || s.Metadata["format"] != NoiseFormat {
		t.Fatalf("renoise %v, metadata %v: %v", shape, s.Metadata, err)
	}
	for _, v := range r[bs : 2*bs] { // block 0, step 1: not drawn
		if v != 0 {
			t.Fatal("block 0's unused draw is not zero")
		}
	}
	sch, _ := NewSchedule(DefaultSteps, 5, 1000)
	first, _ := NewSchedule([]int{1000, 500}, 5, 1000)
	if l := NewNoiseLayout(2, 3, 16, 4, 4, sch, first, UpdateX0Renoise); l.Draws != 3 || l.FirstDraws != 1 {
		t.Errorf("layout %+v, want 3 draws, 1 in block 0", l)
	}
	if l := NewNoiseLayout(2, 3, 16, 4, 4, sch, nil, UpdateFlowEuler); l.Draws != 0 || l.FirstDraws != 0 {
		t.Errorf("flow_euler layout %+v, want no draws", l)
	}
}

// seededValues returns the draws of src in the file layout of l: initial
// [frames][C][H][W] and renoise [blocks][draws][F][C][H][W] (zeros for a
// draw a block does not make).
func seededValues(src Noise, l NoiseLayout) (ini, ren []float32) {
	fs, bs := l.frameSize(), l.FramesPerBlock*l.frameSize()
	ini = make([]float32, l.Blocks*l.FramesPerBlock*fs)
	for f := 0; f < l.Blocks*l.FramesPerBlock; f++ {
		src.Initial(f, ini[f*fs:(f+1)*fs])
	}
	ren = make([]float32, l.Blocks*l.Draws*bs)
	for b := 0; b < l.Blocks; b++ {
		for s := 0; s < l.drawsOf(b); s++ {
			k := b*l.Draws + s
			src.Renoise(b, s, ren[k*bs:(k+1)*bs])
		}
	}
	return ini, ren
}

// TestNoiseFileTorch: the authors' side writes the file with torch.save —
// initial with its batch of 1 ([1, frames, C, H, W]), more frames and
// blocks than the run needs — and it is read as the safetensors file.
func TestNoiseFileTorch(t *testing.T) {
	l := noiseLayout
	src := Seeded{Seed: 3, StepsPerBlock: l.Draws}
	big := l
	big.Blocks = 4
	ini, ren := seededValues(src, big)
	p := filepath.Join(t.TempDir(), "noise.pt")
	b := torchtest.Bytes(torchtest.Dict{
		{Key: NoiseInitial, Value: &torchtest.Tensor{Shape: []int{1, 8, 2, 2, 3}, Data: ini}},
		{Key: NoiseRenoise, Value: &torchtest.Tensor{Shape: []int{4, 2, 2, 2, 2, 3}, Data: ren}},
	}, torchtest.Options{})
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := OpenNoise(p, l)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	want, _ := seededValues(src, l)
	got, _ := seededValues(n, l)
	if !slices.Equal(got, want) {
		t.Fatal("the .pt file's initial noise differs from the seed's")
	}
	bs := l.FramesPerBlock * l.frameSize()
	g, w := make([]float32, bs), make([]float32, bs)
	for _, d := range [][2]int{{1, 1}, {0, 0}, {2, 1}} {
		n.Renoise(d[0], d[1], g)
		src.Renoise(d[0], d[1], w)
		if !slices.Equal(g, w) {
			t.Fatalf("the .pt file's renoise block %d step %d differs from the seed's", d[0], d[1])
		}
	}
}

// TestNoiseFileRefusals: a file that does not fit the run, or holds a
// value that is not finite, is refused before any draw is used, with a
// message naming the file and the problem.
func TestNoiseFileRefusals(t *testing.T) {
	l := noiseLayout
	dir := t.TempDir()
	ini, ren := seededValues(Seeded{Seed: 1, StepsPerBlock: l.Draws}, l)
	write := func(name string, ts []checkpoint.WriteTensor, meta map[string]string) string {
		p := filepath.Join(dir, name)
		if err := checkpoint.WriteSafetensorsFile(p, ts, meta); err != nil {
			t.Fatal(err)
		}
		return p
	}
	iniT := func(shape ...int) checkpoint.WriteTensor {
		return checkpoint.WriteTensor{Name: NoiseInitial, Shape: shape, Data: ini[:prod(shape)]}
	}
	renT := func(shape ...int) checkpoint.WriteTensor {
		return checkpoint.WriteTensor{Name: NoiseRenoise, Shape: shape, Data: ren[:prod(shape)]}
	}
	nan := slices.Clone(ini)
	nan[2*l.frameSize()+5] = float32(math.NaN())
	inf := slices.Clone(ren)
	inf[len(inf)-1] = float32(math.Inf(-1))
	for _, c := range []struct {
		name string
		ts   []checkpoint.WriteTensor
		meta map[string]string
		want string
	}{
		{"ok", []checkpoint.WriteTensor{iniT(6, 2, 2, 3), renT(3, 2, 2, 2, 2, 3)}, nil, ""},
		{"frame shape", []checkpoint.WriteTensor{iniT(3, 2, 4, 3), renT(3, 2, 2, 2, 2, 3)}, nil, "initial has shape [3 2 4 3], want [frames, 2, 2, 3]"},
		{"few frames", []checkpoint.WriteTensor{iniT(5, 2, 2, 3), renT(3, 2, 2, 2, 2, 3)}, nil, "initial holds 5 frames, the run needs 6"},
		{"few blocks", []checkpoint.WriteTensor{iniT(6, 2, 2, 3), renT(2, 2, 2, 2, 2, 3)}, nil, "renoise holds the draws of 2 blocks, the run needs 3"},
		{"few steps", []checkpoint.WriteTensor{iniT(6, 2, 2, 3), renT(3, 1, 2, 2, 2, 3)}, nil, "2 draws per block"},
		{"block length", []checkpoint.WriteTensor{iniT(6, 2, 2, 3), renT(3, 2, 1, 2, 2, 3)}, nil, "of 2 frames"},
		{"no renoise", []checkpoint.WriteTensor{iniT(6, 2, 2, 3)}, nil, "no renoise tensor"},
		{"no initial", []checkpoint.WriteTensor{renT(3, 2, 2, 2, 2, 3)}, nil, "no initial tensor"},
		{"other tensor", []checkpoint.WriteTensor{iniT(6, 2, 2, 3), renT(3, 2, 2, 2, 2, 3), {Name: "noise", Shape: []int{1}, Data: []float32{0}}}, nil, `tensor "noise" is not one of initial, renoise`},
		{"integers", []checkpoint.WriteTensor{{Name: NoiseInitial, Shape: []int{6, 2, 2, 3}, Data: make([]int32, 72)}}, nil, "dtype I32"},
		{"NaN", []checkpoint.WriteTensor{{Name: NoiseInitial, Shape: []int{6, 2, 2, 3}, Data: nan}, renT(3, 2, 2, 2, 2, 3)}, nil, "initial holds NaN at frame 2"},
		{"Inf", []checkpoint.WriteTensor{iniT(6, 2, 2, 3), {Name: NoiseRenoise, Shape: []int{3, 2, 2, 2, 2, 3}, Data: inf}}, nil, "renoise holds -Inf at block 2"},
		{"format", []checkpoint.WriteTensor{iniT(6, 2, 2, 3), renT(3, 2, 2, 2, 2, 3)}, map[string]string{"format": "other"}, `format "other"`},
	} {
		p := write(c.name+".safetensors", c.ts, c.meta)
		n, err := OpenNoise(p, l)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else {
				n.Close()
			}
			continue
		}
		if err == nil {
			n.Close()
			t.Errorf("%s: accepted", c.name)
		} else if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want %q and the file", c.name, err, c.want)
		}
	}
	// flow_euler makes no draws: the initial noise alone serves.
	fe := l
	fe.Draws, fe.FirstDraws = 0, 0
	if n, err := OpenNoise(write("initial.safetensors", []checkpoint.WriteTensor{iniT(6, 2, 2, 3)}, nil), fe); err != nil {
		t.Errorf("initial noise alone for a flow_euler run: %v", err)
	} else {
		n.Close()
	}
	if _, err := OpenNoise(filepath.Join(dir, "none.pt"), l); err == nil || !strings.Contains(err.Error(), "none.pt") {
		t.Errorf("missing file: %v", err)
	}
}

func prod(s []int) int {
	n := 1
	for _, v := range s {
		n *= v
	}
	return n
}
