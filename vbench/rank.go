package vbench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// A cell value as the tables show it: VBench's score × 100 with two
// decimals, held as an integer number of hundredths so that ranks and
// ties are decided on exactly what is displayed.
type cents int64

// display rounds v (a score × 100) to two decimals as Python's "%.2f"
// and Go's strconv do: the decimal nearest to the float64's exact value.
func display(v float64) (cents, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e12 {
		return 0, fmt.Errorf("value %v cannot be shown with two decimals", v)
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	w, err1 := strconv.ParseInt(whole, 10, 64)
	f, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil || len(frac) != 2 {
		return 0, fmt.Errorf("value %v: unexpected decimal form %q", v, s)
	}
	c := cents(w*100 + f)
	if neg {
		c = -c
	}
	return c, nil
}

func (c cents) String() string {
	s := ""
	if c < 0 {
		s, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", s, c/100, c%100)
}

// midRanks2 ranks values, higher first, with ties given the mean of the
// ranks they span (midranks), and returns twice each rank (an integer:
// a midrank is a whole or half number): 2·(#greater) + #equal + 1.
func midRanks2(vals []cents) []int {
	r := make([]int, len(vals))
	for i, v := range vals {
		greater, equal := 0, 0
		for _, w := range vals {
			switch {
			case w > v:
				greater++
			case w == v:
				equal++
			}
		}
		r[i] = 2*greater + equal + 1
	}
	return r
}

// competitionRanks ranks values, higher first, ties sharing the best rank
// of those they span and the next value skipping ("1, 1, 3"):
// 1 + #greater.
func competitionRanks(vals []cents) []int {
	r := make([]int, len(vals))
	for i, v := range vals {
		r[i] = 1
		for _, w := range vals {
			if w > v {
				r[i]++
			}
		}
	}
	return r
}

// ratio is a non-negative rational number num/den, an average of ranks.
type ratio struct{ num, den int64 }

// round2 rounds r to two decimals, half up, exactly.
func (r ratio) round2() cents {
	return cents((200*r.num + r.den) / (2 * r.den))
}

func (r ratio) float() float64 { return float64(r.num) / float64(r.den) }

// marks says, for each value, whether it is the best (1) or second-best
// (2) distinct value of the column, or neither (0); better is higher,
// or lower when lowerBetter.
func marks(vals []cents, lowerBetter bool) []int {
	better := func(a, b cents) bool {
		if lowerBetter {
			return a < b
		}
		return a > b
	}
	out := make([]int, len(vals))
	if len(vals) == 0 {
		return out
	}
	best := vals[0]
	for _, v := range vals {
		if better(v, best) {
			best = v
		}
	}
	second, has := cents(0), false
	for _, v := range vals {
		if v != best && (!has || better(v, second)) {
			second, has = v, true
		}
	}
	for i, v := range vals {
		switch {
		case v == best:
			out[i] = 1
		case has && v == second:
			out[i] = 2
		}
	}
	return out
}
