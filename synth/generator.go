package synth

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/memory"
)

// Reader is a KV stream read block by block and, within a block, layer by
// layer (see the package doc). Implementations: *Generator, *FileReader.
type Reader interface {
	// Layout returns the geometry of the stream.
	Layout() memory.Layout
	// Blocks returns the number of blocks, or −1 when unknown.
	Blocks() int
	// NextBlock advances to the next block and returns its description, or
	// io.EOF after the last block.
	NextBlock() (BlockInfo, error)
	// Layer returns layer l of the current block: q, k, v [T][H][D]. Layers
	// must be read in order 0..Layers−1 (skipping is allowed, going back is
	// not). The slices are valid until the next call to Layer or NextBlock.
	Layer(l int) (q, k, v []float32, err error)
}

// BlockInfo describes the current block of a Reader.
type BlockInfo struct {
	Index       int       // block index b; the block holds frames [b·F, b·F+F)
	Latent      []float32 // optional latents [F][C][H'][W'], nil when unavailable
	LatentShape [4]int    // F, C, H', W' of Latent (zeros when nil)
}

// Config parameterises the procedural generator. Zero fields are not
// defaults: start from DefaultConfig or PaperConfig and change fields.
type Config struct {
	Layout   memory.Layout
	Blocks   int    // number of blocks in the stream (≥ 1)
	Seed     uint64 // everything derives from it
	Channels int    // latent channels C (Wan: 16)
	Hidden   int    // width of the residual feature stack

	Objects      int     // moving objects per scene
	Regions      int     // background region prototypes per scene
	PanAmplitude float64 // camera pan amplitude, tokens
	PanPeriod    float64 // camera pan period, frames
	CutAt        float64 // fraction of the stream where scene 1 cuts to scene 2 (≥ 1: never)
	ReturnAt     float64 // fraction where it cuts back to scene 1 (≤ CutAt or ≥ 1: never)
	Drift        float64 // appearance drift, radians per frame
	Noise        float64 // per-token feature noise std
	KeyNoise     float64 // per-token, per-head key noise std (before normalisation)
	ValueNoise   float64 // per-token, per-head value noise std
}

// DefaultConfig is the reduced but faithful demo scale: a 10×16 token grid,
// 3 frames per block, 4 layers, 4 heads of dimension 64, 40 blocks (120
// latent frames, the paper's 30 s at 4 latent frames per second).
func DefaultConfig() Config {
	return Config{
		Layout: memory.Layout{Height: 10, Width: 16, FramesPerBlock: 3, Layers: 4, Heads: 4, HeadDim: 64},
		Blocks: 40, Seed: 1, Channels: 16, Hidden: 32,
		Objects: 3, Regions: 4,
		PanAmplitude: 8, PanPeriod: 60,
		CutAt: 0.45, ReturnAt: 0.75,
		Drift: 0.002, Noise: 0.1, KeyNoise: 0.05, ValueNoise: 0.05,
	}
}

