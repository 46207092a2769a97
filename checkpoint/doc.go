// Package checkpoint reads and writes the tensor files the Wan backbone and
// the rollout use: safetensors (header JSON + raw little-endian data) and
// PyTorch zip checkpoints (.pt, unpickled with gopickle; storage offsets and
// strides applied here), plus LongLive's LoRA merge.
//
// All readers work on io.ReaderAt, bound every size from the header against
// the file before allocating, and name the tensor at fault in their errors.
// The zip CRC-32 of every PyTorch record is checked when it is read (by
// LoadTorch, and by OpenRaw's lazy reads, which read the whole record of a
// view and return the mismatch instead of the view's last bytes): a damaged
// file is an error naming the file, the tensor and the record, wrapping
// ErrChecksum. (Safetensors files carry no checksum.)
// Floating-point tensors (F8_E4M3, F8_E5M2, F16, BF16, F32, F64) are
// returned as float32 (or float64 on request), exactly but for F64;
// integer tensors (I8…I64, U8, BOOL) as int64. RawTensor.ReadFloat32
// decodes one tensor at a time (times its Scale, for fp8 weights stored
// scaled).
//
// State dicts are normalised by NormalizeKey: the released Self-Forcing,
// Causal-Forcing and LongLive checkpoints store the transformer either under
// a "generator" / "generator_ema" dict with "model." keys (FSDP checkpoints
// add "_fsdp_wrapped_module." segments) or as a plain "model."-prefixed
// state dict.
package checkpoint
