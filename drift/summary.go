package drift

import (
	"sort"
)

// StatSummary summarises one statistic over a run's blocks.
type StatSummary struct {
	Blocks   int     `json:"blocks"` // blocks that have the statistic
	Median   float64 `json:"median"`
	Max      float64 `json:"max"`
	MaxBlock int     `json:"max_block"` // the first block at the maximum
	Last     float64 `json:"last"`
}

// Summary is a run's drift in a few numbers: each statistic's summary and,
// for each rule, the first block that trips it (absent: none does).
type Summary struct {
	Blocks    int                    `json:"blocks"`
	Stats     map[string]StatSummary `json:"stats"`
	FirstOver map[string]int         `json:"first_over,omitempty"`
}

// Summarize summarises records (in block order) against rules.
func Summarize(recs []Record, rules []Rule) Summary {
	s := Summary{Blocks: len(recs), Stats: map[string]StatSummary{}}
	for _, name := range Names {
		var vs []float64
		var ss StatSummary
		for _, r := range recs {
			v, ok := r.Stat(name)
			if !ok {
				continue
			}
			if len(vs) == 0 || v > ss.Max {
				ss.Max, ss.MaxBlock = v, r.Block
			}
			vs = append(vs, v)
			ss.Last = v
		}
		if len(vs) == 0 {
			continue
		}
		ss.Blocks = len(vs)
		sort.Float64s(vs)
		if m := len(vs) / 2; len(vs)%2 == 1 {
			ss.Median = vs[m]
		} else {
			ss.Median = (vs[m-1] + vs[m]) / 2
		}
		s.Stats[name] = ss
	}
	for _, rule := range rules {
		for _, r := range recs {
			if rule.Trips(r) {
				if s.FirstOver == nil {
					s.FirstOver = map[string]int{}
				}
				s.FirstOver[rule.String()] = r.Block
				break
			}
		}
	}
	return s
}
