package vae

import "fmt"

// FrameMajor converts latents [c][t][h][w] (the reference's channel-first
// layout, as in the golden files) to the [t][c][h][w] layout Decode reads.
func FrameMajor(z []float32, c, t, h, w int) []float32 {
	n := h * w
	if len(z) != c*t*n {
		panic(fmt.Sprintf("vae: FrameMajor: %d values for [%d][%d][%d][%d]", len(z), c, t, h, w))
	}
	out := make([]float32, len(z))
	for ch := 0; ch < c; ch++ {
		for f := 0; f < t; f++ {
			copy(out[(f*c+ch)*n:(f*c+ch+1)*n], z[(ch*t+f)*n:(ch*t+f+1)*n])
		}
	}
	return out
}

// Uint8 converts one value in [−1, 1] to a byte exactly as the authors do
// before handing frames to ffmpeg: trunc(clamp(x·0.5 + 0.5, 0, 1)·255) in
// float32, a truncating cast, not rounding (NaN gives 0).
func Uint8(x float32) uint8 {
	v := float32(x*0.5) + 0.5
	if !(v > 0) {
		return 0
	}
	if v > 1 {
		v = 1
	}
	return uint8(float32(v * 255))
}

// RGB24 writes one pixel frame rgb [3][h][w] as interleaved bytes
// [h][w][3] (ffmpeg's rgb24) into dst (len 3·h·w) with Uint8.
func RGB24(dst []uint8, rgb []float32, h, w int) {
	n := h * w
	if len(rgb) != 3*n || len(dst) != 3*n {
		panic(fmt.Sprintf("vae: RGB24: %d values and %d bytes for 3×%d×%d", len(rgb), len(dst), h, w))
	}
	r, g, b := rgb[:n], rgb[n:2*n], rgb[2*n:]
	for i := 0; i < n; i++ {
		dst[3*i], dst[3*i+1], dst[3*i+2] = Uint8(r[i]), Uint8(g[i]), Uint8(b[i])
	}
}

// VideoUint8 converts a video [3][f][h][w] to bytes [f][h][w][3] (the
// layout of the authors' frames for ffmpeg) with Uint8.
func VideoUint8(video []float32, f, h, w int) []uint8 {
	n := h * w
	if len(video) != 3*f*n {
		panic(fmt.Sprintf("vae: VideoUint8: %d values for [3][%d][%d][%d]", len(video), f, h, w))
	}
	out := make([]uint8, 3*f*n)
	for t := 0; t < f; t++ {
		o := out[3*t*n : 3*(t+1)*n]
		for ch := 0; ch < 3; ch++ {
			src := video[(ch*f+t)*n : (ch*f+t+1)*n]
			for i, v := range src {
				o[3*i+ch] = Uint8(v)
			}
		}
	}
	return out
}
