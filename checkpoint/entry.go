package checkpoint

import (
	"fmt"
	"os"
)

// AutoEntries is the order in which LoadTorch looks for the state dict when
// TorchOptions.Entry is empty: the non-EMA generator first, as the
// released inference scripts do without --use_ema (Self-Forcing's
// inference.py, the DensityKV authors' use_ema: false). Run Self-Forcing
// from its EMA weights by naming "generator_ema".
var AutoEntries = []string{"generator", "generator_ema", "model", "state_dict"}

// TopLevel is the entry name TorchEntry reports for a state dict that is
// the checkpoint's top-level dictionary itself.
const TopLevel = "(top level)"

// TorchEntry returns the top-level entry that LoadFile(path, opt) reads the
// state dict from: opt.Entry when set (an error when the checkpoint has no
// such entry), else the first present of AutoEntries, else TopLevel; and
// "" for a safetensors file. It reads the checkpoint's pickle only, not
// its tensors.
func TorchEntry(path string, opt TorchOptions) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("checkpoint: entry: %w", err)
	}
	defer f.Close()
	var magic [4]byte
	if n, _ := f.ReadAt(magic[:], 0); n != 4 || string(magic[:]) != zipMagic {
		return "", nil
	}
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("checkpoint: entry: %w", err)
	}
	top, _, err := unpickleTorch(f, st.Size())
	if err != nil {
		return "", fmt.Errorf("%w (file %s)", err, path)
	}
	_, name, err := selectEntry(top, opt)
	if err != nil {
		return "", fmt.Errorf("%w (file %s)", err, path)
	}
	return name, nil
}
