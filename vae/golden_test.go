package vae

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/golden"
)

// goldenTol is the README's tolerance for a float32 port: relative L2 error
// per tensor against the float64 reference.
const goldenTol = 1e-4

// tensor is a computed value to compare with a golden tensor: float32
// values, or bytes (video_u8).
type tensor struct {
	shape []int
	f     []float32
	u8    []uint8
}

// cmp is the comparison of one golden tensor.
type cmp struct {
	name        string
	rel, maxAbs float64 // float tensors: relative L2 and max abs error
	off         int     // byte tensors: values differing (by at most 1)
}

// compareFile compares every tensor of the golden file path with got and
// returns the comparisons and the failures: a tensor missing from got (not
// compared), a shape mismatch, a relative L2 error above goldenTol, a byte
// off by more than 1.
func compareFile(path string, got map[string]tensor) (res []cmp, fails []string) {
	return compareFileTol(path, got, goldenTol, goldenTol, 1)
}

// compareFileTol is compareFile with relative L2 tolerance tol, every
// value within elemTol of its tensor's largest magnitude, and bytes
// allowed to be off by byteTol.
func compareFileTol(path string, got map[string]tensor, tol, elemTol float64, byteTol int64) (res []cmp, fails []string) {
	s, err := checkpoint.OpenSafetensors(path)
	if err != nil {
		return nil, []string{err.Error()}
	}
	defer s.Close()
	file := filepath.Base(path)
	for _, name := range s.Names() {
		g, ok := got[name]
		if !ok {
			fails = append(fails, fmt.Sprintf("%s: tensor %s not compared", file, name))
			continue
		}
		info, _ := s.Info(name)
		if !slices.Equal(info.Shape, g.shape) {
			fails = append(fails, fmt.Sprintf("%s: %s has shape %v, computed %v", file, name, info.Shape, g.shape))
			continue
		}
		if info.DType == checkpoint.U8 {
			want, _, err := s.Int64(name)
			if err != nil || len(g.u8) != len(want) {
				fails = append(fails, fmt.Sprintf("%s: %s: %v (%d computed bytes)", file, name, err, len(g.u8)))
				continue
			}
			c := cmp{name: name}
			for i, w := range want {
				switch d := int64(g.u8[i]) - w; {
				case d == 0:
				case d >= -byteTol && d <= byteTol:
					c.off++
				default:
					fails = append(fails, fmt.Sprintf("%s: %s[%d] = %d, computed %d", file, name, i, w, g.u8[i]))
				}
			}
			res = append(res, c)
			continue
		}
		want, _, err := s.Float64(name)
		if err != nil || len(g.f) != len(want) {
			fails = append(fails, fmt.Sprintf("%s: %s: %v (%d computed values)", file, name, err, len(g.f)))
			continue
		}
		c := cmp{name: name}
		var num, den, big float64
		worst := 0
		for i, w := range want {
			d := math.Abs(float64(g.f[i]) - w)
			num += d * d
			den += w * w
			big = math.Max(big, math.Abs(w))
			if d > c.maxAbs || math.IsNaN(d) {
				c.maxAbs, worst = d, i
			}
		}
		c.rel = math.Sqrt(num / den)
		if den == 0 {
			c.rel = math.Sqrt(num)
		}
		if !(c.rel <= tol) {
			fails = append(fails, fmt.Sprintf("%s: %s relative L2 error %.3g > %g (max abs %.3g)", file, name, c.rel, tol, c.maxAbs))
		} else if !(c.maxAbs <= elemTol*big) {
			// A second guard against one corrupted value in a large
			// tensor: every value within elemTol of the largest.
			fails = append(fails, fmt.Sprintf("%s: %s[%d] = %v, computed %v (error above %g × max |value| %.3g)", file, name, worst, want[worst], g.f[worst], elemTol, big))
		}
		res = append(res, c)
	}
	return res, fails
}

// readF64 reads a golden float tensor.
func readF64(path, name string) ([]float64, []int, error) {
	s, err := checkpoint.OpenSafetensors(path)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	return s.Float64(name)
}

