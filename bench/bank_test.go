package bench

import "testing"

func TestRunBankSmall(t *testing.T) {
	r, err := RunBank(BankOptions{Heads: 2, Candidates: 40, Capacity: 80, Dim: 16, Repeats: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.UpdateSeconds) != 3 || r.UpdateSecondsMedian <= 0 || r.PassGFLOPS <= 0 || r.PairsPerSecond <= 0 || r.PeakExtraBytes <= 0 {
		t.Fatalf("bad result %+v", r)
	}
	if r.BankBytes != int64(2*80)*int64(2*16*2+2*4+8+4) { // bf16 K/V, f32 ρ and b, int64 + int32
		t.Fatalf("bank bytes %d", r.BankBytes)
	}
	if _, err := RunBank(BankOptions{Heads: -1}); err == nil {
		t.Fatal("negative heads accepted")
	}
}
