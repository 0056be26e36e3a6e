package projections

import (
	"bytes"
	"fmt"
	"strings"

	"taskledger/wire"

	"taskledger/events"
	"taskledger/ledger"
)

// Apply folds one committed (or sequenced) event into the projections. It is
// a pure function of the event and the state: time comes only from the
// event. An event the state machine does not allow is refused with an
// *ApplyError wrapping ErrInvariant, and the state is left unchanged where
// the check comes before any change (every check does).
func (s *State) Apply(e *ledger.Event) error { return s.applyShared(e, nil) }

// applyShared is Apply with the body's short strings shared through strs
// (a replay's: the ids its events repeat), seeded with the event's task
// id and actor.
func (s *State) applyShared(e *ledger.Event, strs *events.Strings) error {
	if err := s.follows(e); err != nil {
		return err
	}
	if strs != nil {
		if id, ok := strings.CutPrefix(e.Stream, taskPrefix); ok {
			strs.Offer(id)
		}
		strs.Offer(e.Actor.ID)
	}
	body, err := events.DecodeBodyShared(e.Type, e.Schema, e.Body, strs)
	if err != nil {
		return &ApplyError{Seq: e.Seq, Type: e.Type, Err: err}
	}
	return s.applyDecoded(e, body)
}

// follows checks that e continues the head: the next seq, chained, not
// back in time.
func (s *State) follows(e *ledger.Event) error {
	if e.Seq != s.Head.Seq+1 {
		return &ApplyError{Seq: e.Seq, Type: e.Type, Err: violation("seq %d does not follow %d", e.Seq, s.Head.Seq)}
	}
	if !bytes.Equal(e.PrevHash, s.Head.Hash) {
		return &ApplyError{Seq: e.Seq, Type: e.Type, Err: violation("prev_hash does not chain")}
	}
	if e.At < s.Head.At {
		return &ApplyError{Seq: e.Seq, Type: e.Type, Err: violation("time %d goes back from %d", e.At, s.Head.At)}
	}
	return nil
}

// applyDecoded folds e, whose body is already decoded, and moves the head.
func (s *State) applyDecoded(e *ledger.Event, body any) error {
	var t *Task
	var before wire.State
	isTask := len(e.Stream) > len(taskPrefix) && e.Stream[:len(taskPrefix)] == taskPrefix
	if isTask {
		if t = s.Tasks[e.Stream[len(taskPrefix):]]; t != nil {
			if t.Terminal() { // captures share it: what folds goes into a copy
				t = s.unshare(t)
			}
			before = t.State
		}
	}
	if err := s.apply(e, body); err != nil {
		return &ApplyError{Seq: e.Seq, Type: e.Type, Err: err}
	}
	if isTask && t == nil { // task.created
		t = s.Tasks[e.Stream[len(taskPrefix):]]
	}
	if t != nil && t.State != before {
		s.moved(t, before)
	}
	s.Head = ledger.Head{Seq: e.Seq, Hash: e.Hash, At: e.At}
	if s.cfg.IdempotencyRetentionMs > 0 {
		s.Idem.expire(e.At, s.cfg.IdempotencyRetentionMs)
	}
	s.settle()
	return nil
}

func (s *State) task(e *ledger.Event, id string) (*Task, error) {
	t := s.Tasks[id]
	if t == nil {
		return nil, violation("no task %s", id)
	}
	if !isStream(e.Stream, "task/", id) || e.StreamVersion != t.StreamVersion+1 {
		return nil, violation("stream %s/%d does not continue task %s at %d", e.Stream, e.StreamVersion, id, t.StreamVersion)
	}
	return t, nil
}

func (s *State) device(e *ledger.Event, id string) (*Device, error) {
	d := s.Devices[id]
	if d == nil {
		return nil, violation("no device %s", id)
	}
	if !isStream(e.Stream, "device/", id) || e.StreamVersion != d.StreamVersion+1 {
		return nil, violation("stream %s/%d does not continue device %s at %d", e.Stream, e.StreamVersion, id, d.StreamVersion)
	}
	return d, nil
}

func checkVersion(t *Task, v uint64) error {
	if v != t.Version+1 {
		return violation("task %s version %d after %d", t.ID, v, t.Version)
	}
	return nil
}

// holder checks that the event's device owns t's open claim with generation
// g and (when exec is set) the un-ended execution exec.
func holder(t *Task, device string, g uint64, exec string, states ...wire.State) error {
	ok := false
	for _, st := range states {
		ok = ok || t.State == st
	}
	if !ok {
		return violation("task %s is %s", t.ID, t.State)
	}
	if t.Claim == nil || t.Claim.DeviceID != device || t.Claim.Generation != g {
		return violation("task %s is not held by %s at generation %d", t.ID, device, g)
	}
	if exec != "" && (t.Exec == nil || t.Exec.ID != exec || t.Exec.Ended) {
		return violation("task %s execution is not %s", t.ID, exec)
	}
	return nil
}

// amendment applies an operator's change of the task's content (payload or
// reference image): revision +1, a stale claim closed, then change.
func (s *State) amendment(e *ledger.Event, id string, revision uint64, closed *events.ClosedClaim, version uint64, change func(*Task)) error {
	t, err := s.task(e, id)
	if err != nil {
		return err
	}
	if revision != t.Revision+1 {
		return violation("task %s revision %d after %d", t.ID, revision, t.Revision)
	}
	if err := s.closeStaleClaim(t, closed, version, e.At); err != nil {
		return err
	}
	t.Revision = revision
	change(t)
	s.touch(t, e)
	s.record(e, t, nil, OutcomeAccepted)
	return nil
}

