package node_test

// The sequential model of the task state machine that the linearizability
// check (linearizability_test.go) holds recorded HTTP histories to. It is
// written from the contract, not from the server's code: per task the
// state, holder, claim token, generation, version, lease expiry and
// authorization expiry; per device the open task (derived: the task whose
// holder it is, CLAIMED with a valid lease or started); and the clock.
//
// The model is partitioned per task (porcupine's Partition): a task's
// partition holds every operation that names it, plus the claim-next calls
// and clock advances that overlap its life. A claim-next answer that names
// another task (or no task) still constrains this one: it must not have
// been the device's open task, nor its own expired claim, nor a claimable
// task older than the one given. So the rules that span tasks (one open
// task per device, oldest first, the own expired claim first, "no task"
// only when none is claimable) are checked in every partition they touch.

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// Operation kinds of a history.
const (
	opCreate    = "create"
	opCancel    = "cancel"
	opRecover   = "recover"
	opAdvance   = "advance"
	opClaim     = "claim-next"
	opRenew     = "renew"
	opRelease   = "release"
	opStart     = "start"
	opHeartbeat = "heartbeat"
	opComplete  = "complete"
)

// Task states as the wire names them.
const (
	stPending   = "PENDING"
	stClaimed   = "CLAIMED"
	stRunning   = "RUNNING"
	stSucceeded = "SUCCEEDED"
	stFailed    = "FAILED"
	stCanceled  = "CANCELED"
)

// linIn is an operation's input: what the client sent (and knew).
type linIn struct {
	Op      string
	Task    string // "" for claim-next and advance
	Dev     string // device id (device calls)
	Tok     string // X-Claim-Token sent
	Gen     uint64 // claim_generation sent
	Version uint64 // expected_version sent
	Exec    string // execution_id sent
	Expect  int64  // renew: expected_lease_expires_at (ms)
	Seconds int64  // advance
	// PresenceExp is, for claim-next, the presence_expires_at of the
	// device's last presence heartbeat (only the device itself moves it).
	PresenceExp int64
	// Held is, for claim-next, the task the client last claimed and did
	// not see end: an answer naming it may be a resume or the device's own
	// re-claim, which other partitions cannot tell apart.
	Held string
	// TTL is, for create, the authorization's ttl_seconds.
	TTL int64
	// Base is, for create, the clock value known before its call (the
	// last advance answered before it, or the start); set per partition.
	Base int64
}

// linOut is an operation's answer.
type linOut struct {
	Status    int
	Code      string // error code, "" on success
	Task      string // claim-next: the task given
	State     string
	Version   uint64
	Gen       uint64
	Lease     int64 // lease_expires_at (ms), 0 when absent
	Now       int64 // server_time / created_at (ms), 0 when absent
	Exec      string
	CancelReq bool
}

// linState is one task's state (and the clock) in its partition.
type linState struct {
	Now       int64 // -1 until known
	Exists    bool
	State     string
	Holder    string
	Tok       string
	Gen       uint64
	Version   uint64
	Lease     int64 // claim lease while CLAIMED, running lease once started
	AuthExp   int64
	Exec      string
	CancelReq bool
}

// linModel is the model; rank orders tasks by creation (oldest first) and
// claimLease/runningLease are the node's configured leases in ms.
type linModel struct {
	rank                     map[string]int
	claimLease, runningLease int64
}

func (m *linModel) started(s *linState) bool { return s.State == stRunning }

func (m *linModel) open(s *linState) bool {
	return s.State == stClaimed || s.State == stRunning
}

// holdsOpen: the device's open task is this one (a valid claim, or started).
func (m *linModel) holdsOpen(s *linState, dev string) bool {
	return s.Holder == dev && (m.started(s) || (s.State == stClaimed && s.Now < s.Lease))
}

// claimable: PENDING, or CLAIMED with an expired claim lease, with a valid
// authorization (this workload never amends, revokes or uses manual takeover).
func (m *linModel) claimable(s *linState) bool {
	if !s.Exists || s.Now >= s.AuthExp {
		return false
	}
	return s.State == stPending || (s.State == stClaimed && s.Now >= s.Lease)
}

// step applies one operation to one task's state; ok is false when the
// answer is not what the contract allows from that state.
func (m *linModel) step(s linState, task string, in linIn, out linOut) (bool, linState) {
	switch in.Op {
	case opAdvance:
		if out.Status != 200 {
			return false, s
		}
		if s.Now >= 0 && out.Now != s.Now+in.Seconds*1000 {
			return false, s
		}
		s.Now = out.Now
		return true, s
	case opCreate:
		if s.Exists || out.Status != 201 {
			return false, s
		}
		if s.Now < 0 {
			s.Now = in.Base
		}
		// An admin answer is the task's current document, read after the
		// commit: only created_at is as of the command.
		if out.Now != s.Now {
			return false, s
		}
		s.Exists, s.State, s.Version, s.AuthExp = true, stPending, 1, s.Now+in.TTL*1000
		return true, s
	}
	if s.Now < 0 || !s.Exists {
		// Nothing can name a task before its creation is linearized.
		return in.Op == opClaim && out.Task != task, s
	}
	switch in.Op {
	case opClaim:
		return m.claim(s, task, in, out)
	case opCancel:
		return m.cancel(s, out)
	case opRecover:
		return m.recover(s, in, out)
	default:
		return m.call(s, in, out)
	}
}

