//go:build linux

package node

import "syscall"

// diskSpace is the free (available to this process) and total bytes of
// the file system holding dir.
func diskSpace(dir string) (free, size uint64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), true
}
