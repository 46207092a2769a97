package checkpoint

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// zipMagic starts every zip archive (its first local file header).
const zipMagic = "PK\x03\x04"

// MaxTorchTensorBytes bounds one storage record of a .pt file (16 GiB).
const MaxTorchTensorBytes = 16 << 30

// TorchOptions selects what LoadTorch returns.
type TorchOptions struct {
	// Entry is the top-level dictionary entry holding the state dict
	// ("generator", "generator_ema", "generator_lora", "model", …). Empty
	// means the first present of "generator", "generator_ema", "model",
	// "state_dict", else the top-level dictionary itself.
	Entry string
}

// storageRef is a storage named by a persistent id; its bytes are read on
// demand from the zip record.
type storageRef struct {
	dtype DType
	key   string
	numel int64
}

// tensorRef is a tensor rebuilt by torch._utils._rebuild_tensor_v2.
type tensorRef struct {
	st     *storageRef
	offset int64
	size   []int
	stride []int64
}

type storageClass struct{ dtype DType }

type rebuildTensor struct{}

// Call implements torch._utils._rebuild_tensor(_v2)(storage, offset, size,
// stride, ...).
func (rebuildTensor) Call(args ...interface{}) (interface{}, error) {
	if len(args) < 4 {
		return nil, fmt.Errorf("_rebuild_tensor_v2: %d arguments, want at least 4", len(args))
	}
	st, ok := args[0].(*storageRef)
	if !ok {
		return nil, fmt.Errorf("_rebuild_tensor_v2: storage argument is %T", args[0])
	}
	off, ok := args[1].(int)
	if !ok || off < 0 {
		return nil, fmt.Errorf("_rebuild_tensor_v2: storage offset %v invalid", args[1])
	}
	size, err := intTuple(args[2])
	if err != nil {
		return nil, fmt.Errorf("_rebuild_tensor_v2: size: %w", err)
	}
	stride, err := intTuple(args[3])
	if err != nil {
		return nil, fmt.Errorf("_rebuild_tensor_v2: stride: %w", err)
	}
	if len(size) != len(stride) {
		return nil, fmt.Errorf("_rebuild_tensor_v2: size %v and stride %v differ in rank", size, stride)
	}
	t := &tensorRef{st: st, offset: int64(off), size: make([]int, len(size)), stride: make([]int64, len(size))}
	for i := range size {
		if size[i] < 0 || stride[i] < 0 {
			return nil, fmt.Errorf("_rebuild_tensor_v2: negative size %v or stride %v", size, stride)
		}
		t.size[i], t.stride[i] = size[i], int64(stride[i])
	}
	return t, nil
}

type rebuildParameter struct{}

// Call implements torch._utils._rebuild_parameter(data, requires_grad, hooks).
func (rebuildParameter) Call(args ...interface{}) (interface{}, error) {
	if len(args) < 1 {
		return nil, fmt.Errorf("_rebuild_parameter: no arguments")
	}
	return args[0], nil
}

func intTuple(v interface{}) ([]int, error) {
	var items []interface{}
	switch t := v.(type) {
	case *types.Tuple:
		for i := 0; i < t.Len(); i++ {
			items = append(items, t.Get(i))
		}
	case *types.List:
		for i := 0; i < t.Len(); i++ {
			items = append(items, t.Get(i))
		}
	default:
		return nil, fmt.Errorf("tuple expected, got %T", v)
	}
	out := make([]int, len(items))
	for i, it := range items {
		n, ok := it.(int)
		if !ok {
			return nil, fmt.Errorf("tuple of ints expected, item %d is %T", i, it)
		}
		out[i] = n
	}
	return out, nil
}

func torchFindClass(module, name string) (interface{}, error) {
	switch module + "." + name {
	case "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor":
		return rebuildTensor{}, nil
	case "torch._utils._rebuild_parameter":
		return rebuildParameter{}, nil
	case "torch.FloatStorage":
		return storageClass{F32}, nil
	case "torch.DoubleStorage":
		return storageClass{F64}, nil
	case "torch.HalfStorage":
		return storageClass{F16}, nil
	case "torch.BFloat16Storage":
		return storageClass{BF16}, nil
	case "torch.LongStorage":
		return storageClass{I64}, nil
	case "torch.IntStorage":
		return storageClass{I32}, nil
	case "torch.ShortStorage":
		return storageClass{I16}, nil
	case "torch.CharStorage":
		return storageClass{I8}, nil
	case "torch.ByteStorage":
		return storageClass{U8}, nil
	case "torch.BoolStorage":
		return storageClass{Bool}, nil
	case "torch.Float8_e4m3fnStorage":
		return storageClass{F8E4M3}, nil
	case "torch.Float8_e5m2Storage":
		return storageClass{F8E5M2}, nil
	}
	return types.NewGenericClass(module, name), nil
}

