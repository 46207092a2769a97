package config

import (
	"fmt"
	"math"
	"strings"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/memory"
)

// Estimate is the predicted cost of a simulate (or demo) run, from its
// layout, policies, length and per-unit costs measured on the development
// machine (Estimate's doc comment lists them). Memory is the live heap at
// its peak: what the policies hold (per layer, and shared by the layers),
// the stream and the bank workspace; the resident peak adds the garbage
// collector's headroom (GCPercent). Disk is the run folder at its largest:
// the memory log, provenance, snapshots (two of each policy while a
// checkpoint replaces the previous one) and the archives of the unbounded
// policies (memory.Archiver), which stay on disk until the run completes.
type Estimate struct {
	Layers int
	// PerLayerBytes and SharedBytes split the live peak: PerLayerBytes
	// grows with every simulated layer (the policies' state of one layer),
	// SharedBytes does not (stream, contexts, workspaces, runtime).
	PerLayerBytes, SharedBytes int64
	// LiveBytes = Layers·PerLayerBytes + SharedBytes.
	LiveBytes int64
	// GCPercent is the garbage collector's target (GOGC) the run should
	// use: the resident peak is about LiveBytes·(1 + GCPercent/100).
	GCPercent int
	// PeakBytes is the predicted resident peak.
	PeakBytes int64
	// DiskBytes is the run folder at its largest; ArchiveBytes the part of
	// it that the unbounded policies' archives take at the end.
	DiskBytes, ArchiveBytes int64
	// CPUSeconds is the predicted CPU time (all cores), Seconds the wall
	// time on Cores cores of an idle machine.
	CPUSeconds, Seconds float64
	Cores               int
	// Policies gives each policy's part.
	Policies []PolicyEstimate
}

// PolicyEstimate is one policy's part of an Estimate.
type PolicyEstimate struct {
	Policy                     string
	PerLayerBytes, SharedBytes int64
	// Growing: the policy's memory or disk grows with the video.
	Growing       bool
	DiskBytes     int64 // snapshots, archive, log and provenance at the end
	ArchiveBytes  int64
	SnapshotBytes int64 // one snapshot
	CPUSeconds    float64
}

// Per-unit costs measured on the 2-core AMD EPYC (Zen 4) development
// machine with the default build (paper scale, one layer at a time):
// a bank update costs about 1.9 CPU-seconds for H = 12 heads, N = 4,680
// candidates, M = 9,360 states and d = 128, i.e. bankCPU per H·N·M·d; the
// stream, checks and context assembly of one layer of one block about
// 0.25 CPU-seconds for T·H·d = 7.2M values (streamCPU per value), plus
// ctxCPU per context value copied.
const (
	bankCPU   = 2.9e-11
	streamCPU = 3.5e-8
	ctxCPU    = 1.5e-9
	// logLineBytes is a memory-log line without its per-head arrays,
	// logHeadBytes what each head adds; provenanceRowBytes a provenance
	// row.
	logLineBytes       = 420
	logHeadBytes       = 14
	provenanceRowBytes = 80
	// runtimeBytes is the Go runtime's and the command's own overhead.
	runtimeBytes = 80 << 20
)

