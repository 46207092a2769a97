package drift

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// File is the name of the records in a run folder, one JSON line a block.
const File = "drift.jsonl"

// ErrTorn is wrapped by ReadFile's error for a last line without its end
// (a write that did not finish: the run failed or was killed).
var ErrTorn = errors.New("the last line is torn (a write that did not finish)")

// ReadFile reads drift.jsonl: the records in block order from 0. A torn
// last line is not decoded: ReadFile returns the complete records before it
// with an error wrapping ErrTorn.
func ReadFile(path string) ([]Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("drift: %w", err)
	}
	var out []Record
	for n := 1; len(b) > 0; n++ {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return out, fmt.Errorf("drift: %s line %d: %w", path, n, ErrTorn)
		}
		line := b[:i]
		b = b[i+1:]
		var r Record
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return out, fmt.Errorf("drift: %s line %d: %w", path, n, err)
		}
		if r.Block != len(out) {
			return out, fmt.Errorf("drift: %s line %d: block %d, want block %d", path, n, r.Block, len(out))
		}
		out = append(out, r)
	}
	return out, nil
}
