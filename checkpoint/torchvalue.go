package checkpoint

import (
	"fmt"
	"io"
	"math/big"
	"strings"

	"github.com/nlpodyssey/gopickle/types"
)

// maxValueDepth bounds the nesting TorchValue follows.
const maxValueDepth = 32

// TorchValue returns the top-level entry name of a PyTorch zip checkpoint
// that holds plain Python data (a training configuration, such as the
// "config" dictionary next to a "model" state dict) as Go values:
// map[string]any for dictionaries (string keys only), []any for lists and
// tuples, int64, float64, string, bool and nil. A tensor anywhere inside,
// an integer beyond int64, another object or nesting deeper than 32 is an
// error naming the entry and the key path. Read state dicts with
// LoadTorch.
func TorchValue(r io.ReaderAt, size int64, name string) (any, error) {
	top, _, err := unpickleTorch(r, size)
	if err != nil {
		return nil, err
	}
	entries, err := dictEntries(top)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: torch: top level: %w", err)
	}
	v, ok := lookup(entries, name)
	if !ok {
		return nil, fmt.Errorf("checkpoint: torch: no entry %q (have %s)", name, strings.Join(keysOf(entries), ", "))
	}
	out, err := plainValue(v, name, 0)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: torch: entry %w", err)
	}
	return out, nil
}

// TorchValueFile is TorchValue on the file at path.
func TorchValueFile(p, name string) (any, error) {
	return onTorchFile(p, func(r io.ReaderAt, size int64) (any, error) { return TorchValue(r, size, name) })
}

// plainValue converts an unpickled value of plain data; path names it in
// errors.
func plainValue(v any, path string, depth int) (any, error) {
	return convertValue(v, path, depth, nil, ", not plain data (dict, list, tuple, number, string, bool, None)")
}

// convertValue converts an unpickled value into Go data (nil, bool,
// string, float64, int64, []any, map[string]any, and what tensor makes of
// a tensor; a nil tensor refuses tensors); path names the value in errors,
// and other says what is read, for the error on anything else.
func convertValue(v any, path string, depth int, tensor func(*tensorRef) (any, error), other string) (any, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("%s: nested deeper than %d", path, maxValueDepth)
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool, string, float64:
		return x, nil
	case int:
		return int64(x), nil
	case *big.Int:
		if !x.IsInt64() {
			return nil, fmt.Errorf("%s: integer %s does not fit in 64 bits", path, x)
		}
		return x.Int64(), nil
	case *types.List, *types.Tuple:
		seq := x.(interface {
			Len() int
			Get(int) any
		})
		out := make([]any, seq.Len())
		for i := range out {
			e, err := convertValue(seq.Get(i), fmt.Sprintf("%s[%d]", path, i), depth+1, tensor, other)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case *types.Dict, *types.OrderedDict:
		entries, err := dictEntries(x)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out := make(map[string]any, len(entries))
		for _, e := range entries {
			ev, err := convertValue(e.v, path+"."+e.k, depth+1, tensor, other)
			if err != nil {
				return nil, err
			}
			out[e.k] = ev
		}
		return out, nil
	case *tensorRef:
		if tensor == nil {
			return nil, fmt.Errorf("%s: holds a tensor, not plain data", path)
		}
		t, err := tensor(x)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return t, nil
	}
	return nil, fmt.Errorf("%s: holds %T%s", path, v, other)
}
