package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"taskledger/commands"
)

// MinFreeBytes is the free space on the data directory's file system below
// which /readyz answers disk_full: room for a few of the largest uploads
// (an 8 MiB evidence blob) and for bbolt to grow its file, so a load
// balancer stops sending writes before commits fail on ENOSPC.
const MinFreeBytes = 64 << 20

// The reasons of a 503 from /readyz (the body's "reason").
const (
	NotReadyShuttingDown  = "shutting_down"   // graceful shutdown began
	NotReadyFenced        = "fenced"          // a write or sync of the log failed: the process exits and restarts
	NotReadyLog           = "log_unavailable" // a failed commit's reload failed: nothing is accepted
	NotReadyNoSequencer   = "no_sequencer"    // cluster: this node knows no lease holder to forward to
	NotReadyNoQuorum      = "no_quorum"       // cluster: the lease cannot be read or renewed
	NotReadyDiskFull      = "disk_full"       // free space below MinFreeBytes
	NotReadyStorageFailed = "storage_failing" // the last write of the data directory failed and a probe still fails
)

// readyz answers 200 {"status":"ready"} when the node takes writes, else
// 503 {"status":"not_ready","reason":…} with Retry-After. It appends
// nothing and reads no projection: every check is a flag, a statfs, or
// (after a failed blob write) a small probe file.
func (s *Server) readyz(c echo.Context) error {
	if reason := s.notReady(); reason != "" {
		c.Response().Header().Set("Retry-After", "1")
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "reason": reason})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// notReady is the first reason the node cannot take writes, "" if none.
func (s *Server) notReady() string {
	if s.stopping.Load() {
		return NotReadyShuttingDown
	}
	if err := s.eng.Err(); errors.Is(err, commands.ErrFenced) {
		return NotReadyFenced
	} else if err != nil {
		return NotReadyLog
	}
	if s.ready != nil {
		if reason := s.ready(); reason != "" {
			return reason
		}
	}
	if s.free != nil {
		if free, err := s.free(); err == nil && free < MinFreeBytes {
			return NotReadyDiskFull
		}
	}
	if !s.storageReady() {
		return NotReadyStorageFailed
	}
	return ""
}
