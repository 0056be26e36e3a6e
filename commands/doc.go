// Package commands decides: it turns a request the api has parsed and
// authenticated into the events to append (or a refusal), against the
// projections as they stand after every command sequenced before it. It
// owns the rules of what a caller may do; the projections own what the
// events mean. Nothing here touches storage, HTTP or the wall clock.
//
// # A command's path
//
//	api handler   parses the request, authenticates, builds a Command
//	Engine.Do     queues it to the sequencer goroutine (engine.go)
//	Decide(x)     the command's rules against x.State at x.Now (x.Cfg,
//	              injected ids and nonces in tests): a *Decision holding
//	              Drafts (stream, events.Type, actor, idempotency, body),
//	              soft records and an Answer, or an error of errors.go
//	stamp, seal   seq, stream version, schema, time and hash chain
//	              (pipeline.go), then State.ApplyDecoded at once, so the
//	              next command of the batch sees the decision
//	commit        the committer writes the batch: ledger Append, one
//	              transaction, one fsync (pipeline.go)
//	publish       failpoints, the authentication index, hooks (after the
//	              commit, before any answer)
//	answer        Decision.Answer reads the projections: the Result with
//	              the idempotency record the api renders
//
// A failed commit answers ErrUnavailable to every command decided since
// the last good commit. A failed write or sync of the log's file
// (ledger.ErrCommitIO) fences the engine: every later command is answered
// ErrUnavailable and the process restarts (Fenced). Any other failure
// wrote nothing, and the projections are reloaded from the log.
//
// # Where each family of rules lives
//
//	admin.go       operator mutations: register and revoke devices; create,
//	               amend, set the reference image, authorize, revoke an
//	               authorization, cancel, recover a task; the manual clock
//	device.go      the device's own calls: presence, claim-next (eligibility,
//	               the open-task rule, claim resumption, claim_requires_manual)
//	taskcall.go    task-scoped device calls under a claim: renew, release,
//	               start, heartbeat, await-confirmation/resume, complete,
//	               fail, cancel-ack, evidence, late reports
//	claimanswer.go what a claim answer carries
//	decision.go    Ctx, Draft, Decision, Result, ids and nonces
//	authindex.go   the device-token index the api authenticates with
//	reads.go       read access to committed projections
//	config.go      Config (leases, limits, retention) and the Clock
//	errors.go      the refusals, as sentinels the api maps to HTTP in its
//	               one error table
//
// # Idempotency
//
// Every mutation carries an idempotency key; begin (admin) and the device
// call helpers look the key up in the projections first: a known key with
// the same fingerprint replays the recorded outcome, with another
// fingerprint it is refused, and a new key is decided and recorded with
// its events (projections.IdemRecord).
//
// Decide functions are tested in process, given events / when command /
// then events or refusal (decide_test.go), with ids and nonces injected.
package commands
