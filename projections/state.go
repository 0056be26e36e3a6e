package projections

import (
	"fmt"
	"sort"
	"strings"
	"taskledger/internal/msgpack/mpwrite"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/wire"
)

// SchemaVersion changes whenever this package changes what it derives from
// the log. A snapshot of another schema version is never loaded: start-up
// rebuilds from the log instead. (2: claim records no longer copy the
// claimed task's payload, revision, creation time and image. 3: quiet
// heartbeats: lease-judged events fold their lease and device time in.
// 4: idempotency records hold a domain Outcome instead of an HTTP status.
// 5: admin tokens created and revoked through the log. 6: admin tokens
// carry their role. 7: settled tasks and expired keys' tombstones leave
// the projections for the read model on disk; the tombstone section holds
// their filter. 8: a task settles as soon as it ended, not once its
// records expired. 9: idempotency records have rows in the read model,
// and snapshots name them by seq. 10: the tombstone filter's segments
// stop doubling at 4 Mi keys, count every tombstone added, and its full
// segments are rows of the read model that snapshots leave out.)
const SchemaVersion = 10

// Task states: the wire's (one set for server and client).
const (
	StatePending             = wire.StatePending
	StateClaimed             = wire.StateClaimed
	StateRunning             = wire.StateRunning
	StateWaitingConfirmation = wire.StateWaitingConfirmation
	StateSucceeded           = wire.StateSucceeded
	StateFailed              = wire.StateFailed
	StateCanceled            = wire.StateCanceled
)

// AllStates lists every task state.
func AllStates() []wire.State { return wire.AllStates() }

// Authorization statuses as stored (time-independent).
const (
	AuthActive   = "ACTIVE"
	AuthConsumed = "CONSUMED"
	AuthRevoked  = "REVOKED"
)

// Device statuses.
const (
	DeviceStatusActive  = "ACTIVE"
	DeviceStatusRevoked = "REVOKED"
)

// Authorization is a task's current authorization snapshot.
type Authorization struct {
	events.AuthBody
	Status string `msgpack:"status"`
	// Takeover is the authorization's takeover policy (TakeoverManual, or
	// TakeoverReclaim / "" for reclaim).
	Takeover  string `msgpack:"takeover"`
	CreatedAt int64  `msgpack:"created_at"`
}

// Claim is a task's current claim.
type Claim struct {
	Generation             uint64 `msgpack:"generation"`
	DeviceID               string `msgpack:"device_id"`
	SessionID              string `msgpack:"session_id"`
	LeaseExpiresAt         int64  `msgpack:"lease_expires_at"`
	TokenOrigin            string `msgpack:"token_origin"`
	TokenHash              string `msgpack:"token_sha256"`
	Nonce                  string `msgpack:"nonce"`
	AuthorizationID        string `msgpack:"authorization_id"`
	AuthorizationExpiresAt int64  `msgpack:"authorization_expires_at"`
	ClaimedAt              int64  `msgpack:"claimed_at"`
}

// Execution is a task's current (or last) execution attempt.
type Execution struct {
	ID             string `msgpack:"id"`
	StartedAt      int64  `msgpack:"started_at"`
	LeaseExpiresAt int64  `msgpack:"lease_expires_at"`
	Step           string `msgpack:"step"`
	LastSeenAt     int64  `msgpack:"last_seen_at"`
	Ended          bool   `msgpack:"ended"`

	// SoftLeaseExpiresAt and SoftSeenAt come from heartbeats that left the
	// step unchanged: they append no event, and extend the running lease
	// through a soft record (lease/<execution id>) written in the batch's
	// transaction. Soft state: never in snapshots or the canonical
	// encoding, loaded by LoadSoft, and kept only while it extends the
	// lease the events set (every lease-judged event folds it in).
	SoftLeaseExpiresAt int64 `msgpack:"-"`
	SoftSeenAt         int64 `msgpack:"-"`
}

// Lease is the running lease in force: the one the events set, or the
// longer one a quiet heartbeat extended it to.
func (x *Execution) Lease() int64 { return max(x.LeaseExpiresAt, x.SoftLeaseExpiresAt) }

