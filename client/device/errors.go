package device

import (
	"errors"
	"fmt"
)

var (
	// ErrNeedsPerson means a task (or claim) needs an operator's decision;
	// nothing new is claimed until `agent resolve` clears it.
	ErrNeedsPerson = errors.New("device: a task needs a person")
	// ErrNoActiveClaim means the call needs a claim the device does not
	// hold.
	ErrNoActiveClaim = errors.New("device: no active claim")
	// ErrPendingOther means another request is pending and must be replayed
	// to a definitive answer first.
	ErrPendingOther = errors.New("device: another request is pending")
	// ErrClaimLost means an unstarted claim ended on the server (lease
	// expired, re-claimed, canceled); nothing ran, the claim is dropped.
	ErrClaimLost = errors.New("device: claim lost before start")
	// ErrEvidence means the evidence file is not acceptable or changed.
	ErrEvidence = errors.New("device: evidence refused")
	// ErrIdentity means the enrollment input is not acceptable.
	ErrIdentity = errors.New("device: invalid identity")
)

// NeedsPersonError names what needs a person and why.
type NeedsPersonError struct {
	// ID is the manual entry's id (task id, or claim key).
	ID string
	// Code is the server's error code, when there was one.
	Code   string
	Reason string
}

func (e *NeedsPersonError) Error() string {
	return fmt.Sprintf("device: %s needs a person: %s", e.ID, e.Reason)
}

// Unwrap makes errors.Is(err, ErrNeedsPerson) true.
func (e *NeedsPersonError) Unwrap() error { return ErrNeedsPerson }
