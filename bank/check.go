package bank

import "fmt"

// Check validates blk exactly as Update would (shapes, NaN/±Inf, bfloat16
// overflow of keys and values with a BF16 payload, descriptor norms within
// MaxNorm2) and returns the error Update(blk) would return, without changing
// the bank. Update(blk) fails if and only if Check(blk) does, so a caller
// that updates several banks with one block each (one per layer) can check
// every block first and then update them all without a partial failure.
func (b *Bank) Check(blk Block) error {
	b.acquire()
	defer b.release()
	_, err := b.prepare(blk)
	// prepare fills only the transient candidates.
	b.dropBlockRefs()
	if err != nil {
		return fmt.Errorf("bank: update %d: %w", b.updates, err)
	}
	return nil
}
