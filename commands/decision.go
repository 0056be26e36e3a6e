package commands

import (
	"encoding/hex"
	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// Ctx is what a command decides with: the projections as of every command
// sequenced before it (committed or earlier in the same batch), the time
// read once for this command, and the configuration.
type Ctx struct {
	State *projections.State
	Now   int64 // Unix ms, never below the head's time
	Cfg   *Config
	// IDs and Nonce, when set, replace NewID and crypto/rand for the ids
	// (tasks, devices, authorizations, executions, evidence) and claim
	// nonces a decision creates: tests inject them to compare whole events.
	IDs   func() string
	Nonce func(b []byte) error
}

// newID is a fresh id: the injected one, else NewID.
func (x *Ctx) newID() string {
	if x.IDs != nil {
		return x.IDs()
	}
	return NewID()
}

// newNonce is a fresh claim nonce (hex of 32 bytes): from the injected
// Nonce, else NewNonce.
func (x *Ctx) newNonce() (string, error) {
	if x.Nonce == nil {
		return NewNonce()
	}
	var b [32]byte
	if err := x.Nonce(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Draft is an event a command wants appended; the sequencer stamps seq,
// stream version, schema, time, hash chain.
type Draft struct {
	Stream string
	Type   events.Type
	Actor  ledger.Actor
	Idem   *ledger.Idem
	Body   any
}

// Decision is what a command decided.
type Decision struct {
	Events []Draft
	Soft   []ledger.SoftRecord
	// Effect changes soft state (presence, recorded 204s) once the
	// decision's events are applied; it must not touch event-derived state.
	Effect func(s *projections.State)
	// ManualClock, when set, is stored with the batch and becomes the test
	// clock's time after the commit.
	ManualClock *int64
	// SecretCheck, when set, is stored as the claim-token key-check value.
	SecretCheck []byte
	// Answer builds the command's result from the projections after the
	// decision was applied (so a first answer and a replay read the same
	// record).
	Answer func(s *projections.State) Result
}

// Result is a command's answer.
type Result struct {
	// Record is the idempotency record answered (new or replayed).
	Record   *projections.IdemRecord
	Replayed bool
	// Value is any other answer (presence, server time, device token).
	Value any
	// Task is the claimed task of a claim-next answered 200 (ClaimedTask).
	Task *ClaimedTask
	// Now is the time the command was sequenced at.
	Now int64
	// Seq is the head after the command.
	Seq uint64
}

// Command is one request to the sequencer.
type Command interface {
	Decide(x *Ctx) (*Decision, error)
}

// replay answers a recorded outcome.
func replay(rec *projections.IdemRecord) *Decision {
	return &Decision{Answer: func(*projections.State) Result { return Result{Record: rec, Replayed: true} }}
}

// recorded answers with the record of (scope, key) after apply.
func recorded(scope, key string) func(s *projections.State) Result {
	return func(s *projections.State) Result {
		return Result{Record: s.Idem.Record(scope, key)}
	}
}

// Scope is an idempotency scope: actor and operation.
func Scope(a ledger.Actor, op string) string { return a.Kind + ":" + a.ID + ":" + op }

// lookupIdem applies the idempotency rules common to every command: the
// same key and fingerprint replays (subject to check), another fingerprint
// conflicts, an expired key is refused (an expired soft record is a new
// key). It returns (nil, nil) for a new key.
func lookupIdem(x *Ctx, scope, key string, fp []byte, check func(*projections.IdemRecord) error) (*Decision, error) {
	retention := x.Cfg.IdempotencyRetention.Milliseconds()
	rec, expired := x.State.Idem.Lookup(scope, key, x.State.Head.At, retention)
	if expired {
		return nil, ErrIdempotencyKeyExpired
	}
	if rec == nil {
		// A soft record ("no task", quiet heartbeat) is answered within
		// retention on its own clock (the command's time); once expired
		// it is forgotten and the key is decided afresh.
		var err error
		if rec, err = x.State.Idem.SoftLookup(scope, key, x.Now, retention); err != nil {
			return nil, err
		}
	}
	if rec == nil {
		return nil, nil
	}
	if !equalBytes(rec.Fingerprint, fp) {
		return nil, ErrIdempotencyConflict
	}
	if check != nil {
		if err := check(rec); err != nil {
			return nil, err
		}
	}
	return replay(rec), nil
}

func equalBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func idem(scope, key string, fp []byte) *ledger.Idem {
	return &ledger.Idem{Scope: scope, Key: key, Fingerprint: fp}
}
