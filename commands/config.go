package commands

import "time"

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

// Ms returns t in Unix milliseconds.
func Ms(t time.Time) int64 { return t.UnixMilli() }
