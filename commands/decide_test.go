package commands

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// world decides commands in process, without HTTP, a log or the sequencer
// goroutine: each decision's events are stamped, sealed and folded as the
// sequencer does, with ids and nonces injected so events are comparable.
type world struct {
	t    testing.TB
	s    *projections.State
	head ledger.Head
	now  int64
	cfg  Config
	ids  int
	keys int
	log  []folded // every event folded, in order
}

// folded is an event as the world folded it, with its body.
type folded struct {
	ev   *ledger.Event
	body any
}

func newWorld(t testing.TB) *world {
	cfg := DefaultConfig()
	cfg.ClaimSecret = []byte("0123456789abcdef0123456789abcdef")
	return &world{t: t, s: projections.New(projections.Config{}), head: ledger.GenesisHead(), now: 1_800_000_000_000, cfg: cfg}
}

func (w *world) id() string {
	w.ids++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", w.ids)
}

func (w *world) key() string {
	w.keys++
	return fmt.Sprintf("10000000-0000-4000-8000-%012d", w.keys)
}

func (w *world) admin() AdminReq {
	return AdminReq{Operator: "op", Key: w.key(), Fingerprint: []byte{byte(w.keys)}}
}

// decide runs cmd's Decide and folds what it decided; it returns the
// event types appended, or the refusal.
func (w *world) decide(cmd Command) ([]events.Type, error) {
	x := &Ctx{State: w.s, Now: w.now, Cfg: &w.cfg, IDs: w.id, Nonce: func(b []byte) error {
		for i := range b {
			b[i] = byte(i)
		}
		return nil
	}}
	d, err := cmd.Decide(x)
	if err != nil {
		return nil, err
	}
	return w.fold(d), nil
}

// fold stamps, seals and folds what d decided, as the sequencer does, and
// runs its effect; it returns the event types appended.
func (w *world) fold(d *Decision) []events.Type {
	var types []events.Type
	for i := range d.Events {
		ev := (&Engine{}).stamp(w.s, &d.Events[i], w.now)
		var err error
		w.head, _, err = ledger.SealBody(ev, w.head, d.Events[i].Body, events.AppendBody)
		if err != nil {
			w.t.Fatalf("seal: %v", err)
		}
		if err := w.s.ApplyDecoded(ev, d.Events[i].Body); err != nil {
			w.t.Fatalf("a decided %s does not fold: %v", ev.Type, err)
		}
		w.log = append(w.log, folded{ev, d.Events[i].Body})
		types = append(types, ev.Type)
	}
	if d.Effect != nil {
		d.Effect(w.s)
	}
	return types
}

// given decides a command that must be accepted.
func (w *world) given(cmd Command) {
	w.t.Helper()
	if _, err := w.decide(cmd); err != nil {
		w.t.Fatalf("given %T: %v", cmd, err)
	}
}

// fixture state shared by the cases: one device, one authorized task.
type fixture struct {
	dev  Principal
	task string
	tok  string
}

func (w *world) device() Principal {
	w.t.Helper()
	p := Principal{OwnerID: "owner"}
	old := map[string]bool{}
	for id := range w.s.Devices {
		old[id] = true
	}
	w.given(&RegisterDevice{AdminReq: w.admin(), OwnerID: p.OwnerID, Name: "d", TokenHash: HashToken(w.id())})
	for id := range w.s.Devices {
		if !old[id] {
			p.DeviceID = id
		}
	}
	return p
}

func (w *world) task() string {
	w.t.Helper()
	old := map[string]bool{}
	for id := range w.s.Tasks {
		old[id] = true
	}
	w.given(&CreateTask{AdminReq: w.admin(), Payload: `{"a":1}`, PayloadSHA256: HashToken(`{"a":1}`), AuthorizeTTL: time.Hour})
	for id := range w.s.Tasks {
		if !old[id] {
			return id
		}
	}
	w.t.Fatal("no task created")
	return ""
}

func (w *world) present(p Principal) {
	w.given(&Presence{Device: p, Presence: projections.Presence{Checks: map[string]bool{"accessibility_connected": true, "target_app_installed": true}}})
}

func (w *world) claimed() fixture {
	w.t.Helper()
	f := fixture{dev: w.device(), task: w.task(), tok: "client-token"}
	w.present(f.dev)
	w.given(&ClaimNext{Device: f.dev, Key: w.key(), Fingerprint: []byte{1}, SessionID: w.id(), TokenHash: HashToken(f.tok)})
	return f
}

func (w *world) call(f fixture, op string) *TaskCall {
	t := w.s.Tasks[f.task]
	c := &TaskCall{Op: op, Device: f.dev, TaskID: f.task, Key: w.key(), Fingerprint: []byte{2}, TokenHash: HashToken(f.tok),
		Generation: t.Claim.Generation, Version: t.Version}
	if t.Exec != nil {
		c.ExecutionID = t.Exec.ID
	}
	return c
}

