// Package video writes the decoded frames of a generation as video: mp4
// segments encoded by ffmpeg as the frames arrive, joined into one
// video.mp4 without re-encoding, or PNG frames where ffmpeg is missing.
//
// The encode is the DensityKV authors' (utils/streaming_rollout.py,
// decode_shards_to_mp4): raw rgb24 frames piped to
//
//	ffmpeg -f rawvideo -pix_fmt rgb24 -s WxH -r 16 -i pipe:0 -an
//	       -c:v libx264 -preset medium -crf 18 -pix_fmt yuv420p -movflags +faststart out.mp4
//
// with the bytes made by vae.Uint8 (trunc(clamp(x·0.5+0.5, 0, 1)·255),
// a truncating cast, as the authors convert). A Folder holds one video:
//
//	segments/segment_NNNNN.mp4   one per segment (a generation block), each a
//	                             playable mp4 as soon as its block is decoded
//	segments/list.txt            the finished segments, in order, for ffmpeg's
//	                             concat demuxer (ffplay -f concat -i list.txt)
//	video.mp4                    Join: the segments concatenated with -c copy
//	frames/frame_NNNNNN.png      instead of all of the above when ffmpeg is missing
//
// Each file is written under a temporary name and renamed when complete, so
// a stopped run leaves only whole segments behind. Metadata (Tag) goes into
// every mp4 (-metadata, with use_metadata_tags so that any key is kept).
//
// The libx264 encode is deterministic for the same frames, settings and
// ffmpeg build (same thread count), so re-encoding the same frames gives
// the same bytes; tests compare decoded frames (ReadFrames) all the same.
package video
