//go:build unix

package sysmem

import "golang.org/x/sys/unix"

func freeDisk(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