// PaperConfig is the paper's geometry (memory.DefaultLayout, 30×52 tokens per
// frame, 30 layers, 12 heads of dimension 128) for the given number of blocks
// (160 blocks = 480 latent frames ≈ 120 s).
func PaperConfig(blocks int) Config {
	c := DefaultConfig()
	c.Layout = memory.DefaultLayout()
	c.Blocks = blocks
	c.PanAmplitude = 26
	c.PanPeriod = 240
	c.Objects = 5
	c.Regions = 6
	return c
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	l := c.Layout
	switch {
	case l.Height <= 0 || l.Width <= 0 || l.FramesPerBlock <= 0 || l.Layers <= 0 || l.Heads <= 0:
		return fmt.Errorf("synth: layout %+v must have positive sizes", l)
	case l.HeadDim < 6 || l.HeadDim%2 != 0:
		return fmt.Errorf("synth: head dim %d must be even and at least 6", l.HeadDim)
	case c.Blocks <= 0:
		return fmt.Errorf("synth: blocks %d must be positive", c.Blocks)
	case c.Channels <= 0 || c.Hidden <= 0:
		return fmt.Errorf("synth: channels %d and hidden %d must be positive", c.Channels, c.Hidden)
	case c.Objects < 0 || c.Regions <= 0:
		return fmt.Errorf("synth: objects %d must be ≥ 0 and regions %d positive", c.Objects, c.Regions)
	case !(c.PanPeriod > 0) || math.IsInf(c.PanPeriod, 0) || !finite(c.PanAmplitude):
		return fmt.Errorf("synth: pan period %v must be positive and amplitude %v finite", c.PanPeriod, c.PanAmplitude)
	case !finite(c.CutAt) || !finite(c.ReturnAt) || !finite(c.Drift):
		return fmt.Errorf("synth: cut %v, return %v, drift %v must be finite", c.CutAt, c.ReturnAt, c.Drift)
	case !(c.Noise >= 0) || !(c.KeyNoise >= 0) || !(c.ValueNoise >= 0) || !finite(c.Noise+c.KeyNoise+c.ValueNoise):
		return fmt.Errorf("synth: noise levels %v, %v, %v must be finite and ≥ 0", c.Noise, c.KeyNoise, c.ValueNoise)
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// wave is one smooth random field component a·cos(ωx·x + ωy·y + φ).
type wave struct{ wx, wy, phase float64 }

func (w wave) at(x, y float64) float64 { return math.Cos(w.wx*x + w.wy*y + w.phase) }

type object struct {
	proto, dir       []float64 // prototype and drift direction (C)
	radius           float64
	cx, cy, ax, ay   float64 // path centre and amplitudes (world tokens)
	px, py, phx, phy float64 // periods (frames) and phases
	tex              []wave  // object-fixed texture
	texMix           [][]float64
}

type scene struct {
	protos, dirs [][]float64 // region prototypes and drift directions
	fields       [][]wave    // region selector fields
	tex          []wave      // background texture
	texMix       [][]float64 // C × len(tex)
	objects      []object
	panPhase     float64
}

// Generator is the procedural stream of the package doc. It implements Reader.
// A Generator is not safe for concurrent use.
type Generator struct {
	cfg    Config
	scenes [2]scene
	lift   []float32   // Hidden × C
	mix    [][]float32 // per layer Hidden × Hidden
	wq     [][]float32 // per layer (H·D) × Hidden
	wk     [][]float32
	wv     [][]float32
	gq     [][]float32 // per layer, per head query gain (H)
	gk     [][]float32 // per layer key gain (H·D)

	block   int       // current block, −1 before the first
	next    int       // next layer to produce
	feat    []float32 // T × C features of the current block
	hidden  []float32 // T × Hidden state of the residual stack at layer next−1
	tmp     []float32
	q, k, v []float32
	latent  []float32
}

// NewGenerator validates cfg and builds the fixed scene and projections.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := cfg.Layout
	C, Hd, HD := cfg.Channels, cfg.Hidden, l.Heads*l.HeadDim
	r := rand.New(rand.NewPCG(cfg.Seed, 0x5eed_5c3e))
	g := &Generator{cfg: cfg, block: -1}
	for s := range g.scenes {
		g.scenes[s] = newScene(r, cfg)
	}
	g.lift = gauss(r, Hd*C, 1/math.Sqrt(float64(C)))
	for layer := 0; layer < l.Layers; layer++ {
		g.mix = append(g.mix, gauss(r, Hd*Hd, 1.2/math.Sqrt(float64(Hd))))
		wk := gauss(r, HD*Hd, 1/math.Sqrt(float64(Hd)))
		rq := gauss(r, HD*Hd, 1/math.Sqrt(float64(Hd)))
		wq := make([]float32, HD*Hd)
		gq := make([]float32, l.Heads)
		for h := 0; h < l.Heads; h++ {
			a := 0.5 + 0.45*r.Float64() // content alignment of this head
			b := math.Sqrt(1 - a*a)
			for i := h * l.HeadDim * Hd; i < (h+1)*l.HeadDim*Hd; i++ {
				wq[i] = float32(a)*wk[i] + float32(b)*rq[i]
			}
			gq[h] = float32(1 + 1.5*r.Float64())
		}
		gk := make([]float32, HD)
		for i := range gk {
			gk[i] = float32(0.8 + 0.4*r.Float64())
		}
		g.wq = append(g.wq, wq)
		g.wk = append(g.wk, wk)
		g.wv = append(g.wv, gauss(r, HD*Hd, 1/math.Sqrt(float64(Hd))))
		g.gq = append(g.gq, gq)
		g.gk = append(g.gk, gk)
	}
	T := l.TokensPerBlock()
	g.feat = make([]float32, T*C)
	g.hidden = make([]float32, T*Hd)
	g.tmp = make([]float32, T*Hd)
	g.q = make([]float32, T*HD)
	g.k = make([]float32, T*HD)
	g.v = make([]float32, T*HD)
	g.latent = make([]float32, l.FramesPerBlock*C*4*l.Height*l.Width)
	return g, nil
}

func gauss(r *rand.Rand, n int, std float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * std)
	}
	return out
}