// closeStaleClaim handles an operator command on a CLAIMED task whose claim
// lease expired: the claim closes and the task is PENDING again.
func (s *State) closeStaleClaim(t *Task, c *events.ClosedClaim, version uint64, at int64) error {
	if c == nil {
		if t.State != StatePending {
			return violation("task %s is %s", t.ID, t.State)
		}
		if version != t.Version {
			return violation("task %s version %d, want %d", t.ID, version, t.Version)
		}
		return nil
	}
	if t.State != StateClaimed || t.Claim == nil || t.Claim.DeviceID != c.DeviceID || t.Claim.Generation != c.Generation {
		return violation("task %s has no claim %s/%d to close", t.ID, c.DeviceID, c.Generation)
	}
	if at < t.Claim.LeaseExpiresAt {
		return violation("task %s claim lease has not expired", t.ID)
	}
	if err := checkVersion(t, version); err != nil {
		return err
	}
	s.releaseDevice(t)
	t.Claim = nil
	t.State = StatePending
	t.Version = version
	return nil
}

// releaseDevice forgets t as its holder's open task.
func (s *State) releaseDevice(t *Task) {
	if t.Claim == nil {
		return
	}
	if d := s.Devices[t.Claim.DeviceID]; d != nil && d.OpenTask == t.ID {
		d.OpenTask = ""
	}
}

func (s *State) apply(e *ledger.Event, body any) error {
	if f, ok := appliers()[e.Type]; ok {
		return f(s, e, body)
	}
	return fmt.Errorf("%w: %s", events.ErrUnknownEvent, e.Type)
}

// ActorDeviceCancel marks a task.canceled caused by a device's cancel-ack.
const ActorDeviceCancel = "device"

// finish ends an applied terminal transition.
func (s *State) finish(t *Task, e *ledger.Event) {
	t.Claim = nil
	s.touch(t, e)
	if e.Actor.Kind != ledger.ActorDevice {
		s.record(e, t, nil, OutcomeAccepted)
		return
	}
	r := taskReply(t, e.At)
	if t.Exec != nil {
		r.ExecutionID = t.Exec.ID
	}
	s.record(e, t, &r, OutcomeAccepted)
}

func (s *State) touch(t *Task, e *ledger.Event) {
	t.UpdatedAt = e.At
	s.touchStream(t, e)
	s.reindex(t)
}

func (s *State) touchStream(t *Task, e *ledger.Event) { t.StreamVersion = e.StreamVersion }

// taskReply is a device answer's values as of event time at.
func taskReply(t *Task, at int64) Reply {
	r := Reply{TaskID: t.ID, State: string(t.State), Version: t.Version, Generation: t.Generation,
		ServerTime: at, CancelRequested: t.CancelRequested}
	if t.Exec != nil && t.Started() {
		r.ExecutionID = t.Exec.ID
	}
	switch {
	case t.Started() && t.Exec != nil:
		r.LeaseExpiresAt = t.Exec.LeaseExpiresAt
	case t.Claim != nil:
		r.LeaseExpiresAt = t.Claim.LeaseExpiresAt
	}
	return r
}

func claimReply(t *Task, at int64) Reply {
	r := taskReply(t, at)
	r.ExecutionID = ""
	r.SessionID, r.TokenOrigin, r.Nonce = t.Claim.SessionID, t.Claim.TokenOrigin, t.Claim.Nonce
	r.AuthorizationID, r.AuthorizationExpiresAt = t.Claim.AuthorizationID, t.Claim.AuthorizationExpiresAt
	return r
}

func (s *State) record(e *ledger.Event, t *Task, r *Reply, o Outcome) {
	if e.Idem == nil {
		return
	}
	s.put(e, withReply(IdemRecord{Outcome: o, TaskID: t.ID, DeviceID: deviceOf(e)}, r))
}

func (s *State) recordCode(e *ledger.Event, t *Task, r *Reply, o Outcome, code string) {
	if e.Idem == nil {
		return
	}
	s.put(e, withReply(IdemRecord{Outcome: o, Code: code, TaskID: t.ID, DeviceID: deviceOf(e)}, r))
}

// recordAndReply is a record and a copy of its reply, allocated together
// (a replay records a million).
type recordAndReply struct {
	rec   IdemRecord
	reply Reply
}

// withReply returns a new record holding rec and a copy of r (nil: no
// reply), in one allocation.
func withReply(rec IdemRecord, r *Reply) *IdemRecord {
	if r == nil {
		p := new(IdemRecord)
		*p = rec
		return p
	}
	p := &recordAndReply{rec: rec, reply: *r}
	p.rec.Reply = &p.reply
	return &p.rec
}

func (s *State) recordDevice(e *ledger.Event, id string, o Outcome) {
	if e.Idem == nil {
		return
	}
	s.put(e, &IdemRecord{Outcome: o, DeviceID: id})
}

func (s *State) put(e *ledger.Event, r *IdemRecord) {
	if e.Idem == nil {
		return
	}
	r.Scope, r.Key, r.Fingerprint = e.Idem.Scope, e.Idem.Key, e.Idem.Fingerprint
	r.At, r.Seq, r.EventType = e.At, e.Seq, string(e.Type)
	s.Idem.put(r)
}

func deviceOf(e *ledger.Event) string {
	if e.Actor.Kind == ledger.ActorDevice {
		return e.Actor.ID
	}
	return ""
}
