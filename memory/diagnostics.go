package memory

// RetrievedSimilarities returns the cosine similarity of each frame
// Retrieved returns (same order) to the query descriptor of the current
// block (the authors' selected_similarities, in context order).
func (p *LongLiveRAG) RetrievedSimilarities() []float64 {
	out := make([]float64, len(p.s.picked))
	for i, j := range p.s.picked {
		if j < len(p.s.lastSim) {
			out[i] = p.s.lastSim[j]
		}
	}
	return out
}

// MiddleSources returns layer's compressed-middle tokens as global token
// indices (frame·TokensPerFrame + h·Width + w), in context order.
func (p *DeepForcing) MiddleSources(layer int) []int64 {
	return append([]int64(nil), p.mid[layer].Src...)
}