// torchFile is an opened PyTorch zip checkpoint.
type torchFile struct {
	records map[string]*zip.File // "data/<key>" suffix → record
	cache   map[string][]byte
	size    int64 // of the archive
}

// LoadTorch reads a PyTorch zip checkpoint (torch.save's default format
// since 1.6) of size bytes from r and returns the state dict selected by
// opt, with keys normalised by NormalizeKey and every tensor converted to
// float32 (strides and storage offsets applied).
func LoadTorch(r io.ReaderAt, size int64, opt TorchOptions) (StateDict, error) {
	top, tf, err := unpickleTorch(r, size)
	if err != nil {
		return nil, err
	}
	sd, want, err := selectEntry(top, opt)
	if err != nil {
		return nil, err
	}
	out := make(StateDict, len(sd))
	refs := map[string]int{} // remaining tensors per storage: raw bytes are dropped after the last
	for _, e := range sd {
		t, ok := e.v.(*tensorRef)
		if !ok {
			return nil, fmt.Errorf("checkpoint: torch: entry %q: key %q holds %T, not a tensor", want, e.k, e.v)
		}
		refs[t.st.key]++
	}
	for _, e := range sd {
		t := e.v.(*tensorRef)
		data, err := tf.materialize(t)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: torch: tensor %q: %w", e.k, err)
		}
		if refs[t.st.key]--; refs[t.st.key] == 0 {
			delete(tf.cache, t.st.key)
		}
		nk := NormalizeKey(e.k)
		if _, dup := out[nk]; dup {
			return nil, fmt.Errorf("checkpoint: torch: keys normalise to the same name %q", nk)
		}
		out[nk] = &Tensor{Shape: append([]int(nil), t.size...), Data: data}
	}
	return out, nil
}

// selectEntry returns the state dict entries that opt selects from the
// unpickled top level, and the entry's name for messages.
func selectEntry(top interface{}, opt TorchOptions) (sd []kv, want string, err error) {
	entries, err := dictEntries(top)
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint: torch: top level: %w", err)
	}
	want = opt.Entry
	if want == "" {
		for _, k := range AutoEntries {
			if v, ok := lookup(entries, k); ok {
				if d, err := dictEntries(v); err == nil {
					if d == nil {
						break // an empty dictionary: the top level, as before
					}
					return d, k, nil
				}
			}
		}
		return entries, TopLevel, nil
	}
	v, ok := lookup(entries, want)
	if !ok {
		return nil, "", fmt.Errorf("checkpoint: torch: no entry %q (have %s)", want, strings.Join(keysOf(entries), ", "))
	}
	if sd, err = dictEntries(v); err != nil {
		return nil, "", fmt.Errorf("checkpoint: torch: entry %q: %w", want, err)
	}
	return sd, want, nil
}

// TorchFileEntries is TorchEntries of the file at path (an error for a
// file that is not a PyTorch zip checkpoint, e.g. safetensors).
func TorchFileEntries(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return TorchEntries(f, st.Size())
}

// TorchEntries lists the top-level entries of a PyTorch zip checkpoint that
// are dictionaries of tensors.
func TorchEntries(r io.ReaderAt, size int64) ([]string, error) {
	top, _, err := unpickleTorch(r, size)
	if err != nil {
		return nil, err
	}
	entries, err := dictEntries(top)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: torch: top level: %w", err)
	}
	var out []string
	for _, e := range entries {
		if d, err := dictEntries(e.v); err == nil && len(d) > 0 {
			if _, ok := d[0].v.(*tensorRef); ok {
				out = append(out, e.k)
			}
		}
	}
	return out, nil
}

