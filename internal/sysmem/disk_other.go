//go:build !unix

package sysmem

func freeDisk(string) int64 { return -1 }
