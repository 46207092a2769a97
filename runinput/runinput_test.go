package runinput

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/ragae/aetest"
	"github.com/densitykv/densitykv/record"
	"github.com/densitykv/densitykv/synth"
)

// smallSynth is a small synthetic stream of layout l.
func smallSynth(l memory.Layout, blocks int) synth.Config {
	sc := synth.DefaultConfig()
	sc.Layout, sc.Blocks = l, blocks
	return sc
}

// writeStream records the synthetic stream sc into a file with the
// attention budget b in its header.
func writeStream(t *testing.T, sc synth.Config, b *record.Budget) string {
	t.Helper()
	g, err := synth.NewGenerator(sc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.dkvs")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := record.NewWriter(f, record.Header{Layout: sc.Layout, DType: record.Float32, Blocks: sc.Blocks, Memory: b})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.Copy(w, g); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// A recorded stream's header sets the replay's layout and budget; config
// itself reads no file (a missing stream file is not its error), Resolve
// reads the header, and OpenStream replays the recorded values.
func TestRecordedStreamInputs(t *testing.T) {
	l := memory.Layout{Height: 4, Width: 6, FramesPerBlock: 3, Layers: 2, Heads: 2, HeadDim: 16}
	sc := smallSynth(l, 4)
	path := writeStream(t, sc, &record.Budget{SinkFrames: 1, CacheFrames: 12, WindowFrames: 6, Capacity: 24})

	base := config.DemoConfig()
	base.Stream.Kind, base.Stream.Path = "file", path
	c, err := StreamDefaults(base, path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Memory.Layout != l || c.Memory.Capacity != 24 || c.Memory.WindowFrames != 6 {
		t.Fatalf("stream defaults: layout %+v, capacity %d, window %d", c.Memory.Layout, c.Memory.Capacity, c.Memory.WindowFrames)
	}

	// The file's layout replaces the configuration's.
	c.Memory.Layout.Heads = 3
	r, err := Resolve(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Memory.Layout != l {
		t.Fatalf("resolved layout %+v, want the file's %+v", r.Memory.Layout, l)
	}
	missing := c
	missing.Stream.Path = filepath.Join(t.TempDir(), "none.dkvs")
	if _, err := missing.Resolve(); err != nil {
		t.Fatalf("config.Resolve read the stream file: %v", err)
	}
	if _, err := Resolve(missing); err == nil || !strings.Contains(err.Error(), "stream.path (--stream-file) "+missing.Stream.Path) {
		t.Fatalf("missing stream file: %v", err)
	}
	if _, err := StreamDefaults(base, missing.Stream.Path); err == nil || !strings.Contains(err.Error(), "none.dkvs") {
		t.Fatalf("stream defaults of a missing file: %v", err)
	}

	s, err := OpenStream(r)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := synth.NewGenerator(sc)
	if err != nil {
		t.Fatal(err)
	}
	if s.Blocks() != 4 || s.Layout() != l {
		t.Fatalf("opened stream: %d blocks, layout %+v", s.Blocks(), s.Layout())
	}
	if _, err := s.NextBlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.NextBlock(); err != nil {
		t.Fatal(err)
	}
	_, k, _, err := s.Layer(1)
	if err != nil {
		t.Fatal(err)
	}
	_, want, _, _ := g.Layer(1)
	if !bitsEqual(k, want) {
		t.Fatal("replayed keys differ from the recorded stream's")
	}

	// A layout that is not the file's is refused on opening.
	other := r
	other.Memory.Layout.Heads = 3
	if _, err := OpenStream(other); err == nil || !strings.Contains(err.Error(), "differs from memory.layout") {
		t.Fatalf("layout mismatch: %v", err)
	}
}

// A synthetic run from stream.first_layer sees the generator's later
// layers as its layers 0, 1, ….
func TestOpenStreamFirstLayer(t *testing.T) {
	c := config.DemoConfig()
	c.Memory.Layout = memory.Layout{Height: 4, Width: 6, FramesPerBlock: 3, Layers: 1, Heads: 2, HeadDim: 16}
	c.Stream.Seconds, c.Stream.FirstLayer = 3, 1
	r, err := c.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenStream(r)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := synth.NewGenerator(SynthConfig(r)) // layers 0 and 1
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.NextBlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.NextBlock(); err != nil {
		t.Fatal(err)
	}
	q, _, _, err := s.Layer(0)
	if err != nil {
		t.Fatal(err)
	}
	want, _, _, _ := g.Layer(1)
	if !bitsEqual(q, want) {
		t.Fatal("run layer 0 is not the stream's layer 1")
	}
	if _, _, _, err := s.Layer(1); err == nil || !strings.Contains(err.Error(), "outside the run's 1 layers") {
		t.Fatalf("layer beyond the run: %v", err)
	}
}

// CheckRAGAE reads the autoencoder: it records the descriptor size the
// file yields unless one is given, and a bad or missing file is an error
// naming --rag-ae.
func TestCheckRAGAE(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ae_latent_mem.pt")
	if err := aetest.Write(path, aetest.Config{InChannels: 16, SpatialH: 60, SpatialW: 104, LatentDim: 24, HiddenDims: []int{8, 16}}, 1); err != nil {
		t.Fatal(err)
	}
	gc := config.GenerateDefaults()
	gc.Generate.LatentHeight, gc.Generate.LatentWidth = 6, 8
	gc.Memory.LongLiveRAG.LatentChannels = 16
	if err := CheckRAGAE(&gc); err != nil || gc.Memory.LongLiveRAG.DescriptorStorageDim != 0 {
		t.Fatalf("without --rag-ae: %v, descriptor size %d", err, gc.Memory.LongLiveRAG.DescriptorStorageDim)
	}
	gc.Generate.RAGAE = path
	if err := CheckRAGAE(&gc); err != nil || gc.Memory.LongLiveRAG.DescriptorStorageDim != 24 {
		t.Fatalf("with --rag-ae: %v, descriptor size %d, want 24", err, gc.Memory.LongLiveRAG.DescriptorStorageDim)
	}
	given := gc
	given.Memory.LongLiveRAG.DescriptorStorageDim = 5
	if err := CheckRAGAE(&given); err != nil || given.Memory.LongLiveRAG.DescriptorStorageDim != 5 {
		t.Fatalf("a given descriptor size: %v, %d", err, given.Memory.LongLiveRAG.DescriptorStorageDim)
	}
	wrong := gc
	wrong.Memory.LongLiveRAG.LatentChannels = 4
	if err := CheckRAGAE(&wrong); err == nil || !strings.HasPrefix(err.Error(), "--rag-ae: ") || !strings.Contains(err.Error(), "latent channels") {
		t.Fatalf("latent channels the autoencoder does not read: %v", err)
	}
	missing := gc
	missing.Generate.RAGAE = filepath.Join(dir, "none.pt")
	if err := CheckRAGAE(&missing); err == nil || !strings.Contains(err.Error(), "none.pt") {
		t.Fatalf("missing autoencoder: %v", err)
	}
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestSynthDefaults: config's synthetic-stream defaults are the
// generator's: the paper's scene (synth.PaperConfig) for simulate, and the
// demo's scene and layout (synth.DefaultConfig); and Resolve refuses what
// the generator would.
func TestSynthDefaults(t *testing.T) {
	if got, want := config.DefaultConfig().Stream.Synth, SynthParamsOf(synth.PaperConfig(1)); got != want {
		t.Errorf("config.DefaultConfig's stream.synth %+v, synth.PaperConfig's %+v", got, want)
	}
	demo, sc := config.DemoConfig(), synth.DefaultConfig()
	if got, want := demo.Stream.Synth, SynthParamsOf(sc); got != want {
		t.Errorf("config.DemoConfig's stream.synth %+v, synth.DefaultConfig's %+v", got, want)
	}
	if demo.Memory.Layout != sc.Layout {
		t.Errorf("config.DemoConfig's layout %+v, synth.DefaultConfig's %+v", demo.Memory.Layout, sc.Layout)
	}
	bad := config.DemoConfig()
	bad.Stream.Synth.Regions = 0
	if _, err := bad.Resolve(); err != nil {
		t.Fatalf("config.Config.Resolve checks the generator's parameters: %v", err)
	}
	if _, err := Resolve(bad); err == nil || !strings.Contains(err.Error(), "stream.synth") || !strings.Contains(err.Error(), "regions 0") {
		t.Fatalf("Resolve with 0 regions: %v, want the generator's refusal", err)
	}
}