func gvec(r *rand.Rand, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = r.NormFloat64()
	}
	return out
}

// unitLike returns a random direction with the norm of a standard Gaussian
// vector (√n) orthogonalised against p.
func unitLike(r *rand.Rand, p []float64) []float64 {
	d := gvec(r, len(p))
	var dp, pp float64
	for i := range p {
		dp += d[i] * p[i]
		pp += p[i] * p[i]
	}
	if pp > 0 {
		for i := range d {
			d[i] -= dp / pp * p[i]
		}
	}
	var dd float64
	for _, x := range d {
		dd += x * x
	}
	s := math.Sqrt(pp / math.Max(dd, 1e-12))
	for i := range d {
		d[i] *= s
	}
	return d
}

func waves(r *rand.Rand, n int, freq float64) []wave {
	out := make([]wave, n)
	for i := range out {
		a := 2 * math.Pi * r.Float64()
		f := freq * (0.5 + r.Float64())
		out[i] = wave{wx: f * math.Cos(a), wy: f * math.Sin(a), phase: 2 * math.Pi * r.Float64()}
	}
	return out
}

func mixMatrix(r *rand.Rand, rows, cols int, std float64) [][]float64 {
	m := make([][]float64, rows)
	for i := range m {
		m[i] = gvec(r, cols)
		for j := range m[i] {
			m[i][j] *= std
		}
	}
	return m
}

func newScene(r *rand.Rand, cfg Config) scene {
	C, W, H := cfg.Channels, float64(cfg.Layout.Width), float64(cfg.Layout.Height)
	var s scene
	for i := 0; i < cfg.Regions; i++ {
		p := gvec(r, C)
		s.protos = append(s.protos, p)
		s.dirs = append(s.dirs, unitLike(r, p))
		s.fields = append(s.fields, waves(r, 3, 2*math.Pi/(1.5*H)))
	}
	s.tex = waves(r, 6, 2*math.Pi/(0.6*H))
	s.texMix = mixMatrix(r, C, len(s.tex), 0.45/math.Sqrt(float64(len(s.tex))))
	for i := 0; i < cfg.Objects; i++ {
		p := gvec(r, C)
		o := object{
			proto: p, dir: unitLike(r, p),
			radius: math.Max(1, H*(0.12+0.12*r.Float64())),
			cx:     W * r.Float64(), cy: H * (0.25 + 0.5*r.Float64()),
			ax: W * (0.6 + 0.6*r.Float64()), ay: H * (0.1 + 0.2*r.Float64()),
			px: 30 + 60*r.Float64(), py: 20 + 40*r.Float64(),
			phx: 2 * math.Pi * r.Float64(), phy: 2 * math.Pi * r.Float64(),
			tex: waves(r, 4, 2*math.Pi/(0.5*H)),
		}
		o.texMix = mixMatrix(r, C, len(o.tex), 0.3/math.Sqrt(float64(len(o.tex))))
		s.objects = append(s.objects, o)
	}
	s.panPhase = 2 * math.Pi * r.Float64()
	return s
}

