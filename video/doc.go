// Package video writes the decoded frames of a generation as video: a
// playable mp4 segment per block as the frames arrive, with a lossless copy
// of each, and the whole video (and any prefix of it) as one continuous
// encode of the frames read back from the copies; or PNG frames where
// ffmpeg is missing.
//
// The encode is the DensityKV authors' (utils/streaming_rollout.py,
// decode_shards_to_mp4), which encodes the whole video once: raw rgb24
// frames piped to
//
//	ffmpeg -f rawvideo -pix_fmt rgb24 -s WxH -r 16 -i pipe:0 -an
//	       -c:v libx264 -preset medium -crf 18 -pix_fmt yuv420p -movflags +faststart out.mp4
//
// with the bytes made by vae.Uint8 (trunc(clamp(x·0.5+0.5, 0, 1)·255),
// a truncating cast, as the authors convert). The frame rate and the crf
// are Options.FPS and Options.CRF (DefaultFPS 16 and DefaultCRF 18 are
// the authors'). A Folder holds one video:
//
//	segments/segment_NNNNN.mp4   one per segment (a generation block), each a
//	                             playable mp4 as soon as its block is decoded
//	segments/list.txt            the finished segments, in order, for ffmpeg's
//	                             concat demuxer (ffplay -f concat -i list.txt)
//	<Lossless>/segment_NNNNN.mkv each segment's frames, lossless (FFV1)
//	video.mp4                    Video: one encode of every segment's frames
//	<name>.mp4                   Encode: one encode of the first n segments' frames
//	frames/frame_NNNNNN.png      instead of all of the above when ffmpeg is missing
//
// Why the lossless copies: joining the segments without re-encoding (the
// concat demuxer with -c copy) gives a video with a keyframe at every
// segment and timestamps that do not add up (an average rate below the
// 16 fps: 15.9996 in issue #26's run), and x264 cannot be resumed
// mid-stream, so a run stopped and resumed could not encode its video in
// one pass from frames it no longer has. The segments' ffmpeg therefore also writes each
// segment's frames losslessly, and Encode decodes the copies in order and
// pipes the frames into one libx264 encode with the authors' arguments:
// the timestamps are exactly i/FPS (r_frame_rate = avg_frame_rate =
// FPS/1, duration = frames/FPS), x264 places the keyframes as in one pass
// (every 250 frames at most, and at scene cuts), and since the encoder
// sees the same frames whether the video was written in one go or
// resumed, a resumed run gives the same video.mp4 bytes as an
// uninterrupted one (with the same ffmpeg build and thread count: the
// libx264 encode is deterministic). The copies are FFV1 version 3 (every
// frame a keyframe, per-slice CRCs) in Matroska, in bgr0, the rgb24 bytes
// reordered: exact, read back by ffmpeg alone, and well under the raw
// frames' size for video content (60 % of it measured on a noisy test
// pattern at 832×480; about the raw size, 3·W·H bytes a frame, for pure
// noise); the alternatives were larger (x264 -qp 0 in rgb), lossy (-qp 0
// in yuv420p drops the chroma the final encode subsamples itself) or
// slower to read back (PNG). They are only needed
// until the videos are encoded for good: the caller keeps them where a
// resumed run finds them (runfolder: state/video/) and removes them
// (RemoveLossless) once the run is complete. A copy that is missing can be
// written again from the segment's frames (BeginLossless).
//
// Each file is written under a temporary name (.partial.mp4, .partial.mkv)
// and renamed when complete, so a stopped run leaves only whole segments
// and copies behind. Metadata (Tag) goes into every mp4 (-metadata, with
// use_metadata_tags so that any key is kept).
//
// The libx264 encode is deterministic for the same frames, settings and
// ffmpeg build (same thread count), so re-encoding the same frames gives
// the same bytes; tests compare decoded frames (ReadFrames) as well.
package video