func isErr(out linOut, status int, code string) bool { return out.Status == status && out.Code == code }

// claim checks a claim-next answer against this task.
func (m *linModel) claim(s linState, task string, in linIn, out linOut) (bool, linState) {
	if m.holdsOpen(&s, in.Dev) {
		// The device's open task: resumed (same session, same token) or refused.
		switch {
		case m.started(&s):
			return isErr(out, 409, "claim_requires_manual"), s
		case in.Tok != s.Tok:
			return isErr(out, 403, "claim_token_mismatch"), s
		}
		return out.Status == 200 && out.Task == task && out.Gen == s.Gen && out.Version == s.Version &&
			out.State == stClaimed && out.Lease == s.Lease && out.Now == s.Now, s
	}
	stale := s.Now >= in.PresenceExp
	if out.Status == 200 && out.Task == task {
		// A new claim of this task.
		if stale || !m.claimable(&s) {
			return false, s
		}
		lease := min(s.Now+m.claimLease, s.AuthExp)
		if out.Gen != s.Gen+1 || out.Version != s.Version+1 || out.State != stClaimed || out.Lease != lease || out.Now != s.Now {
			return false, s
		}
		s.State, s.Holder, s.Tok, s.Gen, s.Version, s.Lease, s.Exec = stClaimed, in.Dev, in.Tok, s.Gen+1, s.Version+1, lease, ""
		return true, s
	}
	// An answer that does not give this task.
	ownExpired := s.Holder == in.Dev && s.State == stClaimed && m.claimable(&s)
	switch {
	case isErr(out, 409, "device_not_ready"):
		return stale, s
	case out.Status == 204:
		return !stale && !m.claimable(&s), s
	case out.Status == 200:
		if out.Task == in.Held {
			return true, s // a resume or the device's own re-claim: its partition checks it
		}
		if stale || ownExpired {
			return false, s
		}
		// A new selection: this task must not have been older and claimable.
		r, ok := m.rank[out.Task]
		return !ok || !m.claimable(&s) || m.rank[task] > r, s
	default:
		// claim_requires_manual / claim_token_mismatch about another task.
		return isErr(out, 409, "claim_requires_manual") || isErr(out, 403, "claim_token_mismatch"), s
	}
}

// call checks a task-scoped device call, in the contract's order.
func (m *linModel) call(s linState, in linIn, out linOut) (bool, linState) {
	switch {
	case !m.open(&s) || s.Holder != in.Dev:
		return isErr(out, 404, "claim_not_found"), s
	case in.Tok != s.Tok:
		return isErr(out, 403, "claim_token_mismatch"), s
	case in.Gen != s.Gen:
		return isErr(out, 409, "claim_generation_mismatch"), s
	case s.Now >= s.Lease:
		return isErr(out, 409, "lease_expired"), s // complete: kept as a late report, state unchanged
	}
	allowed := stClaimed
	if in.Op == opHeartbeat || in.Op == opComplete {
		allowed = stRunning
	}
	switch {
	case s.State != allowed:
		return isErr(out, 409, "invalid_state"), s
	case (in.Op == opHeartbeat || in.Op == opComplete) && in.Exec != s.Exec:
		return isErr(out, 409, "execution_mismatch"), s
	case in.Op != opRenew && in.Op != opHeartbeat && in.Version != s.Version:
		return isErr(out, 409, "version_mismatch"), s
	case in.Op == opRenew && in.Expect != s.Lease:
		return isErr(out, 409, "lease_expectation_mismatch"), s
	}
	if out.Status != 200 || out.Gen != s.Gen || out.Now != s.Now || out.CancelReq != s.CancelReq {
		return false, s
	}
	switch in.Op {
	case opRenew:
		s.Lease = min(s.Now+m.claimLease, s.AuthExp)
	case opRelease:
		s.State, s.Holder, s.Tok, s.Version = stPending, "", "", s.Version+1
	case opStart:
		if out.Exec == "" {
			return false, s
		}
		s.State, s.Version, s.Exec, s.Lease = stRunning, s.Version+1, out.Exec, s.Now+m.runningLease
	case opHeartbeat:
		s.Lease = s.Now + m.runningLease
	case opComplete:
		s.State, s.Version = stSucceeded, s.Version+1
	}
	if out.State != s.State || out.Version != s.Version ||
		((in.Op == opRenew || in.Op == opStart || in.Op == opHeartbeat) && out.Lease != s.Lease) ||
		(in.Op != opStart && in.Exec != "" && out.Exec != s.Exec) {
		return false, s
	}
	return true, s
}