// Config returns the generator's configuration.
func (g *Generator) Config() Config { return g.cfg }

// Layout implements Reader.
func (g *Generator) Layout() memory.Layout { return g.cfg.Layout }

// Blocks implements Reader.
func (g *Generator) Blocks() int { return g.cfg.Blocks }

// Reset rewinds the generator to before the first block.
func (g *Generator) Reset() { g.block, g.next = -1, 0 }

// SceneAt returns the scene (0 or 1) shown at latent frame t.
func (g *Generator) SceneAt(t int) int {
	frames := float64(g.cfg.Blocks * g.cfg.Layout.FramesPerBlock)
	x := float64(t) / frames
	if g.cfg.CutAt < 1 && x >= g.cfg.CutAt && !(g.cfg.ReturnAt > g.cfg.CutAt && g.cfg.ReturnAt < 1 && x >= g.cfg.ReturnAt) {
		return 1
	}
	return 0
}

// rotate returns p·cos θ + d·sin θ into dst.
func rotate(dst, p, d []float64, theta float64) {
	c, s := math.Cos(theta), math.Sin(theta)
	for i := range dst {
		dst[i] = p[i]*c + d[i]*s
	}
}

// Frame writes the C-channel features of latent frame t, [H·W][C] in token
// order (h, w), into dst (len ≥ H·W·C) and returns dst[:H·W·C].
func (g *Generator) Frame(dst []float32, t int) []float32 {
	cfg := g.cfg
	H, W, C := cfg.Layout.Height, cfg.Layout.Width, cfg.Channels
	dst = dst[:H*W*C]
	s := &g.scenes[g.SceneAt(t)]
	theta := cfg.Drift * float64(t)
	protos := make([][]float64, len(s.protos))
	for i := range protos {
		protos[i] = make([]float64, C)
		rotate(protos[i], s.protos[i], s.dirs[i], theta)
	}
	oprotos := make([][]float64, len(s.objects))
	for i := range oprotos {
		oprotos[i] = make([]float64, C)
		rotate(oprotos[i], s.objects[i].proto, s.objects[i].dir, theta)
	}
	ox := cfg.PanAmplitude * math.Sin(2*math.Pi*float64(t)/cfg.PanPeriod+s.panPhase)
	noise := rand.New(rand.NewPCG(cfg.Seed, 0xf4a3e<<20|uint64(t)))
	tv := make([]float64, 8)
	for y := 0; y < H; y++ {
		for x := 0; x < W; x++ {
			out := dst[(y*W+x)*C : (y*W+x+1)*C]
			wx, wy := float64(x)+ox, float64(y)
			// Topmost object covering the token, if any.
			obj := -1
			var lx, ly float64
			for i := len(s.objects) - 1; i >= 0; i-- {
				o := &s.objects[i]
				cx := o.cx + o.ax*math.Sin(2*math.Pi*float64(t)/o.px+o.phx)
				cy := o.cy + o.ay*math.Sin(2*math.Pi*float64(t)/o.py+o.phy)
				if dx, dy := wx-cx, wy-cy; dx*dx+dy*dy <= o.radius*o.radius {
					obj, lx, ly = i, dx, dy
					break
				}
			}
			var base []float64
			var tex []wave
			var mix [][]float64
			px, py := wx, wy
			if obj >= 0 {
				base, tex, mix = oprotos[obj], s.objects[obj].tex, s.objects[obj].texMix
				px, py = lx, ly
			} else {
				best, bv := 0, math.Inf(-1)
				for r, f := range s.fields {
					var v float64
					for _, w := range f {
						v += w.at(wx, wy)
					}
					if v > bv {
						best, bv = r, v
					}
				}
				base, tex, mix = protos[best], s.tex, s.texMix
			}
			tv = tv[:len(tex)]
			for j, w := range tex {
				tv[j] = w.at(px, py)
			}
			for c := 0; c < C; c++ {
				v := base[c]
				for j, m := range mix[c] {
					v += m * tv[j]
				}
				out[c] = float32(v + cfg.Noise*noise.NormFloat64())
			}
		}
	}
	return dst
}