// latentInput reads the golden latents z [C][T][h][w] and returns them
// frame-major, checking that float32 holds them exactly (as the README
// says).
func latentInput(path string) (z []float32, c, t, h, w int, err error) {
	v, shape, err := readF64(path, "z")
	if err != nil {
		return nil, 0, 0, 0, 0, err
	}
	if len(shape) != 4 {
		return nil, 0, 0, 0, 0, fmt.Errorf("%s: z has shape %v", path, shape)
	}
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
		if float64(f[i]) != x {
			return nil, 0, 0, 0, 0, fmt.Errorf("%s: z[%d] = %v is not a float32 value", path, i, x)
		}
	}
	c, t, h, w = shape[0], shape[1], shape[2], shape[3]
	return FrameMajor(f, c, t, h, w), c, t, h, w, nil
}

// sidecar is the part of a decode_*.json sidecar the tests compare.
type sidecar struct {
	Config struct {
		Dim                int    `json:"dim"`
		ZDim               int    `json:"z_dim"`
		DimMult            []int  `json:"dim_mult"`
		NumResBlocks       int    `json:"num_res_blocks"`
		AttnScales         []int  `json:"attn_scales"`
		TemperalDownsample []bool `json:"temperal_downsample"`
		TemperalUpsample   []bool `json:"temperal_upsample"`
		Dropout            *float64
	} `json:"config"`
	LatentShape []int     `json:"latent_shape_CThw"`
	VideoShape  []int     `json:"video_shape_CFHW"`
	Mean        []float64 `json:"latent_mean"`
	Std         []float64 `json:"latent_std"`
	Clamped     *float64  `json:"clamped_fraction"`
	OutputStd   *float64  `json:"output_std"`
	RealConfig  struct {
		Dim              int       `json:"dim"`
		ZDim             int       `json:"z_dim"`
		DimMult          []int     `json:"dim_mult"`
		NumResBlocks     int       `json:"num_res_blocks"`
		TemperalUpsample []bool    `json:"temperal_upsample"`
		LatentHW         []int     `json:"frame_480x832_latent_hw"`
		Mean             []float64 `json:"mean"`
		Std              []float64 `json:"std"`
	} `json:"real_config"`
	ChunkFrames int `json:"vae_chunk_frames"`
	Chunks      []struct {
		Index       int `json:"index"`
		LatentStart int `json:"latent_start"`
		LatentEnd   int `json:"latent_end"`
		PixelStart  int `json:"pixel_start"`
		PixelEnd    int `json:"pixel_end"`
		Frames      int `json:"frames"`
	} `json:"chunks"`
	ConcatEqualsFull *bool           `json:"concat_equals_decode_full_video"`
	OtherChunkings   map[string]bool `json:"other_chunkings_checked_bitwise_equal"`
	NaiveFrames      []int           `json:"naive_cache_reset_per_chunk_frames"`
}

