//go:build linux || darwin || freebsd

package node

import "golang.org/x/sys/unix"

// freeSpace returns the bytes an unprivileged writer may still use on the
// file system holding dir (statfs: available blocks × block size).
func freeSpace(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil //nolint:gosec // both non-negative
}