// Seen is when the device last acted on the execution (event or quiet
// heartbeat).
func (x *Execution) Seen() int64 { return max(x.LastSeenAt, x.SoftSeenAt) }

// SoftLease is the soft record of a quiet heartbeat: the running lease of
// one execution, overwritten by each heartbeat that changes no step.
type SoftLease struct {
	TaskID         string `msgpack:"task_id"`
	ExecutionID    string `msgpack:"execution_id"`
	Generation     uint64 `msgpack:"claim_generation"`
	LeaseExpiresAt int64  `msgpack:"lease_expires_at"`
	SeenAt         int64  `msgpack:"seen_at"`
}

// Encode returns the soft record's stored bytes: what ledger.Marshal
// gives (a map of the fields in declaration order, compact integers),
// written directly. A quiet heartbeat encodes one on the sequencer, and
// the reflective encoder took about 3.5 µs of it.
func (l *SoftLease) Encode() []byte {
	b := make([]byte, 0, 128+len(l.TaskID)+len(l.ExecutionID))
	b = mpwrite.MapLen(b, 5)
	b = mpwrite.String(mpwrite.String(b, "task_id"), l.TaskID)
	b = mpwrite.String(mpwrite.String(b, "execution_id"), l.ExecutionID)
	b = mpwrite.Uint(mpwrite.String(b, "claim_generation"), l.Generation)
	b = mpwrite.Int(mpwrite.String(b, "lease_expires_at"), l.LeaseExpiresAt)
	return mpwrite.Int(mpwrite.String(b, "seen_at"), l.SeenAt)
}

// SoftLeaseKey is the soft-record key of an execution's running lease.
func SoftLeaseKey(executionID string) string { return softLease + executionID }

// ApplySoftLease extends a live execution's running lease from a quiet
// heartbeat (live, or loaded from its soft record). A record that no longer
// names the task's current, unended execution, or that does not extend the
// lease the events set, changes nothing.
func (s *State) ApplySoftLease(l *SoftLease) {
	t := s.Tasks[l.TaskID]
	if t == nil || !t.Started() || t.Exec == nil || t.Exec.Ended || t.Exec.ID != l.ExecutionID ||
		t.Claim == nil || t.Claim.Generation != l.Generation || l.LeaseExpiresAt <= t.Exec.LeaseExpiresAt {
		return
	}
	t.Exec.SoftLeaseExpiresAt = max(t.Exec.SoftLeaseExpiresAt, l.LeaseExpiresAt)
	t.Exec.SoftSeenAt = max(t.Exec.SoftSeenAt, l.SeenAt)
}

// Blob is content stored beside the log.
type Blob struct {
	SHA256 string `msgpack:"sha256"`
	Size   int64  `msgpack:"size"`
}

// Failure is why a task failed.
type Failure struct {
	ReasonCode string `msgpack:"reason_code"`
	Detail     string `msgpack:"detail"`
}

// LateReport is a complete/fail that arrived after the running lease expired.
type LateReport struct {
	At          int64  `msgpack:"at"`
	DeviceID    string `msgpack:"device_id"`
	Generation  uint64 `msgpack:"claim_generation"`
	ExecutionID string `msgpack:"execution_id"`
	Outcome     string `msgpack:"outcome"`
	Result      string `msgpack:"result"`
	ReasonCode  string `msgpack:"reason_code"`
	Detail      string `msgpack:"detail"`
}

// Evidence is one uploaded screenshot.
type Evidence struct {
	ID          string `msgpack:"evidence_id"`
	ExecutionID string `msgpack:"execution_id"`
	SHA256      string `msgpack:"sha256"`
	Size        int64  `msgpack:"size"`
	Kind        string `msgpack:"kind"`
	CapturedAt  int64  `msgpack:"captured_at"`
}

// Recovery is an operator's recovery decision.
type Recovery struct {
	Decision string `msgpack:"decision"`
	Reason   string `msgpack:"reason"`
	At       int64  `msgpack:"at"`
}

