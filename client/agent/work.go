package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"taskledger/client"
	"taskledger/client/device"
)

// outcome of the work process.
type outcome int

const (
	outcomeExited outcome = iota
	outcomeCanceled
)

// call repeats f (which replays its persisted key) until a definitive
// answer; it gives up only when the agent is told to leave at once.
func (r *runner) call(ctx context.Context, f func() (client.TaskResult, error)) (client.TaskResult, error) {
	for {
		res, err := f()
		if err == nil {
			r.backoff = 0
			return res, nil
		}
		if !errors.Is(err, client.ErrUnknownOutcome) {
			return res, err
		}
		_ = r.retryable(err)
		if r.quitting {
			return res, err
		}
	}
}

// work drives the active claim: start (if needed), a heartbeat, then the
// command, then complete / fail / cancel-ack. A task that was already
// launched before this process started needs a person.
func (r *runner) work(ctx context.Context) error {
	st := r.src.State()
	a := st.Active
	if a.Launched {
		reason := "the task was running when the agent stopped; it is not run again automatically"
		if a.WorkPID == 0 {
			reason = "the agent stopped after launching the task, before its work command was recorded; it is not run again automatically"
		}
		if r.survivorKilled {
			reason += fmt.Sprintf("; its work command (pid %d) was still running and was killed", a.WorkPID)
		}
		return r.src.MarkNeedsPerson("interrupted", reason)
	}
	if a.State == client.StateClaimed {
		if ok, err := r.waitBeforeStart(ctx, a); !ok || err != nil {
			return err
		}
		r.log.Info("starting", "task", a.TaskID, "generation", a.Generation)
		if _, err := r.call(ctx, func() (client.TaskResult, error) { return r.src.Start(ctx) }); err != nil {
			return r.retryable(err)
		}
	}
	// Act on a (possibly replayed) start only after a heartbeat for that
	// execution succeeded.
	hb, err := r.call(ctx, func() (client.TaskResult, error) { return r.src.Heartbeat(ctx, "starting") })
	if err != nil {
		return r.retryable(err)
	}
	a = r.src.State().Active
	if hb.CancelRequested {
		r.log.Info("cancel requested before launch", "task", a.TaskID)
		return r.finish(ctx, a.TaskID, func() (client.TaskResult, error) { return r.src.CancelAck(ctx) })
	}
	if err := r.src.MarkLaunched(); err != nil {
		return err
	}
	if err := r.clearEvidence(); err != nil {
		return err
	}
	tail := &tailBuffer{max: stderrTailSize}
	p, err := startProcess(r.argv, a.Payload, io.MultiWriter(r.stderr, tail), r.src.RecordWork)
	if err != nil {
		r.log.Error("cannot start the command", "task", a.TaskID, "err", err.Error())
		return r.finish(ctx, a.TaskID, func() (client.TaskResult, error) {
			return r.src.Fail(ctx, "exec_failed", truncate("cannot start the command: "+err.Error(), 256))
		})
	}
	r.log.Info("work launched", "task", a.TaskID, "execution", a.ExecutionID, "pid", p.pid())
	how, err := r.supervise(ctx, p, hb)
	if err != nil {
		return err
	}
	if how == outcomeCanceled {
		return r.finish(ctx, a.TaskID, func() (client.TaskResult, error) { return r.src.CancelAck(ctx) })
	}
	r.uploadEvidence(ctx, a.TaskID)
	code := p.exitCode()
	if code == 0 {
		result, rerr := resultJSON(p.stdout.Bytes(), p.stdout.overflow)
		if rerr == nil {
			return r.finish(ctx, a.TaskID, func() (client.TaskResult, error) { return r.src.Complete(ctx, result) })
		}
		return r.finish(ctx, a.TaskID, func() (client.TaskResult, error) {
			return r.src.Fail(ctx, "invalid_output", "exit 0 but stdout is not a JSON object of at most 2 KiB")
		})
	}
	reason := fmt.Sprintf("exit_%d", code)
	detail := fmt.Sprintf("command exited with status %d", code)
	if code < 0 {
		reason, detail = "exit_signal", "command was ended by a signal"
	}
	if t := tail.String(); t != "" {
		r.log.Warn("work command failed", "task", a.TaskID, "reason", reason, "stderr_tail", t)
		detail = failureDetail(detail, t)
	}
	return r.finish(ctx, a.TaskID, func() (client.TaskResult, error) { return r.src.Fail(ctx, reason, detail) })
}

// supervise heartbeats while the process runs; it stops the process on a
// cancel request (outcomeCanceled) or kills it at once when the lease is
// gone (the error says the task needs a person).
func (r *runner) supervise(ctx context.Context, p *process, last client.TaskResult) (outcome, error) {
	interval := r.interval(last)
	for {
		t := r.clock.NewTimer(interval)
		select {
		case <-p.done:
			t.Stop()
			return outcomeExited, nil
		case s := <-r.signals:
			t.Stop()
			r.onSignal(s)
			continue
		case <-t.C():
		}
		res, err := r.src.Heartbeat(ctx, "running")
		switch {
		case err == nil:
			r.backoff = 0
			interval = r.interval(res)
			if res.CancelRequested {
				r.log.Info("cancel requested: stopping the command", "task", res.TaskID)
				p.terminate(r.clock, terminateGrace)
				return outcomeCanceled, nil
			}
		case errors.Is(err, client.ErrUnknownOutcome):
			interval = min(max(r.backoff*2, backoffMin), interval)
			r.backoff = interval
			r.log.Warn("heartbeat outcome unknown; replaying", "err", err.Error())
		default:
			// lease_expired, a lost claim, 401 …: stop at once and report.
			p.kill()
			<-p.done
			r.log.Error("heartbeat refused: the command was stopped", "err", err.Error())
			if errors.Is(err, device.ErrNeedsPerson) {
				return 0, err
			}
			if merr := r.src.MarkNeedsPerson("", "heartbeat refused while running: "+err.Error()); merr != nil {
				return 0, merr
			}
			return 0, err
		}
	}
}

// interval is a third of the running lease the answer shows, or less.
func (r *runner) interval(res client.TaskResult) time.Duration {
	d := res.LeaseExpiresAt.Sub(res.ServerTime) / 3
	if r.heartbeat > 0 && (r.heartbeat < d || d <= 0) {
		d = r.heartbeat
	}
	return max(d, minHeartbeat)
}

// finish sends the call that ends the task until it is definitive.
func (r *runner) finish(ctx context.Context, taskID string, f func() (client.TaskResult, error)) error {
	res, err := r.call(ctx, f)
	if err != nil {
		if errors.Is(err, client.ErrUnknownOutcome) {
			return nil // quitting: the pending call is replayed on the next start
		}
		return err
	}
	r.log.Info("task finished", "task", taskID, "outcome", res.State, "version", res.Version)
	return nil
}

// resultJSON checks that out is one JSON object of at most 2 KiB
// (compacted).
func resultJSON(out []byte, overflow bool) (json.RawMessage, error) {
	if overflow {
		return nil, ErrBadOutput
	}
	trim := bytes.TrimSpace(out)
	if len(trim) == 0 || trim[0] != '{' || !json.Valid(trim) {
		return nil, ErrBadOutput
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trim); err != nil || buf.Len() > maxResultLength {
		return nil, ErrBadOutput
	}
	return buf.Bytes(), nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
