package t5

import (
	"fmt"
	"math"
)

// RelativeBucket returns the position bucket of relative position r = key
// position − query position, as Wan's T5RelativeEmbedding does for the
// encoder (bidirectional): with nb = Buckets/2 buckets per direction and
// maxExact = nb/2,
//
//	bucket = (r > 0 ? nb : 0) + (|r| < maxExact ? |r| : min(nb−1, maxExact + ⌊ln(|r|/maxExact) / ln(MaxDist/maxExact) · (nb − maxExact)⌋))
//
// with the logarithm step in float32, as Wan computes it (at |r| = 16, 32,
// 64 the exact value is an integer and the float32 rounding decides).
// For umT5 (32 buckets, MaxDist 128): r = −16 → 10, +1 → 17, +16 → 26,
// |r| ≥ 128 → 15 or 31.
func (c Config) RelativeBucket(r int) int {
	nb := c.Buckets / 2
	b := 0
	if r > 0 {
		b = nb
	}
	n := r
	if n < 0 {
		n = -n
	}
	maxExact := nb / 2
	if n < maxExact {
		return b + n
	}
	q := float32(n) / float32(maxExact)
	lg := float32(math.Log(float64(q)))
	den := float32(math.Log(float64(c.MaxDist) / float64(maxExact)))
	large := maxExact + int(lg/den*float32(nb-maxExact))
	return b + min(large, nb-1)
}

// buckets returns the bucket of every r in [−(n−1), n−1], at index r+n−1.
func (c Config) buckets(n int) []int32 {
	out := make([]int32, 2*n-1)
	for i := range out {
		out[i] = int32(c.RelativeBucket(i - (n - 1)))
	}
	return out
}

// PositionBias returns block layer's position bias for n tokens,
// [Heads][n][n]: bias[h][i][j] = PosEmbedding[RelativeBucket(j−i)][h]
// (Wan's pos_embedding(n, n) without the batch dimension).
func (m *Model) PositionBias(layer, n int) ([]float32, error) {
	if layer < 0 || layer >= len(m.Blocks) {
		return nil, fmt.Errorf("t5: position bias: layer %d outside 0…%d", layer, len(m.Blocks)-1)
	}
	if n < 1 || n > MaxTokens {
		return nil, fmt.Errorf("t5: position bias: %d tokens, want 1…%d", n, MaxTokens)
	}
	c := m.Config
	bk := c.buckets(n)
	tab := m.Blocks[layer].PosEmbedding
	out := make([]float32, c.Heads*n*n)
	for h := 0; h < c.Heads; h++ {
		for i := 0; i < n; i++ {
			row := out[(h*n+i)*n : (h*n+i+1)*n]
			for j := range row {
				row[j] = tab[int(bk[j-i+n-1])*c.Heads+h]
			}
		}
	}
	return out, nil
}