// Estimate predicts the run's peak memory, disk and time (c resolved).
// cores is the number of CPUs the run uses (its wall time divides the
// parallel work by min(cores, heads)).
func (c Config) Estimate(cores int) Estimate {
	m := c.Memory
	l := m.Layout
	L := l.Layers
	P := int64(l.TokensPerFrame())
	R := int64(l.Heads * l.HeadDim)
	F := int64(l.FramesPerBlock)
	T := F * P
	fv := P * R       // values of one layer's K (or V) of a frame
	f32 := 2 * 4 * fv // one layer of a float32 frame, K and V
	blocks := int64(c.Blocks())
	frames := blocks * F
	S, W, C := int64(m.SinkFrames), int64(m.WindowFrames), int64(m.CacheFrames)
	M := int64(m.Capacity)
	cores = max(cores, 1)
	e := Estimate{Layers: L, Cores: cores}

	// The stream: the generator's (or file reader's) q, k, v of one layer
	// of a block, and sim's copies for each policy.
	stream := 3 * 4 * T * R
	if c.Stream.Kind == "synthetic" {
		stream += 4 * T * int64(c.Stream.Synth.Hidden+c.Stream.Synth.Channels) * 3
	} else {
		stream += 3*2*T*R + 1<<20
	}
	e.SharedBytes = runtimeBytes + stream
	var cpu float64
	cpu += float64(blocks) * float64(L) * streamCPU * float64(T*R)

	// Checkpoints: a policy's snapshot is written before the previous one
	// is removed, so two are on disk once a checkpoint replaces another.
	snapSets := int64(1)
	if every := int64(c.Run.SnapshotEvery); every > 0 && blocks > every {
		snapSets = 2
	}
	for _, name := range c.Policies {
		pe := PolicyEstimate{Policy: name}
		ctxTokens := (S+W)*P + M // sink, memory, local window
		perLayer := (S + W) * f32
		snap := perLayer // one layer's state in a snapshot
		switch name {
		case memory.NameDensityKV:
			b := m.Bank
			pay := int64(b.Payload.DType().Size())
			dd := int64(b.Descriptor.Dim(l.HeadDim))
			if dd == 0 {
				dd = int64(l.HeadDim)
			}
			// Keys and values, norm, source, admission, density and
			// baseline, and the float32 descriptors the kernels read
			// unless they read the bfloat16 keys themselves.
			state := int64(2*l.HeadDim)*pay + 4 + 8 + 4 + 8 + 8
			if b.Payload != bank.PayloadBF16 || b.Descriptor != bank.DescPostRoPEKey {
				state += dd * 4
			}
			perLayer += int64(l.Heads) * M * state
			if b.Payload == bank.PayloadBF16 && b.Descriptor == bank.DescPostRoPEKey {
				perLayer -= min(F, W) * f32 / 2 // waiting frames held as bfloat16
				snap -= min(F, W) * f32 / 2
			}
			snap += int64(l.Heads) * M * (int64(2*l.HeadDim)*pay + int64(b.Descriptor.Dim(l.HeadDim))*4 + 12 + 2*int64(b.Densities.Size()))
			// The update's workspace (shared by the layers): interaction
			// cache, per-head step buffers, packed operands; the offered
			// block.
			H, N := int64(l.Heads), T
			workers := int64(bank.Config{Heads: l.Heads, Workers: b.Workers}.WorkerCount())
			cache := min(workers*N*M*4, bank.DefaultCacheBytes)
			work := H*N*(16*int64(l.HeadDim)+64) + H*((N+127)/128)*M*8 + H*M*32 + workers*M*dd*4
			block := 2*H*N*int64(l.HeadDim)*4 + H*N*int64(b.Descriptor.Dim(l.HeadDim))*4 + 3*4*fv
			pe.SharedBytes += cache + work + block
			updates := max(blocks-(W-F+S+F-1)/F, 0)
			pe.CPUSeconds += float64(updates) * float64(L) * bankCPU * float64(H*N*M*dd)
			pe.DiskBytes += int64(L) * int64(l.Heads) * M * provenanceRowBytes
		case memory.NameFIFO, memory.NameUniformStride:
			perLayer += (M + T) * R * 4 * 2
			snap += M * R * 4 * 2
		case memory.NameFullHistory:
			// Every history token: in the archive; the context holds them.
			hist := frames * P
			ctxTokens = (S+W)*P + hist
			pe.ArchiveBytes = frames * int64(L) * f32
			pe.SharedBytes += hist * (8 + 4 + 8)
			pe.Growing = true
		case memory.NameLongLiveRAG:
			ctxTokens = (S+W)*P + int64(m.LongLiveRAG.TopK)*P
			pe.ArchiveBytes = frames * int64(L) * f32
			if m.LongLiveRAG.Pool == memory.RAGPoolPhysical {
				// The physical cache's frames stay in memory until it
				// evicts them into the pool.
				perLayer = (C + F) * f32
				snap = C * f32
			}
			dim := int64(m.LongLiveRAG.LatentChannels)
			switch m.LongLiveRAG.Descriptor {
			case memory.RAGKeyMean:
				dim = R
			case memory.RAGAE:
				dim = int64(m.LongLiveRAG.DescriptorStorageDim)
			}
			pe.SharedBytes += frames * dim * 4
			pe.Growing = true
		case memory.NameNative, memory.NameInfinityRoPE:
			perLayer = (C + F) * f32
			snap = C * f32
			ctxTokens = C * P
		case memory.NameDeepForcing:
			rf := int64(m.DeepForcing.RecentFrames)
			mid := (C - S - rf) * P * R * 4 * 2
			perLayer = (S+rf)*f32 + mid + (rf+F)*4*fv
			snap = (S+rf)*f32 + mid + rf*4*fv
			pe.SharedBytes += mid // the compression's new middle, one layer at a time
			ctxTokens = C * P
		}
		// Context buffers (keys, values, queries), sim's copies.
		pe.SharedBytes += ctxTokens*R*4*2 + T*R*4 + 3*4*T*R
		pe.PerLayerBytes = perLayer
		pe.CPUSeconds += float64(blocks) * float64(L) * ctxCPU * float64(2*ctxTokens*R)
		if name == memory.NameFullHistory {
			// The context grows by a block each block: half the final on average.
			pe.CPUSeconds -= float64(blocks) * float64(L) * ctxCPU * float64(frames*P*R)
		}
		pe.SnapshotBytes = int64(L)*snap + frames*P*20
		pe.DiskBytes += snapSets * pe.SnapshotBytes
		pe.DiskBytes += pe.ArchiveBytes
		lines := blocks * int64(L)
		pe.DiskBytes += lines * (logLineBytes + 2*logHeadBytes*int64(l.Heads))
		e.PerLayerBytes += pe.PerLayerBytes
		e.SharedBytes += pe.SharedBytes
		e.DiskBytes += pe.DiskBytes
		e.ArchiveBytes += pe.ArchiveBytes
		cpu += pe.CPUSeconds
		e.Policies = append(e.Policies, pe)
	}
	e.DiskBytes += frames*P*8 + int64(L)*frames*8 + 8<<20 // admissions, storage, summary, figures
	e.LiveBytes = int64(L)*e.PerLayerBytes + e.SharedBytes
	e.GCPercent = GCPercent(e.LiveBytes)
	e.PeakBytes = peakBytes(e.LiveBytes)
	e.CPUSeconds = cpu
	par := float64(min(cores, l.Heads))
	e.Seconds = cpu / par
	return e
}

