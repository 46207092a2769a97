package memory

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/riesz"
)

// loadCounter is the host's passes behind another type, as a device's
// are: the bank treats it as a backend (no host cache, Load on a
// snapshot read) and it counts the states loaded.
type loadCounter struct {
	bank.CPUPasses
	loads int
}

func (p *loadCounter) Load(int, riesz.Set, []float32, []float32) { p.loads++ }

// TestDensityKVNewBankOption: Options.NewBank builds every layer's bank;
// a policy on such banks gives the default policy's contexts and
// snapshot, and a snapshot loads into its banks (they stay the
// factory's, their passes get the states) and continues as the
// default's does. A factory's error names the layer.
func TestDensityKVNewBankOption(t *testing.T) {
	cfg := snapConfig()
	var built []*bank.Bank
	var passes []*loadCounter
	opt := Options{NewBank: func(c bank.Config) (*bank.Bank, error) {
		k, err := riesz.New(c.Sigma, c.P, c.Eps)
		if err != nil {
			return nil, err
		}
		p := &loadCounter{CPUPasses: bank.CPUPasses{K: k}}
		b, err := bank.NewWithPasses(c, p)
		built, passes = append(built, b), append(passes, p)
		return b, err
	}}
	ref, err := New(NameDensityKV, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewWith(NameDensityKV, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(built) != cfg.Layout.Layers {
		t.Fatalf("the factory built %d banks for %d layers", len(built), cfg.Layout.Layers)
	}
	same := func(what string, a, b []Context) {
		t.Helper()
		for l := range a {
			if a[l].Parts != b[l].Parts || !equal(a[l].K, b[l].K) || !equal(a[l].V, b[l].V) {
				t.Fatalf("%s layer %d: contexts differ (%+v vs %+v)", what, l, a[l].Parts, b[l].Parts)
			}
		}
	}
	sr, sg := newStream(cfg.Layout, 13), newStream(cfg.Layout, 13)
	for b := 0; b < 5; b++ {
		same("block", sr.block(t, ref, b, 1), sg.block(t, got, b, 1))
	}
	var a, b bytes.Buffer
	if err := ref.(Snapshotter).Save(&a); err != nil {
		t.Fatal(err)
	}
	if err := got.(Snapshotter).Save(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the snapshots differ")
	}
	if ref.(*DensityKV).Banks()[0].Updates() == 0 {
		t.Fatal("no bank update ran")
	}
	// Load the default policy's snapshot into a fresh policy on the
	// factory's banks.
	built, passes = nil, nil
	res, err := NewWith(NameDensityKV, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.(Snapshotter).Load(bytes.NewReader(a.Bytes())); err != nil {
		t.Fatal(err)
	}
	for l, bk := range res.(*DensityKV).Banks() {
		if bk != built[l] || passes[l].loads != cfg.Layout.Heads {
			t.Fatalf("layer %d: after the load, the bank is the factory's: %v, its passes loaded %d heads (want %d)",
				l, bk == built[l], passes[l].loads, cfg.Layout.Heads)
		}
	}
	sc := newStream(cfg.Layout, 13)
	sc.cleanK, sc.cleanV, sc.cleanQ = sr.cleanK, sr.cleanV, sr.cleanQ
	for b := 5; b < 8; b++ {
		same("resumed block", sr.block(t, ref, b, 1), sc.block(t, res, b, 1))
	}
	boom := errors.New("no device path")
	_, err = NewWith(NameDensityKV, cfg, Options{NewBank: func(bank.Config) (*bank.Bank, error) { return nil, boom }})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "layer 0") {
		t.Fatalf("a factory's error: %v", err)
	}
}