// Task is the task view.
type Task struct {
	ID              string         `msgpack:"id"`
	CreateSeq       uint64         `msgpack:"create_seq"`
	CreatedAt       int64          `msgpack:"created_at"`
	UpdatedAt       int64          `msgpack:"updated_at"`
	State           wire.State     `msgpack:"state"`
	Version         uint64         `msgpack:"version"`
	Revision        uint64         `msgpack:"revision"`
	StreamVersion   uint64         `msgpack:"stream_version"`
	Payload         string         `msgpack:"payload"`
	PayloadSHA256   string         `msgpack:"payload_sha256"`
	Image           *Blob          `msgpack:"image"`
	Auth            *Authorization `msgpack:"authorization"`
	Generation      uint64         `msgpack:"generation"` // newest claim generation
	Claim           *Claim         `msgpack:"claim"`      // open claim (CLAIMED/RUNNING/WAITING) or nil
	Exec            *Execution     `msgpack:"execution"`
	Executions      uint64         `msgpack:"executions"`
	CancelRequested bool           `msgpack:"cancel_requested"`
	CancelReason    string         `msgpack:"cancel_reason"`
	Result          *string        `msgpack:"result"`
	Failure         *Failure       `msgpack:"failure"`
	LateReports     []LateReport   `msgpack:"late_reports"`
	Evidence        []Evidence     `msgpack:"evidence"`
	Recovery        *Recovery      `msgpack:"recovery"`

	queueEpoch uint64 // index bookkeeping, not state
	pos        int    // index bookkeeping: the task's place in the creation order
	unendedAt  int    // index bookkeeping: its place in State.unended + 1, 0 once ended
}

// Terminal reports whether the task can never change again.
func (t *Task) Terminal() bool {
	return t.State == StateSucceeded || t.State == StateFailed || t.State == StateCanceled
}

// Open reports whether the task has an owner (CLAIMED, RUNNING, WAITING).
func (t *Task) Open() bool {
	return t.State == StateClaimed || t.State == StateRunning || t.State == StateWaitingConfirmation
}

// Started reports whether the task is executing (RUNNING or WAITING).
func (t *Task) Started() bool {
	return t.State == StateRunning || t.State == StateWaitingConfirmation
}

// Device is the device view.
type Device struct {
	ID             string   `msgpack:"id"`
	OwnerID        string   `msgpack:"owner_id"`
	Name           string   `msgpack:"name"`
	HasChecks      bool     `msgpack:"has_required_checks"`
	RequiredChecks []string `msgpack:"required_checks"`
	TokenHash      string   `msgpack:"token_sha256"`
	Status         string   `msgpack:"status"`
	RegisteredAt   int64    `msgpack:"registered_at"`
	RevokedAt      int64    `msgpack:"revoked_at"`
	RevokeReason   string   `msgpack:"revoke_reason"`
	OpenTask       string   `msgpack:"open_task"` // newest claimed task still owned
	StreamVersion  uint64   `msgpack:"stream_version"`
}

// Presence is a device's newest presence heartbeat (soft state).
type Presence struct {
	ReceivedAt       int64           `msgpack:"received_at"`
	AppVersion       string          `msgpack:"app_version"`
	OSVersion        string          `msgpack:"os_version"`
	TargetAppVersion string          `msgpack:"target_app_version"`
	Checks           map[string]bool `msgpack:"checks"`
	ActiveTaskID     string          `msgpack:"active_task_id"`
	ClientTime       *int64          `msgpack:"client_time"`
	// Restored marks a record loaded from disk at start: a restarted server
	// waits for the next heartbeat before the device may claim.
	Restored bool `msgpack:"-"`
}

// Config is what projections need to know about the server's settings.
type Config struct {
	IdempotencyRetentionMs int64
	// KeepSettled keeps settled tasks in memory (and in snapshots): for
	// a log that keeps no read model on disk (a cluster's stream).
	KeepSettled bool
}

// CheckClaimsAgainst makes the fold refuse, from now on, a server-issued
// claim whose secret_check is not kcv (hex): the node calls it once its
// claim-token secret matched the stored key-check value, so every claim it
// writes is verified to carry that value at write time (D324). "" turns
// the check off.
func (s *State) CheckClaimsAgainst(kcv string) { s.claimKeyCheck = kcv }

