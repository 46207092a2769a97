package runfolder

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard is one worker's part of a prompt list: worker Index of Count.
// The split is deterministic and interleaved, as PyTorch's
// DistributedSampler(shuffle=False) deals a dataset out to ranks: the
// k-th selected prompt (k counted from 0 in the order of the list or of
// generate.prompt_indices) goes to shard k mod Count. Unlike the
// sampler, no prompt is dropped or repeated to even the shards out, and
// every shard uses the same seed (the authors' distributed runs seed
// rank r with seed + r, which would make a video depend on the number
// of workers). The zero value means "no sharding" (one shard of one).
type Shard struct {
	Index, Count int
}

// Whole reports whether s is the whole list (no sharding).
func (s Shard) Whole() bool { return s.Count <= 1 }

// String is "I/N", the --shard syntax.
func (s Shard) String() string {
	if s.Count == 0 {
		return "0/1"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Name is the shard's file-name stem, shard-I-of-N.
func (s Shard) Name() string {
	c := max(s.Count, 1)
	return fmt.Sprintf("shard-%d-of-%d", s.Index, c)
}

// Take returns the indices of selected (the list's selected prompt
// indices, in run order) that belong to shard s.
func (s Shard) Take(selected []int) []int {
	if s.Whole() {
		return append([]int(nil), selected...)
	}
	var out []int
	for k, i := range selected {
		if k%s.Count == s.Index {
			out = append(out, i)
		}
	}
	return out
}

// MaxShards bounds the shard count.
const MaxShards = 1 << 20

// Environment variables that give a worker its shard.
const (
	EnvJobIndex   = "JOB_COMPLETION_INDEX"   // Kubernetes Indexed Job
	EnvSlurmID    = "SLURM_ARRAY_TASK_ID"    // Slurm job array
	EnvSlurmMin   = "SLURM_ARRAY_TASK_MIN"   // the array's first ID
	EnvSlurmStep  = "SLURM_ARRAY_TASK_STEP"  // the array's ID step
	EnvSlurmCount = "SLURM_ARRAY_TASK_COUNT" // the array's task count
	EnvShards     = "DENSITYKV_SHARDS"       // the shard count (any launcher)
)

// ParseShard parses a --shard value: "I/N" (worker I of N, 0 ≤ I < N),
// or "env" / "env/N", which take I from the launcher's environment
// (getenv): JOB_COMPLETION_INDEX of a Kubernetes Indexed Job, or a Slurm
// array's (SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP
// (MIN 0 and STEP 1 when unset), and N from "env/N", else
// DENSITYKV_SHARDS, else SLURM_ARRAY_TASK_COUNT.
func ParseShard(v string, getenv func(string) string) (Shard, error) {
	if v == "" {
		return Shard{}, nil
	}
	if v == "env" || strings.HasPrefix(v, "env/") {
		return shardFromEnv(v, getenv)
	}
	is, ns, ok := strings.Cut(v, "/")
	if !ok {
		return Shard{}, fmt.Errorf("--shard %q: want I/N (worker I of N, counted from 0), env or env/N", v)
	}
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("--shard %q: want I/N with integers I and N", v)
	}
	return checkShard(v, i, n)
}

func checkShard(v string, i, n int) (Shard, error) {
	if n < 1 || n > MaxShards {
		return Shard{}, fmt.Errorf("--shard %s: the shard count %d must be 1..%d", v, n, MaxShards)
	}
	if i < 0 || i >= n {
		return Shard{}, fmt.Errorf("--shard %s: the shard index %d must be 0..%d (counted from 0)", v, i, n-1)
	}
	return Shard{Index: i, Count: n}, nil
}

func shardFromEnv(v string, getenv func(string) string) (Shard, error) {
	atoi := func(name string) (int, bool, error) {
		s := strings.TrimSpace(getenv(name))
		if s == "" {
			return 0, false, nil
		}
		x, err := strconv.Atoi(s)
		if err != nil {
			return 0, true, fmt.Errorf("--shard %s: %s=%q is not an integer", v, name, s)
		}
		return x, true, nil
	}
	job, hasJob, err := atoi(EnvJobIndex)
	if err != nil {
		return Shard{}, err
	}
	id, hasID, err := atoi(EnvSlurmID)
	if err != nil {
		return Shard{}, err
	}
	var i int
	var from string
	switch {
	case hasJob && hasID:
		return Shard{}, fmt.Errorf("--shard %s: both %s and %s are set; give the shard as I/N", v, EnvJobIndex, EnvSlurmID)
	case hasJob:
		i, from = job, EnvJobIndex
	case hasID:
		lo, _, err := atoi(EnvSlurmMin)
		if err != nil {
			return Shard{}, err
		}
		step, hasStep, err := atoi(EnvSlurmStep)
		if err != nil {
			return Shard{}, err
		}
		if !hasStep {
			step = 1
		}
		if step < 1 || id < lo || (id-lo)%step != 0 {
			return Shard{}, fmt.Errorf("--shard %s: %s=%d is not in the array %d, %d+%d, …", v, EnvSlurmID, id, lo, lo, step)
		}
		i, from = (id-lo)/step, EnvSlurmID
	default:
		return Shard{}, fmt.Errorf("--shard %s: neither %s (Kubernetes Indexed Job) nor %s (Slurm array) is set", v, EnvJobIndex, EnvSlurmID)
	}
	var n int
	if _, ns, ok := strings.Cut(v, "/"); ok {
		if n, err = strconv.Atoi(ns); err != nil {
			return Shard{}, fmt.Errorf("--shard %q: want env/N with an integer N", v)
		}
	} else if x, ok, err := atoi(EnvShards); err != nil {
		return Shard{}, err
	} else if ok {
		n = x
	} else if x, ok, err := atoi(EnvSlurmCount); err != nil {
		return Shard{}, err
	} else if ok {
		n = x
	} else {
		return Shard{}, fmt.Errorf("--shard %s: the shard count is not known: give env/N or set %s (or run in a Slurm array, %s)", v, EnvShards, EnvSlurmCount)
	}
	s, err := checkShard(fmt.Sprintf("%s (%s)", v, from), i, n)
	return s, err
}
