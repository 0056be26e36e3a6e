package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"taskledger/client"
	"taskledger/client/device"
	"taskledger/client/localstate"
	"taskledger/wire"
)

// fakeSource is an in-memory device.TaskSource: a queue of payloads, a
// set of required checks, and a record of every report. When the queue is
// empty a claim answers "no task" and sends a stop signal (once).
type fakeSource struct {
	mu       sync.Mutex
	now      func() time.Time
	queue    []json.RawMessage
	required []string
	st       localstate.State
	n        int
	// reports: "complete <task> <result>", "fail <task> <reason>", …
	reports  []string
	presence []map[string]bool
	recorded []int
	stop     chan os.Signal
	stopped  bool
}

func newFakeSource(required []string, payloads ...string) *fakeSource {
	f := &fakeSource{now: time.Now, required: required, stop: make(chan os.Signal, 2)}
	for _, p := range payloads {
		f.queue = append(f.queue, json.RawMessage(p))
	}
	return f
}

func (f *fakeSource) State() localstate.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := f.st
	if f.st.Active != nil {
		a := *f.st.Active
		cp.Active = &a
	}
	cp.Manual = append([]localstate.Manual(nil), f.st.Manual...)
	return cp
}

func (f *fakeSource) CheckManual() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.st.Manual) > 0 {
		m := f.st.Manual[0]
		return &device.NeedsPersonError{ID: m.ID, Code: m.Code, Reason: m.Reason}
	}
	return nil
}

func (f *fakeSource) ReplayPending(context.Context) error { return nil }

func (f *fakeSource) Presence(_ context.Context, p client.Presence) (client.PresenceResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	chk := map[string]bool{}
	for k, v := range p.Checks {
		chk[k] = v
	}
	f.presence = append(f.presence, chk)
	missing := []string{}
	for _, c := range f.required {
		if !p.Checks[c] {
			missing = append(missing, c)
		}
	}
	return client.PresenceResult{ServerTime: f.now(), Claimable: len(missing) == 0, MissingChecks: missing}, nil
}

func (f *fakeSource) Claim(context.Context) (device.ClaimOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queue) == 0 {
		if !f.stopped {
			f.stopped = true
			f.stop <- os.Interrupt
		}
		return device.ClaimOutcome{NoTask: true, RetryAfter: time.Millisecond}, nil
	}
	f.n++
	a := &localstate.Active{TaskID: fmt.Sprintf("task-%d", f.n), Generation: 1, Payload: f.queue[0],
		State: client.StateClaimed, Version: 1, ServerTime: f.now(), LeaseExpiresAt: f.now().Add(time.Minute)}
	f.queue = f.queue[1:]
	f.st.Active = a
	cp := *a
	return device.ClaimOutcome{Active: &cp}, nil
}

// call applies a task call to the held claim.
func (f *fakeSource) call(state wire.State, report string) (client.TaskResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.st.Active
	if a == nil {
		return client.TaskResult{}, device.ErrNoActiveClaim
	}
	a.Version++
	a.State = state
	if a.ExecutionID == "" && state == client.StateRunning {
		a.ExecutionID = "exec-" + a.TaskID
	}
	res := client.TaskResult{TaskID: a.TaskID, State: state, Version: a.Version, ExecutionID: a.ExecutionID,
		ServerTime: f.now(), LeaseExpiresAt: f.now().Add(90 * time.Second)}
	if report != "" {
		f.reports = append(f.reports, report+" "+a.TaskID)
		f.st.Active = nil
	}
	return res, nil
}

func (f *fakeSource) Start(context.Context) (client.TaskResult, error) {
	return f.call(client.StateRunning, "")
}

func (f *fakeSource) Heartbeat(context.Context, string) (client.TaskResult, error) {
	return f.call(client.StateRunning, "")
}

func (f *fakeSource) Renew(context.Context) (client.TaskResult, error) {
	return f.call(client.StateClaimed, "")
}

func (f *fakeSource) Complete(_ context.Context, result json.RawMessage) (client.TaskResult, error) {
	return f.call(client.StateSucceeded, "complete "+string(result))
}

func (f *fakeSource) Fail(_ context.Context, reason, _ string) (client.TaskResult, error) {
	return f.call(client.StateFailed, "fail "+reason)
}

func (f *fakeSource) CancelAck(context.Context) (client.TaskResult, error) {
	return f.call(client.StateCanceled, "cancel-ack")
}

func (f *fakeSource) MarkLaunched() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.Active == nil {
		return device.ErrNoActiveClaim
	}
	f.st.Active.Launched = true
	return nil
}

func (f *fakeSource) RecordWork(pid int, start uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.Active == nil || !f.st.Active.Launched {
		return device.ErrNoActiveClaim
	}
	f.st.Active.WorkPID, f.st.Active.WorkStartTime = pid, start
	f.recorded = append(f.recorded, pid)
	return nil
}

func (f *fakeSource) MarkNeedsPerson(code, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.st.Active
	if a == nil {
		return device.ErrNoActiveClaim
	}
	f.st.Manual = append(f.st.Manual, localstate.Manual{ID: a.TaskID, TaskID: a.TaskID, Code: code, Reason: reason})
	f.st.Active = nil
	return &device.NeedsPersonError{ID: a.TaskID, Code: code, Reason: reason}
}

// fakeSink keeps the evidence it is given.
type fakeSink struct {
	mu    sync.Mutex
	files [][]byte
}

func (s *fakeSink) UploadEvidence(_ context.Context, path string, _ time.Time) (client.EvidenceResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return client.EvidenceResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files = append(s.files, data)
	return client.EvidenceResult{EvidenceID: fmt.Sprint(len(s.files)), Size: int64(len(data))}, nil
}

var (
	_ device.TaskSource   = (*fakeSource)(nil)
	_ device.EvidenceSink = (*fakeSink)(nil)
)
