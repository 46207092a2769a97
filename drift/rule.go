package drift

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Rule is one threshold on a statistic, STAT>VALUE or STAT<VALUE
// (e.g. seam_flicker>3): a block trips it when its record has the
// statistic and the statistic is beyond the value.
type Rule struct {
	Stat  string
	Below bool // STAT<VALUE (false: STAT>VALUE)
	Value float64
}

func (r Rule) String() string {
	op := ">"
	if r.Below {
		op = "<"
	}
	return r.Stat + op + strconv.FormatFloat(r.Value, 'g', -1, 64)
}

// Trips reports whether rec crosses the rule's threshold.
func (r Rule) Trips(rec Record) bool {
	v, ok := rec.Stat(r.Stat)
	if !ok {
		return false
	}
	if r.Below {
		return v < r.Value
	}
	return v > r.Value
}

// ParseRules reads a comma-separated list of rules, each STAT>VALUE or
// STAT<VALUE with STAT one of Names and VALUE a finite number; "" is no
// rule. what names the setting in errors (e.g. "--stop-on-drift").
func ParseRules(s, what string) ([]Rule, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Rule
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		p := strings.TrimSpace(part)
		i := strings.IndexAny(p, "<>")
		if i < 0 {
			return nil, fmt.Errorf("drift: %s %q: want STAT>VALUE or STAT<VALUE (e.g. seam_flicker>3), STAT one of %s", what, p, strings.Join(Names, ", "))
		}
		r := Rule{Stat: strings.TrimSpace(p[:i]), Below: p[i] == '<'}
		if !knownStat(r.Stat) {
			return nil, fmt.Errorf("drift: %s %q: unknown statistic %q (known: %s)", what, p, r.Stat, strings.Join(Names, ", "))
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(p[i+1:]), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("drift: %s %q: the threshold %q is not a finite number", what, p, strings.TrimSpace(p[i+1:]))
		}
		r.Value = v
		if seen[r.String()] {
			return nil, fmt.Errorf("drift: %s: %s given twice", what, r)
		}
		seen[r.String()] = true
		out = append(out, r)
	}
	return out, nil
}

// FormatRules is the inverse of ParseRules.
func FormatRules(rs []Rule) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

// Tripped returns the first rule rec trips, and whether one does.
func Tripped(rs []Rule, rec Record) (Rule, bool) {
	for _, r := range rs {
		if r.Trips(rec) {
			return r, true
		}
	}
	return Rule{}, false
}

// Watch are the thresholds collect reports the first crossing of, for a
// look at the videos concerned, not verdicts: a seam that changes three
// times as much as the frames inside a block, half the colour mass moved
// away from the first block's, latents half as large again as the first
// block's.
const Watch = "seam_flicker>3,hist_dist>0.5,latent_rms_ratio>1.5"