// ClaimsCheckedAgainst is the key-check value CheckClaimsAgainst set.
func (s *State) ClaimsCheckedAgainst() string { return s.claimKeyCheck }

// State is every projection of the log, plus the indexes claims need.
type State struct {
	cfg Config

	Head    ledger.Head
	Tasks   map[string]*Task
	Devices map[string]*Device
	// AdminTokens are the admin token names the log speaks of.
	AdminTokens map[string]*AdminToken
	Idem        *IdemView
	// ServerClaims counts server-issued claims (checked at start).
	ServerClaims uint64 `msgpack:"server_claims"`

	// Soft state, not derived from events and not part of snapshots.
	Presence map[string]*Presence `msgpack:"-"`

	// Indexes (derived, rebuilt on load).
	taskOrder    []*Task           // tasks by creation seq
	byTokenHash  map[string]string // device token hash → device id
	queue        taskQueue
	claimExpiry  expiryHeap
	queueCounter uint64
	heldTasks    map[string]struct{} // tasks a device holds: CLAIMED, RUNNING, WAITING_CONFIRMATION

	claimKeyCheck string // CheckClaimsAgainst: not state, a check of what is applied
	counts        stateCounts
	unended       []*Task // tasks not ended, in no order: the ones a capture copies
	settling      []*Task // tasks ended by the event being folded, settled at its end (readmodel.go)

	// The read model (readmodel.go): settled tasks leave the map and the
	// creation order (a hole until compacted) for toWrite, then for
	// justWritten once their batch was handed to the committer.
	settledCounts stateCounts
	orderShared   bool // a capture shares taskOrder: copy before a change in place
	orderHoles    int
	toWrite       []*Task
	toWriteIDs    map[string]*Task
	justWritten   map[string]*Task
	onSettle      func(*Task) error // RebuildSettling: hand settled tasks over instead
	settleErr     error
	finished      FinishedStore
}

const taskPrefix = "task/"

// stateCounts counts tasks per state (derived, kept at apply and rebuilt
// on restore), so the console's counts read no task.
type stateCounts [7]int

func stateIndex(st wire.State) int {
	switch st {
	case StatePending:
		return 0
	case StateClaimed:
		return 1
	case StateRunning:
		return 2
	case StateWaitingConfirmation:
		return 3
	case StateSucceeded:
		return 4
	case StateFailed:
		return 5
	case StateCanceled:
		return 6
	}
	return -1
}

// moved keeps the counts and the unended set when t went from state
// before ("" when created) to its state now.
func (s *State) moved(t *Task, before wire.State) {
	s.counts.move(before, t.State)
	if t.Terminal() { // an ended task never changes again: this runs once for it
		s.ended(t)
	}
	switch {
	case t.Terminal() && t.unendedAt > 0: // swap the last one into its place
		i, last := t.unendedAt-1, s.unended[len(s.unended)-1]
		s.unended[i], last.unendedAt = last, i+1
		s.unended[len(s.unended)-1] = nil
		s.unended, t.unendedAt = s.unended[:len(s.unended)-1], 0
	case !t.Terminal() && t.unendedAt == 0:
		s.unended = append(s.unended, t)
		t.unendedAt = len(s.unended)
	}
}

func (c *stateCounts) move(from, to wire.State) {
	if i := stateIndex(from); i >= 0 {
		c[i]--
	}
	if i := stateIndex(to); i >= 0 {
		c[i]++
	}
}

// StateCounts returns how many tasks are in each state.
func (s *State) StateCounts() map[string]int {
	out := make(map[string]int, len(s.counts))
	for _, st := range AllStates() {
		out[string(st)] = s.counts[stateIndex(st)] + s.settledCounts[stateIndex(st)]
	}
	return out
}

