//go:build !linux && !darwin && !freebsd && !windows

package node

import "errors"

// freeSpace is unknown here: /readyz does not check the disk.
func freeSpace(string) (uint64, error) { return 0, errors.ErrUnsupported }