func unpickleTorch(r io.ReaderAt, size int64) (top interface{}, tf *torchFile, err error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		var magic [4]byte
		if n, _ := r.ReadAt(magic[:], 0); n == 4 && string(magic[:]) == zipMagic {
			return nil, nil, fmt.Errorf("checkpoint: torch: truncated or corrupt zip archive (%d bytes, no readable central directory): %v: %w", size, err, ErrFormat)
		}
		return nil, nil, fmt.Errorf("checkpoint: torch: not a zip archive (PyTorch checkpoints are read in torch.save's zip format, PyTorch ≥ 1.6): %v: %w", err, ErrFormat)
	}
	tf = &torchFile{records: map[string]*zip.File{}, cache: map[string][]byte{}, size: size}
	var pkl *zip.File
	for _, f := range zr.File {
		dir, base := path.Split(f.Name)
		if base == "data.pkl" && strings.Count(f.Name, "/") <= 1 {
			pkl = f
		}
		if strings.HasSuffix(dir, "data/") {
			tf.records[base] = f
		}
		if base == "constants.pkl" {
			return nil, nil, fmt.Errorf("checkpoint: torch: TorchScript archives are not supported")
		}
	}
	if pkl == nil {
		return nil, nil, fmt.Errorf("checkpoint: torch: data.pkl not found in the archive: %w", ErrFormat)
	}
	if pkl.UncompressedSize64 > MaxHeaderBytes {
		return nil, nil, fmt.Errorf("checkpoint: torch: data.pkl of %d bytes exceeds %d: %w", pkl.UncompressedSize64, MaxHeaderBytes, ErrFormat)
	}
	rc, err := pkl.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: torch: data.pkl: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(rc, MaxHeaderBytes+1)) // to the end: the CRC-32 is checked
	rc.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: torch: %w", recordError(pkl, err))
	}
	u := pickle.NewUnpickler(bytes.NewReader(raw))
	u.FindClass = torchFindClass
	u.PersistentLoad = func(id interface{}) (interface{}, error) {
		t, ok := id.(*types.Tuple)
		if !ok || t.Len() < 5 {
			return nil, fmt.Errorf("persistent id %v is not a 5-tuple", id)
		}
		if s, _ := t.Get(0).(string); s != "storage" {
			return nil, fmt.Errorf("persistent id kind %v, want storage", t.Get(0))
		}
		sc, ok := t.Get(1).(storageClass)
		if !ok {
			return nil, fmt.Errorf("unsupported storage type %v", t.Get(1))
		}
		key, ok1 := t.Get(2).(string)
		n, ok2 := t.Get(4).(int)
		if !ok1 || !ok2 || n < 0 {
			return nil, fmt.Errorf("storage id %v malformed", id)
		}
		rec, ok := tf.records[key]
		if !ok {
			return nil, fmt.Errorf("storage record data/%s missing", key)
		}
		need := uint64(n) * uint64(sc.dtype.Size())
		if uint64(n) > MaxTorchTensorBytes || need > MaxTorchTensorBytes || rec.UncompressedSize64 < need {
			return nil, fmt.Errorf("storage data/%s holds %d bytes, need %d for %d %s values", key, rec.UncompressedSize64, need, n, sc.dtype)
		}
		return &storageRef{dtype: sc.dtype, key: key, numel: int64(n)}, nil
	}
	top, err = safeLoad(&u)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: torch: unpickling data.pkl: %v: %w", err, ErrFormat)
	}
	return top, tf, nil
}

func (tf *torchFile) bytes(s *storageRef) ([]byte, error) {
	if b, ok := tf.cache[s.key]; ok {
		return b, nil
	}
	rec := tf.records[s.key]
	if err := checkRecord(rec, tf.size); err != nil {
		return nil, err
	}
	rc, err := rec.Open()
	if err != nil {
		return nil, fmt.Errorf("storage record %s: %w", rec.Name, err)
	}
	defer rc.Close()
	need := s.numel * int64(s.dtype.Size())
	b := make([]byte, need)
	if _, err := io.ReadFull(rc, b); err != nil {
		return nil, recordError(rec, err)
	}
	// Read the record to its end: the zip reader checks its CRC-32 there.
	if err := drainRecord(rec, rc); err != nil {
		return nil, err
	}
	tf.cache[s.key] = b
	return b, nil
}

// drainRecord reads the rest of a zip record opened with rec.Open, so that
// the zip reader checks the record's CRC-32 (it does so at the end of the
// data), and returns what it found, naming the record.
func drainRecord(rec *zip.File, rc io.Reader) error {
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return recordError(rec, err)
	}
	return nil
}