// New returns empty projections.
func New(cfg Config) *State {
	return &State{
		cfg:         cfg,
		Head:        ledger.GenesisHead(),
		Tasks:       map[string]*Task{},
		Devices:     map[string]*Device{},
		AdminTokens: map[string]*AdminToken{},
		Idem:        newIdemView(),
		Presence:    map[string]*Presence{},
		byTokenHash: map[string]string{},
	}
}

// Config returns the configuration the state was built with.
func (s *State) Config() Config { return s.cfg }

// DeviceByTokenHash returns the device whose token hashes to h.
func (s *State) DeviceByTokenHash(h string) (*Device, bool) {
	id, ok := s.byTokenHash[h]
	if !ok {
		return nil, false
	}
	d := s.Devices[id]
	return d, d != nil
}

// TaskIDsNewestFirst calls fn with task ids in descending creation order,
// starting below creation seq `before` (0 = from the newest), until fn
// returns false.
func (s *State) TaskIDsNewestFirst(before uint64, fn func(t *Task) bool) {
	for i := len(s.taskOrder) - 1; i >= 0; i-- {
		t := s.taskOrder[i]
		if t == nil || before != 0 && t.CreateSeq >= before {
			continue
		}
		if !fn(t) {
			return
		}
	}
}

// StreamVersion returns the newest version of a task, device or admin
// token stream (0
// for a stream that does not exist yet).
func (s *State) StreamVersion(stream string) uint64 {
	switch {
	case strings.HasPrefix(stream, "task/"):
		if t := s.Tasks[stream[len("task/"):]]; t != nil {
			return t.StreamVersion
		}
	case strings.HasPrefix(stream, "device/"):
		if d := s.Devices[stream[len("device/"):]]; d != nil {
			return d.StreamVersion
		}
	case strings.HasPrefix(stream, "admin-token/"):
		if a := s.AdminTokens[stream[len("admin-token/"):]]; a != nil {
			return a.StreamVersion
		}
	}
	return 0
}

// DevicesInOrder calls fn for every device in registration order.
func (s *State) DevicesInOrder(fn func(d *Device)) {
	list := make([]*Device, 0, len(s.Devices))
	for _, d := range s.Devices {
		list = append(list, d)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].RegisteredAt != list[j].RegisteredAt {
			return list[i].RegisteredAt < list[j].RegisteredAt
		}
		return list[i].ID < list[j].ID
	})
	for _, d := range list {
		fn(d)
	}
}

// SoftLeases lists the running leases that quiet heartbeats extended
// beyond the events' lease, by task id: the soft state a replay must load
// to equal the live projections (compared beside Canonical).
func (s *State) SoftLeases() []SoftLease {
	var out []SoftLease
	for _, t := range s.Tasks {
		if x := t.Exec; x != nil && x.SoftLeaseExpiresAt != 0 {
			out = append(out, SoftLease{TaskID: t.ID, ExecutionID: x.ID, Generation: t.Claim.Generation,
				LeaseExpiresAt: x.SoftLeaseExpiresAt, SeenAt: x.SoftSeenAt})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out
}

// CheckStateCounts reports whether the per-state counts equal a count of
// the tasks (test nodes check it at cleanup, live and restored).
func (s *State) CheckStateCounts() error {
	var want stateCounts
	unended := 0
	for _, t := range s.Tasks {
		want.move("", t.State)
		in := t.unendedAt > 0 && t.unendedAt <= len(s.unended) && s.unended[t.unendedAt-1] == t
		if in == t.Terminal() || (!in && t.unendedAt != 0) {
			return fmt.Errorf("projections: task %s (%s) is %v in the unended set (at %d)", t.ID, t.State, in, t.unendedAt)
		}
		if t.pos >= len(s.taskOrder) || s.taskOrder[t.pos] != t || s.Settled(t) {
			return fmt.Errorf("projections: task %s is not at %d of the creation order", t.ID, t.pos)
		}
		if !t.Terminal() {
			unended++
		}
	}
	if want != s.counts {
		return fmt.Errorf("projections: state counts %v, the tasks give %v", s.counts, want)
	}
	if unended != len(s.unended) {
		return fmt.Errorf("projections: %d tasks in the unended set, %d not ended", len(s.unended), unended)
	}
	return nil
}