func readSidecar(path string) (*sidecar, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s sidecar
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// checkConfig compares a sidecar's tiny and real configurations with the
// model's and DefaultConfig.
func checkConfig(s *sidecar, cfg Config) []string {
	var fails []string
	c := s.Config
	up := slices.Clone(c.TemperalDownsample)
	slices.Reverse(up)
	got := Config{Dim: c.Dim, ZDim: c.ZDim, DimMult: c.DimMult, NumResBlocks: c.NumResBlocks, TemporalUpsample: c.TemperalUpsample}
	if !got.Equal(cfg) || !slices.Equal(up, cfg.TemporalUpsample) || len(c.AttnScales) != 0 || c.Dropout == nil || *c.Dropout != 0 {
		fails = append(fails, fmt.Sprintf("sidecar config %+v differs from the weights' %+v", c, cfg))
	}
	r := s.RealConfig
	real := Config{Dim: r.Dim, ZDim: r.ZDim, DimMult: r.DimMult, NumResBlocks: r.NumResBlocks, TemporalUpsample: r.TemperalUpsample}
	if !real.Equal(DefaultConfig()) || !slices.Equal(r.LatentHW, []int{480 / 8, 832 / 8}) {
		fails = append(fails, fmt.Sprintf("sidecar real_config %+v differs from DefaultConfig", r))
	}
	mean, std := WanStats()
	for i := range wanMean {
		if i >= len(r.Mean) || i >= len(r.Std) || r.Mean[i] != wanMean[i] || r.Std[i] != wanStd[i] || len(r.Mean) != 16 || len(r.Std) != 16 {
			fails = append(fails, fmt.Sprintf("sidecar real mean/std %v %v differ from WanStats %v %v", r.Mean, r.Std, mean, std))
			break
		}
	}
	return fails
}

// statsOf converts sidecar statistics to float32, requiring them to be
// float32 values (the README: exactly representable, or the float32
// roundings the reference uses).
func statsOf(s *sidecar) (mean, std []float32, err error) {
	for i := range s.Mean {
		mean = append(mean, float32(s.Mean[i]))
		if float64(mean[i]) != s.Mean[i] {
			return nil, nil, fmt.Errorf("latent_mean[%d] = %v is not a float32 value", i, s.Mean[i])
		}
	}
	for i := range s.Std {
		std = append(std, float32(s.Std[i]))
		if float64(std[i]) != s.Std[i] {
			return nil, nil, fmt.Errorf("latent_std[%d] = %v is not a float32 value", i, s.Std[i])
		}
	}
	return mean, std, nil
}

// traces collects the traced module outputs of a decode: key
// "frame<K>.<module>" → frames [c][h][w] in time order.
type traces struct {
	frames map[string][][]float32
	dims   map[string][3]int
}

func newTraces() *traces {
	return &traces{frames: map[string][][]float32{}, dims: map[string][3]int{}}
}

func (tr *traces) fn(call int, module string, c, h, w int, data []float32) {
	k := fmt.Sprintf("frame%d.%s", call, module)
	tr.frames[k] = append(tr.frames[k], slices.Clone(data))
	tr.dims[k] = [3]int{c, h, w}
}

// stack returns the frames of keys (concatenated in order) as [c][t][h][w].
func (tr *traces) stack(keys ...string) tensor {
	var fs [][]float32
	var d [3]int
	for _, k := range keys {
		fs = append(fs, tr.frames[k]...)
		d = tr.dims[k]
	}
	n := d[1] * d[2]
	out := make([]float32, 0, len(fs)*d[0]*n)
	for ch := 0; ch < d[0]; ch++ {
		for _, f := range fs {
			out = append(out, f[ch*n:(ch+1)*n]...)
		}
	}
	return tensor{shape: []int{d[0], len(fs), d[1], d[2]}, f: out}
}

// videoTensor wraps a decoded video [3][F][H][W].
func videoTensor(v []float32, f, h, w int) tensor {
	return tensor{shape: []int{3, f, h, w}, f: v}
}

// goldenReport is what a golden folder check found.
type goldenReport struct {
	cmps  []cmp
	fails []string
}

func (r *goldenReport) add(res []cmp, fails []string) {
	r.cmps = append(r.cmps, res...)
	r.fails = append(r.fails, fails...)
}

func (r *goldenReport) fail(format string, a ...any) {
	r.fails = append(r.fails, fmt.Sprintf(format, a...))
}

// checkWeightsSidecar compares weights.json with the state dict of the
// weights file and the model built from it.
func checkWeightsSidecar(dir string, sd checkpoint.StateDict, m *Model) []string {
	var side struct {
		Config struct {
			Dim                int    `json:"dim"`
			ZDim               int    `json:"z_dim"`
			DimMult            []int  `json:"dim_mult"`
			NumResBlocks       int    `json:"num_res_blocks"`
			TemperalDownsample []bool `json:"temperal_downsample"`
			TemperalUpsample   []bool `json:"temperal_upsample"`
		} `json:"config"`
		NumTensors int    `json:"num_tensors"`
		NumParams  int64  `json:"num_params"`
		SHA256     string `json:"sha256_weights_safetensors"`
		Tensors    map[string]struct {
			DType string `json:"dtype"`
			Shape []int  `json:"shape"`
		} `json:"tensors"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "weights.json"))
	if err == nil {
		err = json.Unmarshal(b, &side)
	}
	if err != nil {
		return []string{err.Error()}
	}
	var fails []string
	c := side.Config
	if !(Config{Dim: c.Dim, ZDim: c.ZDim, DimMult: c.DimMult, NumResBlocks: c.NumResBlocks, TemporalUpsample: c.TemperalUpsample}).Equal(m.Cfg) {
		fails = append(fails, fmt.Sprintf("weights.json config %+v, inferred %+v", c, m.Cfg))
	}
	if len(sd) != side.NumTensors || len(side.Tensors) != side.NumTensors {
		fails = append(fails, fmt.Sprintf("weights.json: %d tensors (table %d), the file has %d", side.NumTensors, len(side.Tensors), len(sd)))
	}
	var params int64
	for name, t := range sd {
		params += int64(len(t.Data))
		st, ok := side.Tensors[name]
		if !ok || st.DType != "F32" || !slices.Equal(st.Shape, t.Shape) {
			fails = append(fails, fmt.Sprintf("weights.json: tensor %s: %+v, the file has %v", name, st, t.Shape))
		}
	}
	if params != side.NumParams {
		fails = append(fails, fmt.Sprintf("weights.json: %d parameters, the file has %d", side.NumParams, params))
	}
	decParams := int64(0)
	for name, t := range sd {
		if IsDecoderKey(name) {
			decParams += int64(len(t.Data))
		}
	}
	if decParams != m.NumParams() {
		fails = append(fails, fmt.Sprintf("decoder has %d parameters, the file's decoder keys %d", m.NumParams(), decParams))
	}
	raw, err := os.ReadFile(filepath.Join(dir, "weights.safetensors"))
	if err != nil {
		return append(fails, err.Error())
	}
	if h := sha256.Sum256(raw); hex.EncodeToString(h[:]) != side.SHA256 {
		fails = append(fails, fmt.Sprintf("weights.safetensors sha256 %x, weights.json says %s", h, side.SHA256))
	}
	return fails
}

// loadGolden loads a golden folder's weights file and checks it against
// weights.json.
func loadGolden(dir, weights string) (*Model, []string) {
	p := filepath.Join(dir, weights)
	sd, err := checkpoint.LoadFile(p, checkpoint.TorchOptions{})
	if err != nil {
		return nil, []string{err.Error()}
	}
	n := len(sd)
	m, err := FromStateDict(sd)
	if err != nil {
		return nil, []string{err.Error()}
	}
	if n != len(sd) {
		return nil, []string{"FromStateDict changed the state dict"}
	}
	return m, checkWeightsSidecar(dir, sd, m)
}

// fullDecode decodes decode_full's latents with m and the statistics of
// decode_full.json and returns every tensor the file holds, computed
// (intermediates from the decoder's trace), the video, and the sidecar.
func fullDecode(m *Model, dir string) (got map[string]tensor, video []float32, side *sidecar, err error) {
	return fullDecodeAs(m, dir, gemm.F32)
}

// fullDecodeAs is fullDecode at precision prec.
func fullDecodeAs(m *Model, dir string, prec gemm.Precision) (got map[string]tensor, video []float32, side *sidecar, err error) {
	full := filepath.Join(dir, "decode_full.safetensors")
	if side, err = readSidecar(filepath.Join(dir, "decode_full.json")); err != nil {
		return nil, nil, nil, err
	}
	mean, std, err := statsOf(side)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("decode_full.json: %w", err)
	}
	z, c, t, h, w, err := latentInput(full)
	if err != nil {
		return nil, nil, nil, err
	}
	tr := newTraces()
	if video, err = m.Decode(z, t, c, h, w, Options{Mean: mean, Std: std, Trace: tr.fn, Precision: prec}); err != nil {
		return nil, nil, nil, err
	}
	s := m.Cfg.SpatialScale()
	got = map[string]tensor{
		"video": videoTensor(video, m.Cfg.PixelFrames(0, t), h*s, w*s),
		// z is the input: compare it with what was decoded.
		"z": {shape: []int{c, t, h, w}, f: channelFirst(z, c, t, h, w)},
	}
	var heads, zd, c2 []string
	for k := 0; k < t; k++ {
		heads = append(heads, fmt.Sprintf("frame%d.head", k))
		zd = append(zd, fmt.Sprintf("frame%d.z_denorm", k))
		c2 = append(c2, fmt.Sprintf("frame%d.conv2_out", k))
	}
	got["z_denorm"] = tr.stack(zd...)
	got["conv2_out"] = tr.stack(c2...)
	got["video_unclamped"] = tr.stack(heads...)
	for k := range tr.frames {
		got[k] = tr.stack(k)
	}
	return got, video, side, nil
}

// checkFull checks decode_full of dir with model m: every tensor and
// intermediate, the sidecar's configuration, shapes and output statistics.
// It returns the decoded video and the statistics used.
func checkFull(m *Model, dir string) (r *goldenReport, video, mean, std []float32) {
	r = &goldenReport{}
	got, video, side, err := fullDecodeOnce(m, dir)
	if err != nil {
		r.fail("%v", err)
		return r, nil, nil, nil
	}
	r.add(nil, checkConfig(side, m.Cfg))
	mean, std, _ = statsOf(side)
	if z := got["z"]; !slices.Equal(side.LatentShape, z.shape) {
		r.fail("decode_full.json latent shape %v, z is %v", side.LatentShape, z.shape)
	}
	if v := got["video"]; !slices.Equal(side.VideoShape, v.shape) {
		r.fail("decode_full.json video shape %v, decoded %v", side.VideoShape, v.shape)
	}
	r.add(compareFile(filepath.Join(dir, "decode_full.safetensors"), got))

	// The sidecar's statistics of the unclamped output.
	un := got["video_unclamped"].f
	clamped := 0
	var sum, sq float64
	for _, v := range un {
		if v < -1 || v > 1 {
			clamped++
		}
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	frac := float64(clamped) / float64(len(un))
	if side.Clamped == nil || math.Abs(frac-*side.Clamped) > 1e-4 {
		r.fail("clamped fraction %v, decode_full.json says %v", frac, side.Clamped)
	}
	mu := sum / float64(len(un))
	sd := math.Sqrt(sq/float64(len(un)) - mu*mu)
	if side.OutputStd == nil || math.Abs(sd-*side.OutputStd) > 1e-4**side.OutputStd {
		r.fail("output std %v, decode_full.json says %v", sd, side.OutputStd)
	}
	return r, video, mean, std
}

// streamDecode decodes decode_stream's latents with m in the chunks of its
// sidecar, the cache carried, and returns every tensor the file holds,
// computed, and the concatenated video. opt.Mean nil: Wan's statistics.
func streamDecode(m *Model, dir string, opt Options) (got map[string]tensor, stream []float32, side *sidecar, fails []string) {
	fail := func(format string, a ...any) { fails = append(fails, fmt.Sprintf(format, a...)) }
	path := filepath.Join(dir, "decode_stream.safetensors")
	side, err := readSidecar(filepath.Join(dir, "decode_stream.json"))
	if err != nil {
		return nil, nil, nil, []string{err.Error()}
	}
	fails = append(fails, checkConfig(side, m.Cfg)...)
	smean, sstd, err := statsOf(side)
	if err != nil {
		return nil, nil, nil, append(fails, "decode_stream.json: "+err.Error())
	}
	emean, estd := opt.Mean, opt.Std
	if emean == nil {
		emean, estd = WanStats()
	}
	if !slices.Equal(emean, smean) || !slices.Equal(estd, sstd) {
		fail("decode_stream.json mean/std %v %v differ from the decoder's %v %v", smean, sstd, emean, estd)
	}
	z, c, t, h, w, err := latentInput(path)
	if err != nil {
		return nil, nil, nil, append(fails, err.Error())
	}
	if !slices.Equal(side.LatentShape, []int{c, t, h, w}) {
		fail("decode_stream.json latent shape %v, z is [%d %d %d %d]", side.LatentShape, c, t, h, w)
	}
	s := m.Cfg.SpatialScale()
	H, W := h*s, w*s
	hw := H * W
	n := c * h * w
	d, err := m.NewDecoder(opt)
	if err != nil {
		return nil, nil, nil, append(fails, err.Error())
	}
	got = map[string]tensor{"z": {shape: []int{c, t, h, w}, f: channelFirst(z, c, t, h, w)}}
	var parts [][]float32
	next := 0
	for i, ch := range side.Chunks {
		if ch.Index != i || ch.LatentStart != next || ch.LatentEnd <= ch.LatentStart || ch.LatentEnd > t || ch.LatentEnd-ch.LatentStart > side.ChunkFrames {
			fail("decode_stream.json chunk %d: %+v (chunks of %d)", i, ch, side.ChunkFrames)
			break
		}
		k := ch.LatentEnd - ch.LatentStart
		v, err := d.Decode(z[ch.LatentStart*n:ch.LatentEnd*n], k, c, h, w)
		if err != nil {
			return nil, nil, nil, append(fails, err.Error())
		}
		f := len(v) / 3 / hw
		if f != ch.Frames || ch.PixelEnd-ch.PixelStart != f || ch.PixelStart != d.PixelFrames()-f {
			fail("chunk %d decoded %d frames ending at %d, decode_stream.json says %+v", i, f, d.PixelFrames(), ch)
		}
		got[fmt.Sprintf("chunk%d.video", i)] = videoTensor(v, f, H, W)
		parts = append(parts, v)
		next = ch.LatentEnd
	}
	if next != t {
		fail("decode_stream.json chunks cover latents [0, %d), z has %d", next, t)
	}
	stream = concatFrames(parts, hw)
	F := len(stream) / 3 / hw
	got["video_u8"] = tensor{shape: []int{F, H, W, 3}, u8: VideoUint8(stream, F, H, W)}
	return got, stream, side, fails
}

// checkStream checks decode_stream of dir with model m: every tensor (each
// chunk decoded with the cache carried, the uint8 video). With whole, it
// also checks that the stream equals the whole-video decode bit for bit
// (full, when given, is decode_full's video of the same latents), as do the
// other chunkings the sidecar lists when full is given, and that the naive
// per-chunk reset gives the sidecar's frame counts.
func checkStream(m *Model, dir string, opt Options, whole bool, full []float32) *goldenReport {
	r := &goldenReport{}
	got, stream, side, fails := streamDecode(m, dir, opt)
	r.add(nil, fails)
	if got == nil {
		return r
	}
	path := filepath.Join(dir, "decode_stream.safetensors")
	r.add(compareFile(path, got))
	if !whole {
		return r
	}
	z, c, t, h, w, err := latentInput(path)
	if err != nil {
		r.fail("%v", err)
		return r
	}
	if full == nil {
		if full, err = m.Decode(z, t, c, h, w, opt); err != nil {
			r.fail("%v", err)
			return r
		}
	} else if len(side.OtherChunkings) == 0 {
		r.fail("decode_stream.json lists no other chunkings")
	}
	if side.ConcatEqualsFull == nil || !*side.ConcatEqualsFull {
		r.fail("decode_stream.json does not record concat_equals_decode_full_video")
	}
	if !slices.Equal(stream, full) {
		r.fail("streamed chunks differ from the whole-video decode")
	}
	for spec, eq := range side.OtherChunkings {
		var sizes []int
		if err := json.Unmarshal([]byte(spec), &sizes); err != nil || !eq {
			r.fail("decode_stream.json chunking %q: %v (equal %v)", spec, err, eq)
			continue
		}
		if full == nil {
			continue
		}
		v, err := decodeChunks(m, opt, z, sizes, c, h, w)
		if err != nil {
			r.fail("chunking %v: %v", sizes, err)
		} else if !slices.Equal(v, full) {
			r.fail("chunking %v differs from the whole-video decode", sizes)
		}
	}
	// The naive port (caches reset at every chunk) gives other frame
	// counts; Decoder is not that.
	n := c * h * w
	hw := len(full) / 3 / m.Cfg.PixelFrames(0, t)
	var naive []int
	for _, ch := range side.Chunks {
		k := ch.LatentEnd - ch.LatentStart
		v, err := m.Decode(z[ch.LatentStart*n:ch.LatentEnd*n], k, c, h, w, opt)
		if err != nil {
			r.fail("%v", err)
			return r
		}
		naive = append(naive, len(v)/3/hw)
	}
	if !slices.Equal(naive, side.NaiveFrames) {
		r.fail("per-chunk reset gives %v frames, decode_stream.json says %v", naive, side.NaiveFrames)
	}
	return r
}

// sameParams reports the first parameter that differs between two models
// (bit for bit), or "".
func sameParams(a, b *Model) string {
	pa, pb := a.Params(), b.Params()
	if len(pa) != len(pb) {
		return fmt.Sprintf("%d and %d parameters", len(pa), len(pb))
	}
	for i := range pa {
		if pa[i].Name != pb[i].Name || !slices.Equal(pa[i].Shape, pb[i].Shape) || !slices.Equal(*pa[i].Data, *pb[i].Data) {
			return pa[i].Name
		}
	}
	return ""
}

// goldenModels loads a golden folder's weights.pth and weights.safetensors
// (each checked against weights.json) and requires them to hold the same
// decoder bit for bit.
func goldenModels(t *testing.T, dir string) (pth, st *Model) {
	t.Helper()
	memo.Lock()
	defer memo.Unlock()
	g, ok := memo.models[dir]
	if !ok {
		var fp, fs []string
		g.pth, fp = loadGolden(dir, "weights.pth")
		g.st, fs = loadGolden(dir, "weights.safetensors")
		for _, f := range fp {
			g.fails = append(g.fails, "weights.pth: "+f)
		}
		for _, f := range fs {
			g.fails = append(g.fails, "weights.safetensors: "+f)
		}
		memo.models[dir] = g
	}
	for _, f := range g.fails {
		t.Error(f)
	}
	pth, st = g.pth, g.st
	if pth == nil || st == nil {
		t.FailNow()
	}
	if p := sameParams(pth, st); p != "" {
		t.Fatalf("weights.pth and weights.safetensors differ: %s", p)
	}
	return pth, st
}
func channelFirst(z []float32, c, t, h, w int) []float32 {
	n := h * w
	out := make([]float32, len(z))
	for f := 0; f < t; f++ {
		for ch := 0; ch < c; ch++ {
			copy(out[(ch*t+f)*n:(ch*t+f+1)*n], z[(f*c+ch)*n:(f*c+ch+1)*n])
		}
	}
	return out
}

// sliceFrames returns frames [f0, f1) of a video [3][F][H][W].
func sliceFrames(v []float32, F, f0, f1, hw int) []float32 {
	out := make([]float32, 0, 3*(f1-f0)*hw)
	for ch := 0; ch < 3; ch++ {
		out = append(out, v[(ch*F+f0)*hw:(ch*F+f1)*hw]...)
	}
	return out
}

// concatFrames joins videos [3][f_i][H][W] along time.
func concatFrames(parts [][]float32, hw int) []float32 {
	var out []float32
	for ch := 0; ch < 3; ch++ {
		for _, p := range parts {
			f := len(p) / 3 / hw
			out = append(out, p[ch*f*hw:(ch+1)*f*hw]...)
		}
	}
	return out
}

// decodeChunks streams z through one decoder in chunks of the given sizes
// and returns the concatenated video.
func decodeChunks(m *Model, opt Options, z []float32, sizes []int, c, h, w int) ([]float32, error) {
	d, err := m.NewDecoder(opt)
	if err != nil {
		return nil, err
	}
	n := c * h * w
	s := m.Cfg.SpatialScale()
	var parts [][]float32
	at := 0
	for _, k := range sizes {
		if (at+k)*n > len(z) {
			return nil, fmt.Errorf("chunks %v exceed %d latent frames", sizes, len(z)/n)
		}
		v, err := d.Decode(z[at*n:(at+k)*n], k, c, h, w)
		if err != nil {
			return nil, err
		}
		parts = append(parts, v)
		at += k
	}
	if at*n != len(z) {
		return nil, fmt.Errorf("chunks %v cover %d of %d latent frames", sizes, at, len(z)/n)
	}
	return concatFrames(parts, h*s*w*s), nil
}

// logReport logs the comparisons as a table (max errors per tensor).
func logReport(t *testing.T, r *goldenReport) {
	t.Helper()
	sort.Slice(r.cmps, func(i, j int) bool { return r.cmps[i].name < r.cmps[j].name })
	var worst cmp
	var b strings.Builder
	for _, c := range r.cmps {
		if c.rel > worst.rel {
			worst = c
		}
		if c.name == "video_u8" {
			fmt.Fprintf(&b, "  %-34s %d values off by 1\n", c.name, c.off)
			continue
		}
		fmt.Fprintf(&b, "  %-34s rel L2 %.2e  max abs %.2e\n", c.name, c.rel, c.maxAbs)
	}
	t.Logf("%d tensors compared; worst relative L2 %.2e (%s, max abs %.2e)\n%s", len(r.cmps), worst.rel, worst.name, worst.maxAbs, b.String())
	for _, f := range r.fails {
		t.Error(f)
	}
}

// TestGoldenVAE checks the tiny golden VAE (../shared/golden/vae):
// weights.pth and weights.safetensors load to the same decoder (both
// checked against weights.json); from the .pth, every tensor of
// decode_full (latents, de-normalised latents, conv2, every per-call
// intermediate, the video before and after the clamp) and of decode_stream
// (each chunk decoded with the cache carried, the uint8 video), the
// sidecars, and that the stream, and the sidecar's other chunkings, equal
// the whole-video decode; from the .safetensors, decode_stream again.
func TestGoldenVAE(t *testing.T) {
	dir := golden.VAE(t)
	pth, st := goldenModels(t, dir)
	t.Run("weights.pth", func(t *testing.T) {
		r, video, mean, std := checkFull(pth, dir)
		if video != nil {
			s := checkStream(pth, dir, Options{Mean: mean, Std: std}, true, video)
			r.add(s.cmps, s.fails)
		}
		if n := tensorCount(t, dir, "decode_full.safetensors", "decode_stream.safetensors"); len(r.cmps) != n {
			t.Errorf("%d tensors compared, the golden files hold %d", len(r.cmps), n)
		}
		logReport(t, r)
	})
	t.Run("weights.safetensors", func(t *testing.T) {
		side, err := readSidecar(filepath.Join(dir, "decode_stream.json"))
		if err != nil {
			t.Fatal(err)
		}
		mean, std, err := statsOf(side)
		if err != nil {
			t.Fatal(err)
		}
		logReport(t, checkStream(st, dir, Options{Mean: mean, Std: std}, false, nil))
	})
}

// TestGoldenPipelineVAE checks the 16-channel pipeline VAE
// (../shared/golden/pipeline/vae) with the real Wan statistics (the
// decoder's default, which must equal the sidecar's): its streaming decode
// from both weight files, the stream against the whole-video decode, and
// the naive reset's frame counts.
func TestGoldenPipelineVAE(t *testing.T) {
	dir := golden.PipelineVAE(t)
	pth, st := goldenModels(t, dir)
	t.Run("weights.pth", func(t *testing.T) {
		r := checkStream(pth, dir, Options{}, true, nil)
		if n := tensorCount(t, dir, "decode_stream.safetensors"); len(r.cmps) != n {
			t.Errorf("%d tensors compared, the golden file holds %d", len(r.cmps), n)
		}
		logReport(t, r)
	})
	t.Run("weights.safetensors", func(t *testing.T) {
		logReport(t, checkStream(st, dir, Options{}, false, nil))
	})
}

// tensorCount returns the number of tensors the golden files of dir hold.
func tensorCount(t *testing.T, dir string, files ...string) int {
	t.Helper()
	n := 0
	for _, f := range files {
		s, err := checkpoint.OpenSafetensors(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		n += len(s.Names())
		s.Close()
	}
	return n
}

// memo keeps what the golden tests load and decode, once per test binary:
// the models of each folder and decode_full's results.
var memo = struct {
	sync.Mutex
	models map[string]memoModels
	full   map[*Model]memoFull
}{models: map[string]memoModels{}, full: map[*Model]memoFull{}}

type memoModels struct {
	pth, st *Model
	fails   []string
}

type memoFull struct {
	got   map[string]tensor
	video []float32
	side  *sidecar
	err   error
}

// fullDecodeOnce is fullDecode, computed once per model (callers must not
// modify the results).
func fullDecodeOnce(m *Model, dir string) (map[string]tensor, []float32, *sidecar, error) {
	memo.Lock()
	defer memo.Unlock()
	r, ok := memo.full[m]
	if !ok {
		r.got, r.video, r.side, r.err = fullDecode(m, dir)
		memo.full[m] = r
	}
	return r.got, r.video, r.side, r.err
}
