package commands

import (
	"sync"
	"time"
)

// Config holds the server settings commands decide with.
type Config struct {
	ClaimLease           time.Duration
	RunningLease         time.Duration
	PresenceTTL          time.Duration
	AuthTTLMin           time.Duration
	AuthTTLMax           time.Duration
	IdempotencyRetention time.Duration
	RequiredChecks       []string
	// ClaimSecret is the claim-token secret (32 bytes), nil when
	// server-issued claim tokens are off.
	ClaimSecret []byte
	// OutsideAdminTokens are the admin tokens kept beside the log rather
	// than in it (name → hex SHA-256): the ledger's initial token, and
	// tokens an older release created offline. The log's first event on a
	// name supersedes its record here.
	OutsideAdminTokens map[string]string
	// DefaultTakeover is the takeover policy of an authorization whose
	// request names none ("reclaim" or "manual"; "" is "reclaim"): serve
	// --default-takeover. The decided policy is recorded in the event.
	DefaultTakeover string
}

// DefaultConfig is the configuration of operations.md's defaults.
func DefaultConfig() Config {
	return Config{
		ClaimLease:           10 * time.Minute,
		RunningLease:         90 * time.Second,
		PresenceTTL:          2 * time.Minute,
		AuthTTLMin:           15 * time.Minute,
		AuthTTLMax:           720 * time.Hour,
		IdempotencyRetention: 72 * time.Hour,
		RequiredChecks:       []string{"accessibility_connected", "target_app_installed"},
		DefaultTakeover:      "reclaim",
	}
}

// Clock is the one source of time. Only implementations of Clock read the
// wall clock.
type Clock interface {
	Now() time.Time
}

// WallClock reads the system clock.
type WallClock struct{}

// Now returns the system time.
func (WallClock) Now() time.Time { return time.Now() }

// ManualClock is the test clock: it moves only when advanced.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a manual clock frozen at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the frozen time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Ms returns t in Unix milliseconds.
func Ms(t time.Time) int64 { return t.UnixMilli() }
