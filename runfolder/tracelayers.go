package runfolder

import (
	"crypto/sha256"
	"encoding/hex"
	"io"

	"encoding/json"
	"fmt"
	"strconv"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/record"
)

// The per-layer attention trace file (attention_trace_layers.safetensors):
// the authors' export_temporal_attention_trace (temporal_attention_trace_v2)
// as safetensors, batch 1: per traced layer l, layers.l.mass and
// layers.l.source_token_count [1, H, F, F] (query frame, source frame),
// averaged over the query frame's traced calls, and layers.l.count [1, F];
// the metadata gives the format, the definition, frame_seq_length,
// max_frames, the layers, the heads and the traced denoising step.
const traceDefinition = "Full-softmax attention mass from current query tokens to K tokens, grouped by query latent frame and K provenance latent frame, with the corresponding visible K-token count per provenance frame."

// WriteTraceLayers writes lt to path atomically.
func WriteTraceLayers(path string, lt record.LayerTrace, step int) error {
	_, err := WriteTraceLayersSum(path, lt, step)
	return err
}

// WriteTraceLayersSum writes lt to path atomically and returns the file's
// SHA-256.
func WriteTraceLayersSum(path string, lt record.LayerTrace, step int) (string, error) {
	H, F := lt.Heads, lt.Frames
	var ts []checkpoint.WriteTensor
	for i, l := range lt.Layers {
		p := "layers." + strconv.Itoa(l) + "."
		ts = append(ts, checkpoint.WriteTensor{Name: p + "mass", Shape: []int{1, H, F, F}, Data: lt.Mass[i]},
			checkpoint.WriteTensor{Name: p + "source_token_count", Shape: []int{1, H, F, F}, Data: lt.Tokens[i]},
			checkpoint.WriteTensor{Name: p + "count", Shape: []int{1, F}, Data: lt.Count[i]})
	}
	layers, _ := json.Marshal(lt.Layers)
	meta := map[string]string{"format": "temporal_attention_trace_v2", "definition": traceDefinition,
		"frame_seq_length": strconv.Itoa(lt.TokensFrame), "max_frames": strconv.Itoa(F), "heads": strconv.Itoa(H),
		"layers": string(layers), "denoise_call": strconv.Itoa(step)}
	h := sha256.New()
	if err := atomicfile.Write(path, func(w io.Writer) error { return checkpoint.WriteSafetensors(io.MultiWriter(w, h), ts, meta) }); err != nil {
		return "", fmt.Errorf("%s: %w", FileTraceLayers, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// TraceLayersName names the per-layer trace saved in DirState with the
// checkpoint before block (the number of completed blocks).
func TraceLayersName(block int) string { return fmt.Sprintf("trace-layers-b%06d.safetensors", block) }

// ReadTraceLayersSum reads a per-layer trace saved with a checkpoint,
// checking its SHA-256 (want; "" skips the check).
func ReadTraceLayersSum(path, want string) (record.LayerTrace, error) {
	if want != "" {
		b, err := ReadRecord(path)
		if err != nil {
			return record.LayerTrace{}, err
		}
		if sum := sha256Hex(b); sum != want {
			return record.LayerTrace{}, fmt.Errorf("%s has SHA-256 %s, the checkpoint records %s (damaged, or of another block)", path, sum, want)
		}
	}
	return ReadTraceLayers(path)
}

// ReadTraceLayers reads a per-layer attention trace file.
func ReadTraceLayers(path string) (record.LayerTrace, error) {
	var lt record.LayerTrace
	s, err := checkpoint.OpenSafetensors(path)
	if err != nil {
		return lt, err
	}
	defer s.Close()
	md := s.Metadata
	if md["format"] != "temporal_attention_trace_v2" {
		return lt, fmt.Errorf("%s: format %q, want temporal_attention_trace_v2", path, md["format"])
	}
	if err := json.Unmarshal([]byte(md["layers"]), &lt.Layers); err != nil {
		return lt, fmt.Errorf("%s: layers %q: %v", path, md["layers"], err)
	}
	if lt.Heads, err = strconv.Atoi(md["heads"]); err != nil {
		return lt, fmt.Errorf("%s: heads %q", path, md["heads"])
	}
	if lt.Frames, err = strconv.Atoi(md["max_frames"]); err != nil {
		return lt, fmt.Errorf("%s: max_frames %q", path, md["max_frames"])
	}
	if lt.TokensFrame, err = strconv.Atoi(md["frame_seq_length"]); err != nil {
		return lt, fmt.Errorf("%s: frame_seq_length %q", path, md["frame_seq_length"])
	}
	for _, l := range lt.Layers {
		p := "layers." + strconv.Itoa(l) + "."
		var x [3][]float32
		for k, name := range []string{"mass", "source_token_count", "count"} {
			d, shape, err := s.Float32(p + name)
			if err != nil {
				return lt, fmt.Errorf("%s: %w", path, err)
			}
			want := []int{1, lt.Heads, lt.Frames, lt.Frames}
			if name == "count" {
				want = []int{1, lt.Frames}
			}
			if fmt.Sprint(shape) != fmt.Sprint(want) {
				return lt, fmt.Errorf("%s: %s%s has shape %v, want %v", path, p, name, shape, want)
			}
			x[k] = d
		}
		lt.Mass, lt.Tokens, lt.Count = append(lt.Mass, x[0]), append(lt.Tokens, x[1]), append(lt.Count, x[2])
	}
	return lt, nil
}