// recordError names the zip record of a read error; a CRC-32 mismatch says
// that the file is damaged and wraps ErrChecksum.
func recordError(rec *zip.File, err error) error {
	if errors.Is(err, zip.ErrChecksum) {
		return fmt.Errorf("storage record %s: its CRC-32 does not match the zip directory's %08x (the file is damaged): %w", rec.Name, rec.CRC32, ErrChecksum)
	}
	return fmt.Errorf("storage record %s: %w", rec.Name, err)
}

// materialize gathers a strided view into a contiguous float32 slice.
func (tf *torchFile) materialize(t *tensorRef) ([]float32, error) {
	if !t.st.dtype.IsFloat() {
		return nil, fmt.Errorf("dtype %s is not a floating-point type", t.st.dtype)
	}
	n := numel(t.size)
	if n == 0 {
		return []float32{}, nil
	}
	maxIdx := t.offset
	for i, s := range t.size {
		if t.stride[i] > 0 && int64(s-1) > (math.MaxInt64-maxIdx)/t.stride[i] {
			return nil, fmt.Errorf("size %v stride %v overflow", t.size, t.stride)
		}
		maxIdx += int64(s-1) * t.stride[i]
	}
	if maxIdx >= t.st.numel {
		return nil, fmt.Errorf("view offset %d size %v stride %v reaches element %d of a %d-element storage", t.offset, t.size, t.stride, maxIdx, t.st.numel)
	}
	raw, err := tf.bytes(t.st)
	if err != nil {
		return nil, err
	}
	es := int64(t.st.dtype.Size())
	out := make([]float32, n)
	idx := make([]int, len(t.size))
	for k := int64(0); k < n; k++ {
		e := t.offset
		for d, i := range idx {
			e += int64(i) * t.stride[d]
		}
		out[k] = t.st.dtype.float32At(raw[e*es:])
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < t.size[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out, nil
}

type kv struct {
	k string
	v interface{}
}

func dictEntries(v interface{}) ([]kv, error) {
	var out []kv
	switch d := v.(type) {
	case *types.Dict:
		for _, e := range *d {
			k, ok := e.Key.(string)
			if !ok {
				return nil, fmt.Errorf("dictionary key %v is not a string", e.Key)
			}
			out = append(out, kv{k, e.Value})
		}
	case *types.OrderedDict:
		for el := d.List.Front(); el != nil; el = el.Next() {
			e := el.Value.(*types.OrderedDictEntry)
			k, ok := e.Key.(string)
			if !ok {
				return nil, fmt.Errorf("dictionary key %v is not a string", e.Key)
			}
			out = append(out, kv{k, e.Value})
		}
	default:
		return nil, fmt.Errorf("%T is not a dictionary", v)
	}
	return out, nil
}

func lookup(e []kv, k string) (interface{}, bool) {
	for _, x := range e {
		if x.k == k {
			return x.v, true
		}
	}
	return nil, false
}

func keysOf(e []kv) []string {
	out := make([]string, len(e))
	for i, x := range e {
		out[i] = x.k
	}
	sort.Strings(out)
	return out
}

// LoadTorchFile is LoadTorch on the file at path.
func LoadTorchFile(p string, opt TorchOptions) (StateDict, error) {
	return onTorchFile(p, func(r io.ReaderAt, size int64) (StateDict, error) { return LoadTorch(r, size, opt) })
}

// onTorchFile opens the checkpoint at path and runs read on it, naming the
// file in read's errors.
func onTorchFile[T any](p string, read func(r io.ReaderAt, size int64) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(p)
	if err != nil {
		return zero, fmt.Errorf("checkpoint: torch: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return zero, fmt.Errorf("checkpoint: torch: %w", err)
	}
	v, err := read(f, st.Size())
	if err != nil {
		return zero, fmt.Errorf("%w (file %s)", err, p)
	}
	return v, nil
}

// safeLoad runs the unpickler, turning a panic inside it (malformed input)
// into an error.
func safeLoad(u *pickle.Unpickler) (top interface{}, err error) {
	defer func() {
		if r := recover(); r != nil {
			top, err = nil, fmt.Errorf("unpickler panic: %v", r)
		}
	}()
	return u.Load()
}