// GCPercent is the garbage collector's target for a run whose live heap
// peaks at live bytes: 100 (Go's default) for small runs, less for large
// ones, so that the headroom stays about 1 GiB (at least 15 %).
func GCPercent(live int64) int {
	if live <= 1<<30 {
		return 100
	}
	return max(15, int(100*(1<<30)/live))
}

// FitError is a run that does not fit the machine: Estimate.Check's
// refusal, with what to do instead.
type FitError struct{ Msg string }

func (e *FitError) Error() string { return e.Msg }

// Check compares the estimate with the machine: available memory (bytes;
// < 0 unknown, not checked) and free disk of the run folder's filesystem
// (likewise), and returns a *FitError that says what does not fit and
// suggests a run that does (fewer layers, the layers split with
// --first-layer, shorter), or nil.
func (e Estimate) Check(c Config, availMem, freeDisk int64) error {
	var msgs []string
	if availMem >= 0 && e.PeakBytes > availMem {
		msg := fmt.Sprintf("needs about %s of memory at its peak (%s per layer × %d layers + %s shared, and the garbage collector's headroom), %s is available",
			Bytes(e.PeakBytes), Bytes(e.PerLayerBytes), e.Layers, Bytes(e.SharedBytes), Bytes(availMem))
		fit := e.layersFitting(availMem)
		switch {
		case fit >= 1 && c.Stream.Kind == "synthetic":
			msg += fmt.Sprintf(": simulate at most %d layers per run (--layers %d), e.g. the %d layers as --layers %d --first-layer 0, --first-layer %d, … (a layer simulated alone logs what it logs in a full run)",
				fit, fit, e.Layers, fit, fit)
		case fit >= 1:
			msg += fmt.Sprintf(": simulate at most %d layers (--layers %d)", fit, fit)
		default:
			msg += ": even one layer does not fit; run fewer policies at once, or a smaller layout"
		}
		if e.growing() {
			msg += ", or a shorter video (--seconds)"
		}
		msgs = append(msgs, msg)
	}
	if freeDisk >= 0 && e.DiskBytes > freeDisk {
		msg := fmt.Sprintf("needs about %s of disk", Bytes(e.DiskBytes))
		if e.ArchiveBytes > 0 {
			msg += fmt.Sprintf(" (%s of it the archives of %s, which keep every frame)", Bytes(e.ArchiveBytes), strings.Join(e.growingNames(), " and "))
		}
		msg += fmt.Sprintf(", the run folder's filesystem has %s free", Bytes(freeDisk))
		if s := e.secondsFitting(c, freeDisk); s > 0 && e.ArchiveBytes > 0 {
			msg += fmt.Sprintf(": a shorter video fits (about --seconds %g), or fewer layers", s)
		} else {
			msg += ": use fewer layers or policies, or another --out"
		}
		msgs = append(msgs, msg)
	}
	if len(msgs) == 0 {
		return nil
	}
	return &FitError{Msg: "this run " + strings.Join(msgs, "; it also ") + "; --force runs it anyway"}
}

// layersFitting returns how many layers fit in avail bytes.
func (e Estimate) layersFitting(avail int64) int {
	for k := e.Layers; k >= 1; k-- {
		if peakBytes(int64(k)*e.PerLayerBytes+e.SharedBytes) <= avail {
			return k
		}
	}
	return 0
}