// cancel: PENDING or CLAIMED (lease valid or not) end CANCELED; a started
// task only gets cancel_requested; a terminal one is refused.
func (m *linModel) cancel(s linState, out linOut) (bool, linState) {
	if !m.open(&s) && s.State != stPending {
		return isErr(out, 409, "invalid_state"), s
	}
	if m.started(&s) {
		// Only requested; the answer (the current document) may already
		// show the device's next step.
		s.CancelReq = true
		return out.Status == 200 && out.State != stPending && out.State != stClaimed && out.State != stCanceled, s
	}
	s.State, s.Holder, s.Tok, s.Version = stCanceled, "", "", s.Version+1
	return out.Status == 200 && out.State == s.State && out.Version == s.Version, s
}

// recover (decision fail, with expected_version) of a started task whose
// running lease expired.
func (m *linModel) recover(s linState, in linIn, out linOut) (bool, linState) {
	switch {
	case !m.open(&s):
		return isErr(out, 409, "invalid_state"), s
	case in.Version != s.Version:
		return isErr(out, 409, "version_mismatch"), s
	case !m.started(&s) && s.Now >= s.Lease:
		return isErr(out, 409, "invalid_state"), s
	case !m.started(&s) || s.Now < s.Lease:
		return isErr(out, 409, "lease_not_expired"), s
	}
	s.State, s.Holder, s.Tok, s.Version = stFailed, "", "", s.Version+1
	return out.Status == 200 && out.State == stFailed && out.Version == s.Version, s
}

// partitionedOp is an operation tagged with the task whose partition it is in.
type partitionedOp struct {
	in   linIn
	task string
}

// porcupineModel is the porcupine form of m: inputs are partitionedOp so
// that Step knows which task's state it is folding.
func (m *linModel) porcupineModel() porcupine.Model {
	return porcupine.Model{
		Partition: m.partition,
		Init:      func() interface{} { return linState{Now: -1} },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			p := input.(partitionedOp)
			return m.step(state.(linState), p.task, p.in, output.(linOut))
		},
		Equal: func(a, b interface{}) bool { return a.(linState) == b.(linState) },
		Hash: func(state interface{}) uint64 {
			s := state.(linState)
			return uint64(s.Now)*0x9e3779b97f4a7c15 ^ uint64(s.Lease)*31 ^ s.Version<<48 ^ s.Gen<<40
		},
		DescribeOperation: func(input, output interface{}) string {
			p, o := input.(partitionedOp), output.(linOut)
			return fmt.Sprintf("[%.8s] %+v -> %+v", p.task, p.in, o)
		},
	}
}

// partition splits a history of linIn operations (tagged with an empty
// task) into one history per task.
func (m *linModel) partition(history []porcupine.Operation) [][]porcupine.Operation {
	type window struct {
		start, end int64
		base       int64
	}
	const forever = int64(1) << 62
	wins := map[string]*window{}
	var order []string
	for _, op := range history {
		in := op.Input.(partitionedOp).in
		if in.Op == opCreate {
			task := op.Output.(linOut).Task
			wins[task] = &window{start: op.Call, end: forever, base: in.Base}
			order = append(order, task)
		}
	}
	for _, op := range history {
		in, out := op.Input.(partitionedOp).in, op.Output.(linOut)
		w := wins[in.Task]
		if w == nil || out.Status != 200 {
			continue
		}
		if (in.Op == opComplete && out.State == stSucceeded) || (in.Op == opCancel && out.State == stCanceled) || in.Op == opRecover {
			w.end = min(w.end, op.Return)
		}
	}
	// The clock before each creation: the last advance answered before it.
	for _, op := range history {
		in, out := op.Input.(partitionedOp).in, op.Output.(linOut)
		if in.Op != opAdvance {
			continue
		}
		for _, w := range wins {
			if op.Return < w.start && out.Now > w.base {
				w.base = out.Now
			}
		}
	}
	var parts [][]porcupine.Operation
	for _, task := range order {
		w := wins[task]
		var part []porcupine.Operation
		first, last := forever, int64(0)
		for _, op := range history {
			in, out := op.Input.(partitionedOp).in, op.Output.(linOut)
			keep := false
			switch in.Op {
			case opCreate:
				keep = out.Task == task
				if keep {
					in.Base, in.Task = w.base, task
				}
			case opAdvance:
				continue // below
			case opClaim:
				keep = out.Task == task || (op.Return > w.start && op.Call < w.end)
			default:
				keep = in.Task == task
			}
			if keep {
				op.Input = partitionedOp{in: in, task: task}
				part = append(part, op)
				first, last = min(first, op.Call), max(last, op.Return)
			}
		}
		// Every advance that may fall among them: the clock is this
		// partition's too.
		for _, op := range history {
			if in := op.Input.(partitionedOp).in; in.Op == opAdvance && op.Return > first && op.Call < last {
				op.Input = partitionedOp{in: in, task: task}
				part = append(part, op)
			}
		}
		parts = append(parts, part)
	}
	return parts
}
