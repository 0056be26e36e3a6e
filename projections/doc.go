// Package projections is the fold of the log: a pure, deterministic
// function from the committed events to the state every read and every
// decision uses (tasks, devices, authorizations, claims, executions,
// idempotency records) and the indexes claims and lease expiry need. Time
// comes only from the events; replaying the same log twice gives identical
// state, which every test node checks at cleanup. The event types and
// their bodies are in package events; the rules of who may do what are in
// package commands.
//
// # Rules it owns
//
//   - The state machine of a task (PENDING, CLAIMED, RUNNING,
//     WAITING_CONFIRMATION, SUCCEEDED, FAILED, CANCELED, the wire's states):
//     an event that does not fit the current state is an ApplyError
//     wrapping ErrInvariant, never a silent change.
//   - Which task is claimable and which lease has expired, read from
//     indexes (heaps with lazy deletion), never by scanning every task.
//   - What an idempotency record holds and how long it is kept.
//
// # Where each family lives
//
//	apply.go                 Apply: checks the envelope (seq, hash chain,
//	                         time) and dispatches by event type
//	apply_table.go           the table from events.Type to its applier
//	apply_task.go            created, amended, reference image, cancel,
//	                         recover
//	apply_authorization.go   authorized, authorization revoked
//	apply_claim.go           claimed, claim resumed, renewed, released
//	apply_execution.go       started, heartbeat, paused/resumed,
//	                         completed, failed, late report, evidence
//	apply_device.go          device registered, revoked, claim requires
//	                         manual
//	applydecoded.go          ApplyDecoded: the sequencer's path, body
//	                         already decoded
//	state.go                 State and the views (Task, Device, Claim,
//	                         Execution, …), SchemaVersion
//	index.go                 the claim and lease indexes, Claimable
//	takeover.go              the takeover policy of a stale claim
//	idem*.go, outcome.go     idempotency records and their domain Outcome
//	taskhistory.go           CheckTaskHistory: one task's events against
//	                         the task rules (verify)
//	load.go                  Replay and Rebuild from a Source
//	capture.go, content*.go  the canonical snapshot bytes (Canonical,
//	                         Restore), their format in content.go
//
// # Flow of one event
//
// The sequencer (commands) stamps a decided event and calls ApplyDecoded
// at once; start-up and verify call Apply on every event read from the
// log (Replay). Both reach the same applier of apply_table.go, so the live
// state and a replay cannot diverge. Soft state (presence, quiet
// heartbeats, recorded no-task answers) is not derived from events: it is
// applied from soft records and never changes event-derived state.
package projections