// peakBytes is the resident peak of a live heap of live bytes: the
// collector's headroom (GCPercent) and 5 % for fragmentation.
func peakBytes(live int64) int64 {
	return live + live*int64(GCPercent(live))/100 + live/20
}

func (e Estimate) growing() bool { return len(e.growingNames()) > 0 }

func (e Estimate) growingNames() []string {
	var out []string
	for _, p := range e.Policies {
		if p.Growing {
			out = append(out, p.Policy)
		}
	}
	return out
}

// secondsFitting returns the video length whose disk estimate fits free
// bytes (the archives grow linearly), rounded down to a second.
func (e Estimate) secondsFitting(c Config, free int64) float64 {
	if e.ArchiveBytes <= 0 || e.DiskBytes <= free {
		return 0
	}
	fixed := float64(e.DiskBytes - e.ArchiveBytes)
	frac := (float64(free) - fixed) / float64(e.ArchiveBytes)
	if frac <= 0 {
		return 0
	}
	return math.Floor(c.Stream.Seconds * frac)
}

// Bytes formats n bytes with a binary unit (KiB, MiB, GiB, TiB).
func Bytes(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if math.Abs(f) < 1024 {
			if u == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1024
	}
	return fmt.Sprintf("%.1f TiB", f)
}

// Summary is a one-line account of the estimate.
func (e Estimate) Summary() string {
	s := fmt.Sprintf("peak memory about %s (%s per layer × %d + %s), disk about %s", Bytes(e.PeakBytes), Bytes(e.PerLayerBytes), e.Layers, Bytes(e.SharedBytes), Bytes(e.DiskBytes))
	if e.ArchiveBytes > 0 {
		s += fmt.Sprintf(" (archives %s)", Bytes(e.ArchiveBytes))
	}
	return s + fmt.Sprintf(", time about %s on %d cores", duration(e.Seconds), e.Cores)
}

func duration(s float64) string {
	switch {
	case s < 90:
		return fmt.Sprintf("%.0f s", math.Max(s, 1))
	case s < 90*60:
		return fmt.Sprintf("%.0f min", s/60)
	default:
		return fmt.Sprintf("%.1f h", s/3600)
	}
}

// VAEScale is the Wan2.1 VAE's spatial factor: pixel rows (and columns)
// per latent row (and column).
const VAEScale = 8

// VideoDisk is the disk a generate run's video takes at its largest, while
// the run goes (bytes): Lossless, the segments' lossless copies in
// state/video/ from which video.mp4 and the horizons are encoded (removed
// once the run is complete), and MP4, the segments, video.mp4 and the
// horizons.
type VideoDisk struct{ Lossless, MP4 int64 }

// Total is the sum of the parts.
func (d VideoDisk) Total() int64 { return d.Lossless + d.MP4 }

// Per-frame costs of the video's files: FFV1 keeps video content well under
// the raw rgb24 frame (3 bytes a pixel), but noise (the tiny test model's
// output) at about 1.07 times it, so the estimate of the lossless copies
// is an upper bound, losslessRatio of the raw frames and losslessFileBytes
// a copy; an x264 frame at crf 18 takes at most about mp4PixelBytes a
// pixel (measured on a noisy test pattern at 832×480), doubling every 6
// steps of crf down, and never more than yuv420p's 1.5.
const (
	losslessRatio     = 1.1
	losslessFileBytes = 4 << 10
	mp4PixelBytes     = 0.25
)

// VideoDisk estimates the disk of the run's video at its largest (zero
// without a VAE): frames of (VAEScale·latent) pixels.
func (g GenerateSection) VideoDisk() VideoDisk {
	if g.VAE == "" || g.Blocks <= 0 {
		return VideoDisk{}
	}
	px := float64(VAEScale*g.LatentHeight) * float64(VAEScale*g.LatentWidth)
	frames := float64(VideoFrames(g.Blocks * g.BlockFrames()))
	d := VideoDisk{Lossless: int64(math.Ceil(losslessRatio*3*px*frames)) + int64(g.Blocks)*losslessFileBytes}
	// The segments and video.mp4 hold every frame; each horizon its own.
	encoded := 2 * frames
	for _, h := range g.Horizons {
		encoded += float64(VideoFrames(HorizonBlocks(h, g.BlockFrames()) * g.BlockFrames()))
	}
	bpp := math.Min(1.5, mp4PixelBytes*math.Exp2(float64(18-g.Video.CRF)/6))
	d.MP4 = int64(math.Ceil(bpp * px * encoded))
	return d
}
