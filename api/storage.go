package api

import (
	"errors"
	"fmt"
	"sync/atomic"

	"taskledger/commands"
)

// storageHealth is whether the last write of the data directory failed
// (a blob, or a commit answered 503): /readyz answers 503 until a write
// succeeds again.
type storageHealth struct {
	failing atomic.Bool
}

// blobFailed turns a failed blob write (ENOSPC, EIO, …) into a 503 with
// Retry-After, never a 500, and marks the storage failing.
func (s *Server) blobFailed(err error) error {
	s.storage.failing.Store(true)
	s.log.Error().Err(err).Msg("blob write failed: answering 503 until writes succeed again")
	return fmt.Errorf("%w: %v", commands.ErrUnavailable, err)
}

// observeWrite records the outcome of a command for /readyz.
func (s *Server) observeWrite(err error) {
	switch {
	case err == nil:
		s.storage.failing.Store(false)
	case errors.Is(err, commands.ErrUnavailable):
		s.storage.failing.Store(true)
	}
}

// storageReady reports whether writes work: after a failure, a write
// probe in the data directory decides.
func (s *Server) storageReady() bool {
	if !s.storage.failing.Load() {
		return true
	}
	if s.blobs == nil || s.blobs.Probe() != nil {
		return false
	}
	s.storage.failing.Store(false)
	return true
}