func (w *world) running() fixture {
	f := w.claimed()
	w.given(w.call(f, OpStart))
	return f
}

// TestDecide: for every command, given the events of a few earlier
// commands, when the command is decided, then exactly these events are
// appended or this refusal is returned.
func TestDecide(t *testing.T) {
	cases := []struct {
		name string
		when func(w *world) Command
		then []events.Type
		err  error
	}{
		{"register device", func(w *world) Command {
			return &RegisterDevice{AdminReq: w.admin(), OwnerID: "o", Name: "n", TokenHash: HashToken("t")}
		}, []events.Type{events.EvDeviceRegistered}, nil},
		{"revoke device", func(w *world) Command {
			return &RevokeDevice{AdminReq: w.admin(), DeviceID: w.device().DeviceID, Reason: "lost"}
		}, []events.Type{events.EvDeviceRevoked}, nil},
		{"revoke unknown device", func(w *world) Command {
			return &RevokeDevice{AdminReq: w.admin(), DeviceID: w.id(), Reason: "lost"}
		}, nil, ErrDeviceNotFound},
		{"create task", func(w *world) Command {
			return &CreateTask{AdminReq: w.admin(), Payload: `{}`, PayloadSHA256: HashToken(`{}`)}
		}, []events.Type{events.EvTaskCreated}, nil},
		{"amend", func(w *world) Command {
			return &Amend{AdminReq: w.admin(), TaskID: w.task(), ExpectedRevision: 1, Payload: `{"b":2}`, PayloadSHA256: HashToken(`{"b":2}`)}
		}, []events.Type{events.EvTaskAmended}, nil},
		{"amend another revision", func(w *world) Command {
			return &Amend{AdminReq: w.admin(), TaskID: w.task(), ExpectedRevision: 7, Payload: `{"b":2}`, PayloadSHA256: HashToken(`{"b":2}`)}
		}, nil, ErrRevisionMismatch},
		{"amend unknown task", func(w *world) Command {
			return &Amend{AdminReq: w.admin(), TaskID: w.id(), ExpectedRevision: 1, Payload: `{}`, PayloadSHA256: HashToken(`{}`)}
		}, nil, ErrTaskNotFound},
		{"set reference image", func(w *world) Command {
			return &SetReferenceImage{AdminReq: w.admin(), TaskID: w.task(), SHA256: HashToken("img"), Size: 3}
		}, []events.Type{events.EvTaskReferenceImageSet}, nil},
		{"authorize", func(w *world) Command {
			return &Authorize{AdminReq: w.admin(), TaskID: w.task(), ExpectedRevision: 1, TTL: time.Hour}
		}, []events.Type{events.EvTaskAuthorized}, nil},
		{"revoke authorization", func(w *world) Command {
			return &RevokeAuthorization{AdminReq: w.admin(), TaskID: w.task(), Reason: "no"}
		}, []events.Type{events.EvTaskAuthorizationRevoked}, nil},
		{"cancel pending", func(w *world) Command {
			return &Cancel{AdminReq: w.admin(), TaskID: w.task(), Reason: "no"}
		}, []events.Type{events.EvTaskCanceled}, nil},
		{"recover pending", func(w *world) Command {
			return &Recover{AdminReq: w.admin(), TaskID: w.task(), Decision: events.RecoverFail, Reason: "x", ExpectedVersion: 1}
		}, nil, ErrInvalidState},
		{"claim without presence", func(w *world) Command {
			d := w.device()
			w.task()
			return &ClaimNext{Device: d, Key: w.key(), Fingerprint: []byte{1}, SessionID: w.id(), TokenHash: HashToken("t")}
		}, nil, ErrDeviceNotReady},
		{"claim", func(w *world) Command {
			d := w.device()
			w.task()
			w.present(d)
			return &ClaimNext{Device: d, Key: w.key(), Fingerprint: []byte{1}, SessionID: w.id(), TokenHash: HashToken("t")}
		}, []events.Type{events.EvTaskClaimed}, nil},
		{"claim with a server-issued token", func(w *world) Command {
			d := w.device()
			w.task()
			w.present(d)
			return &ClaimNext{Device: d, Key: w.key(), Fingerprint: []byte{1}, SessionID: w.id()}
		}, []events.Type{events.EvTaskClaimed}, nil},
		{"start", func(w *world) Command { return w.call(w.claimed(), OpStart) }, []events.Type{events.EvTaskStarted}, nil},
		{"start with another token", func(w *world) Command {
			c := w.call(w.claimed(), OpStart)
			c.TokenHash = HashToken("other")
			return c
		}, nil, ErrClaimTokenMismatch},
		{"start with another generation", func(w *world) Command {
			c := w.call(w.claimed(), OpStart)
			c.Generation++
			return c
		}, nil, ErrClaimGenerationMismatch},
		{"start after the claim lease", func(w *world) Command {
			c := w.call(w.claimed(), OpStart)
			w.now += w.cfg.ClaimLease.Milliseconds()
			return c
		}, nil, ErrLeaseExpired},
		{"start a task not held", func(w *world) Command {
			c := w.call(w.claimed(), OpStart)
			c.TaskID = w.task()
			return c
		}, nil, ErrClaimNotFound},
		{"release", func(w *world) Command { return w.call(w.claimed(), OpRelease) }, []events.Type{events.EvTaskReleased}, nil},
		{"heartbeat with a new step", func(w *world) Command {
			c := w.call(w.running(), OpHeartbeat)
			c.Step = "typing"
			return c
		}, []events.Type{events.EvTaskHeartbeat}, nil},
		{"await confirmation", func(w *world) Command {
			c := w.call(w.running(), OpAwaitConfirmation)
			c.Reason = "ask"
			return c
		}, []events.Type{events.EvTaskAwaitingConfirmation}, nil},
		{"complete", func(w *world) Command {
			c := w.call(w.running(), OpComplete)
			c.Result = `{"ok":true}`
			return c
		}, []events.Type{events.EvTaskCompleted}, nil},
		{"complete another version", func(w *world) Command {
			c := w.call(w.running(), OpComplete)
			c.Result, c.Version = `{"ok":true}`, 99
			return c
		}, nil, ErrVersionMismatch},
		{"complete another execution", func(w *world) Command {
			c := w.call(w.running(), OpComplete)
			c.Result, c.ExecutionID = `{"ok":true}`, w.id()
			return c
		}, nil, ErrExecutionMismatch},
		{"late complete", func(w *world) Command {
			c := w.call(w.running(), OpComplete)
			c.Result = `{"ok":true}`
			w.now += w.cfg.RunningLease.Milliseconds()
			return c
		}, []events.Type{events.EvTaskLateReport}, nil},
		{"fail", func(w *world) Command {
			c := w.call(w.running(), OpFail)
			c.ReasonCode = "broken"
			return c
		}, []events.Type{events.EvTaskFailed}, nil},
		{"cancel-ack without a request", func(w *world) Command { return w.call(w.running(), OpCancelAck) }, nil, ErrCancelNotRequested},
		{"cancel running", func(w *world) Command {
			f := w.running()
			return &Cancel{AdminReq: w.admin(), TaskID: f.task, Reason: "stop"}
		}, []events.Type{events.EvTaskCancelRequested}, nil},
		{"cancel-ack", func(w *world) Command {
			f := w.running()
			w.given(&Cancel{AdminReq: w.admin(), TaskID: f.task, Reason: "stop"})
			return w.call(f, OpCancelAck)
		}, []events.Type{events.EvTaskCanceled}, nil},
		{"recover a live execution", func(w *world) Command {
			f := w.running()
			return &Recover{AdminReq: w.admin(), TaskID: f.task, Decision: events.RecoverRequeue, Reason: "x",
				ExpectedVersion: w.s.Tasks[f.task].Version}
		}, nil, ErrLeaseNotExpired},
		{"recover after the running lease", func(w *world) Command {
			f := w.running()
			w.now += w.cfg.RunningLease.Milliseconds()
			return &Recover{AdminReq: w.admin(), TaskID: f.task, Decision: events.RecoverRequeue, Reason: "x",
				ExpectedVersion: w.s.Tasks[f.task].Version}
		}, []events.Type{events.EvTaskRecovered}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			cmd := c.when(w)
			before, _ := w.s.Canonical()
			got, err := w.decide(cmd)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("refusal %v, want %v", err, c.err)
				}
				if after, _ := w.s.Canonical(); string(after) != string(before) {
					t.Fatal("a refused command changed the state")
				}
				return
			}
			if err != nil || !slices.Equal(got, c.then) {
				t.Fatalf("events %v (%v), want %v", got, err, c.then)
			}
		})
	}
}

// TestDecideIsDeterministic: with ids, nonces and time injected, the same
// commands decide the same events, byte for byte.
func TestDecideIsDeterministic(t *testing.T) {
	run := func() []byte {
		w := newWorld(t)
		f := w.running()
		c := w.call(f, OpComplete)
		c.Result = `{"ok":true}`
		w.given(c)
		b, err := w.s.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if a, b := run(), run(); string(a) != string(b) {
		t.Fatal("two runs of the same commands decided different states")
	}
}
