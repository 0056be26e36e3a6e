package client

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrInvalidBaseURL is returned when the server URL is not allowed:
	// plain http to a non-loopback host, user info, query or fragment, or a
	// scheme other than http/https.
	ErrInvalidBaseURL = errors.New("client: invalid server URL")
	// ErrInvalidConfig is returned by New for a missing device id or token.
	ErrInvalidConfig = errors.New("client: invalid configuration")
	// ErrInvalidCall is returned before anything is sent when the caller's
	// arguments are malformed (bad key, token, id, oversized body).
	ErrInvalidCall = errors.New("client: invalid call")
	// ErrUnauthorized is a 401: the device token is missing, unknown or
	// revoked. Stop until new credentials are enrolled.
	ErrUnauthorized = errors.New("client: device token rejected (401), enroll new credentials")
	// ErrUnknownOutcome marks every answer whose effect on the server is
	// unknown; see UnknownOutcomeError.
	ErrUnknownOutcome = errors.New("client: unknown outcome")
	// ErrInvalidResponse is wrapped by an UnknownOutcomeError when a response
	// arrived but failed validation.
	ErrInvalidResponse = errors.New("client: invalid response")
)

// UnknownOutcomeError reports that the request may or may not have taken
// effect: network error, timeout, redirect, 5xx, unlisted status, or a
// response that failed validation. The caller must replay the same key and
// body. errors.Is(err, ErrUnknownOutcome) is true.
type UnknownOutcomeError struct {
	// Op names the call, e.g. "claim-next".
	Op string
	// Status is the HTTP status, or 0 when no response arrived.
	Status int
	// RetryAfter is the server's Retry-After, when one was given.
	RetryAfter time.Duration
	// Err is the cause.
	Err error
}

func (e *UnknownOutcomeError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("client: %s: unknown outcome (HTTP %d): %v", e.Op, e.Status, e.Err)
	}
	return fmt.Sprintf("client: %s: unknown outcome: %v", e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnknownOutcome) true.
func (e *UnknownOutcomeError) Is(target error) bool { return target == ErrUnknownOutcome }

// APIError is a definitive, well-formed rejection by the server.
type APIError struct {
	// Op names the call.
	Op string
	// Status is the HTTP status (4xx).
	Status int
	// Code is the stable error code, e.g. "claim_requires_manual".
	Code string
	// Message is the server's human text (never contains tokens).
	Message string
	// RetryAfter is the server's Retry-After, when one was given.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("client: %s: HTTP %d %s: %s", e.Op, e.Status, e.Code, e.Message)
}

// IsCode reports whether err is an *APIError with the given code.
func IsCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

func unknown(op string, status int, retryAfter time.Duration, format string, args ...any) error {
	return &UnknownOutcomeError{Op: op, Status: status, RetryAfter: retryAfter,
		Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalidResponse}, args...)...)}
}