// NextBlock implements Reader: it renders the frames of the next block.
func (g *Generator) NextBlock() (BlockInfo, error) {
	if g.block+1 >= g.cfg.Blocks {
		return BlockInfo{}, io.EOF
	}
	g.block++
	g.next = 0
	l := g.cfg.Layout
	C, HW, F := g.cfg.Channels, l.TokensPerFrame(), l.FramesPerBlock
	for f := 0; f < F; f++ {
		g.Frame(g.feat[f*HW*C:], g.block*F+f)
	}
	// Latent [F][C][2H][2W]: features upsampled by two.
	H2, W2 := 2*l.Height, 2*l.Width
	for f := 0; f < F; f++ {
		for c := 0; c < C; c++ {
			plane := g.latent[(f*C+c)*H2*W2 : (f*C+c+1)*H2*W2]
			for y := 0; y < H2; y++ {
				for x := 0; x < W2; x++ {
					plane[y*W2+x] = g.feat[(f*HW+(y/2)*l.Width+x/2)*C+c]
				}
			}
		}
	}
	// h₀ = E·f.
	T, Hd := l.TokensPerBlock(), g.cfg.Hidden
	gemm.NT(T, Hd, C, g.feat, C, g.lift, C, g.hidden, Hd)
	return BlockInfo{Index: g.block, Latent: g.latent, LatentShape: [4]int{F, C, H2, W2}}, nil
}

// Layer implements Reader.
func (g *Generator) Layer(layer int) (q, k, v []float32, err error) {
	l := g.cfg.Layout
	if g.block < 0 {
		return nil, nil, nil, errors.New("synth: Layer called before NextBlock")
	}
	if layer < g.next || layer >= l.Layers {
		return nil, nil, nil, fmt.Errorf("synth: block %d: layer %d out of order (next %d of %d)", g.block, layer, g.next, l.Layers)
	}
	T, Hd := l.TokensPerBlock(), g.cfg.Hidden
	for ; g.next <= layer; g.next++ {
		// h_l = h_{l−1} + tanh(A_l·h_{l−1}).
		gemm.NT(T, Hd, Hd, g.hidden, Hd, g.mix[g.next], Hd, g.tmp, Hd)
		for i, x := range g.tmp {
			g.hidden[i] += float32(math.Tanh(float64(x)))
		}
	}
	HD, D := l.Heads*l.HeadDim, l.HeadDim
	gemm.NT(T, HD, Hd, g.hidden, Hd, g.wq[layer], Hd, g.q, HD)
	gemm.NT(T, HD, Hd, g.hidden, Hd, g.wk[layer], Hd, g.k, HD)
	gemm.NT(T, HD, Hd, g.hidden, Hd, g.wv[layer], Hd, g.v, HD)
	r := rand.New(rand.NewPCG(g.cfg.Seed^0x6b65795f6e6f6973, uint64(g.block)<<16|uint64(layer)))
	gq, gk := g.gq[layer], g.gk[layer]
	for t := 0; t < T; t++ {
		for h := 0; h < l.Heads; h++ {
			off := (t*l.Heads + h) * D
			kr, qr, vr := g.k[off:off+D], g.q[off:off+D], g.v[off:off+D]
			for i := range kr {
				kr[i] += float32(g.cfg.KeyNoise * r.NormFloat64())
				vr[i] += float32(g.cfg.ValueNoise * r.NormFloat64())
			}
			rmsnorm(kr, gk[h*D:(h+1)*D], 1)
			rmsnorm(qr, nil, gq[h])
		}
	}
	return g.q, g.k, g.v, nil
}

// rmsnorm scales x to unit root-mean-square, then by gain[i] (or s when gain
// is nil).
func rmsnorm(x, gain []float32, s float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+1e-6)
	for i := range x {
		g := s
		if gain != nil {
			g = gain[i]
		}
		x[i] = float32(float64(x[i])*inv) * g
	}
}
