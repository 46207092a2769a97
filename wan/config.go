package wan

import "github.com/densitykv/densitykv/wan/arch"

// Config is the architecture of a Wan2.1-style DiT (package arch: plain
// data that run configurations hold too).
type Config = arch.Config

// DefaultConfig is Wan2.1-T2V-1.3B (arch.DefaultConfig).
func DefaultConfig() Config { return arch.DefaultConfig() }

// TinyConfig is the configuration of the golden reference data
// (arch.TinyConfig).
func TinyConfig() Config { return arch.TinyConfig() }
