package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/google/shlex"
	"github.com/spf13/cobra"

	"taskledger/client"
	"taskledger/client/device"
	"taskledger/internal/cli"
)

const (
	appVersion       = "taskledger-agent/1"
	targetAppVersion = "none"
	// presenceEvery is how often presence is refreshed while idle.
	presenceEvery   = 30 * time.Second
	minHeartbeat    = 50 * time.Millisecond
	backoffMin      = 250 * time.Millisecond
	backoffMax      = 30 * time.Second
	terminateGrace  = 30 * time.Second
	maxResultLength = 2048
)

type runner struct {
	src       device.TaskSource
	sink      device.EvidenceSink
	log       *slog.Logger
	clock     client.Clock
	argv      []string
	poll      time.Duration
	heartbeat time.Duration
	checks    map[string]bool
	// learnChecks (no --check given): the checks the server names as
	// missing are added as true (D336).
	learnChecks bool
	stderr      io.Writer
	signals     <-chan os.Signal
	evidence    string // --evidence-file: a PNG the work command may leave
	// startDelay (--start-delay) holds each claim before start, renewed
	// every renewInterval (--renew-every).
	startDelay, renewInterval time.Duration
	startAt                   *startPlan
	startWhen                 []string // --start-when: a precondition command
	// stopping: no new claim; quitting: leave as soon as possible, keeping
	// everything for recovery.
	stopping, quitting bool
	lastPresence       time.Time
	presenceOK         bool
	backoff            time.Duration
	// survivorKilled: the start-up check killed the work command a
	// previous run left behind.
	survivorKilled bool
}

func newRunCmd(stdout, stderr io.Writer, e env) *cobra.Command {
	c := &cobra.Command{Use: "run --exec CMD [flags]", Short: "claim tasks and run CMD for each, until stopped",
		Long: "Run the agent: presence, claim-next, start, run CMD (split like a shell, run without one, the task payload JSON on stdin) with heartbeats, then complete or fail with what CMD reported; every request is persisted before it is sent and replayed after a lost answer. " +
			"Without --check the agent reports agent_running=true and learns the checks the server requires of the device (its missing_checks) as true; with --check it reports exactly those. " +
			"SIGTERM/SIGINT: no new claim, the running task is finished, exit 0; a second signal leaves at once. Exit 3 when a task needs a person (see agent status), 4 when the server refuses the device token."}
	fs := c.Flags()
	state := stateFlag(fs)
	execCmd := fs.String("exec", "", "command to run per task (split like a shell, run without one)")
	poll := fs.Duration("poll", 2*time.Second, "how often to ask for work while idle")
	hb := fs.Duration("heartbeat", 0, "heartbeat interval while running (default and maximum: a third of the running lease)")
	caFile := fs.String("ca-file", "", "PEM file of the certificate authority that signs the server's certificate (a private CA)")
	startWhen := fs.String("start-when", "", "precondition command run (every --poll) before each start; the task starts once it exits 0, its claim renewed meanwhile")
	startDelay := fs.Duration("start-delay", 0, "hold each claim this long before starting it, renewing its lease meanwhile")
	renewEvery := fs.Duration("renew-every", 0, "with --start-delay: renew the claim lease this often (default 200s, a third of the default claim lease)")
	evidence := fs.String("evidence-file", "", "path where the work command may leave a PNG screenshot; it is uploaded as the execution's evidence")
	var checks listFlag
	fs.Var(&checks, "check", "readiness check NAME=true|false (repeatable; default: agent_running=true plus every check the server names as missing)")
	c.RunE = cli.Code(func(pos []string) int {
		if e.signals == nil {
			ch := make(chan os.Signal, 2)
			signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
			defer signal.Stop(ch)
			e.signals = ch
		}
		if len(pos) != 0 || *execCmd == "" {
			//lint:ignore ST1005 the usage line is the message, printed as is
			return fail(stderr, fmt.Errorf("%w: run --exec CMD [--poll 2s] [--check NAME=true|false]...", ErrUsage))
		}
		argv, err := shlex.Split(*execCmd)
		if err != nil || len(argv) == 0 {
			return fail(stderr, fmt.Errorf("%w: %q", ErrBadExec, *execCmd))
		}
		var when []string
		if *startWhen != "" {
			if when, err = shlex.Split(*startWhen); err != nil || len(when) == 0 {
				return fail(stderr, fmt.Errorf("%w: --start-when %q", ErrBadExec, *startWhen))
			}
		}
		chk, learn, err := splitChecks(checks)
		if err != nil {
			return fail(stderr, err)
		}
		if *startDelay < 0 || *renewEvery < 0 || (*renewEvery > 0 && *renewEvery < 10*time.Millisecond) {
			return fail(stderr, fmt.Errorf("%w: --start-delay must not be negative and --renew-every must be at least 10ms", ErrUsage))
		}
		if *poll < 10*time.Millisecond {
			return fail(stderr, fmt.Errorf("%w: --poll must be at least 10ms", ErrUsage))
		}
		dir, err := stateDir(*state)
		if err != nil {
			return fail(stderr, err)
		}
		log := newLogger(stderr, e.clock)
		o := e.devOpts
		if *caFile != "" {
			pool, err := loadCAFile(*caFile)
			if err != nil {
				return fail(stderr, err)
			}
			o.RootCAs = pool
		}
		o.StateDir, o.Clock, o.Logger = dir, e.clock, log
		// Open decrypts every secret first: any state or key problem stops here,
		// before a single request.
		dev, err := device.Open(o)
		if err != nil {
			return fail(stderr, err)
		}
		defer dev.Close()
		r := &runner{src: dev, sink: dev, log: log, clock: e.clock, argv: argv, poll: *poll, heartbeat: *hb, checks: chk, learnChecks: learn,
			stderr: stderr, signals: e.signals, evidence: *evidence, startDelay: *startDelay, renewInterval: *renewEvery, startWhen: when}
		log.Info("agent started", "state", dir, "server", dev.Client().BaseURL(), "device", dev.Client().DeviceID())
		if err := r.reapSurvivor(); err != nil {
			return fail(stderr, err)
		}
		err = r.loop(context.Background())
		if err != nil {
			return fail(stderr, err)
		}
		log.Info("agent stopped")
		return ExitOK
	})
	return c
}

// loop runs until stopped (nil) or a condition a person must see (error).
func (r *runner) loop(ctx context.Context) error {
	for {
		if err := r.src.CheckManual(); err != nil {
			return err
		}
		if r.quitting {
			return nil
		}
		st := r.src.State()
		if p := st.Pending; p != nil && p.Kind != "claim" {
			if err := r.src.ReplayPending(ctx); err != nil {
				if err := r.retryable(err); err != nil {
					return err
				}
			}
			continue
		}
		if st.Active != nil {
			if err := r.work(ctx); err != nil {
				return err
			}
			continue
		}
		if r.stopping {
			if st.Pending != nil {
				r.log.Warn("stopping with a claim of unknown outcome; it is kept and replayed on the next start", "key", st.Pending.Key)
			}
			return nil
		}
		if !r.presenceOK || r.clock.Now().Sub(r.lastPresence) >= presenceEvery {
			if err := r.presence(ctx, ""); err != nil {
				if err := r.retryable(err); err != nil {
					return err
				}
				continue
			}
			if !r.presenceOK {
				r.wait(r.poll)
				continue
			}
		}
		out, err := r.src.Claim(ctx)
		switch {
		case err == nil && out.NoTask:
			r.backoff = 0
			r.wait(max(r.poll, out.RetryAfter))
		case err == nil:
			r.backoff = 0
		case client.IsCode(err, client.CodeDeviceNotReady):
			r.presenceOK = false
			r.wait(r.poll)
		default:
			if err := r.retryable(err); err != nil {
				return err
			}
		}
	}
}

// reapSurvivor runs before anything else: a work command recorded by a
// previous run that still runs (same pid and start time) is killed with
// its process group; the task is then reported as interrupted (needs a
// person) by work.
func (r *runner) reapSurvivor() error {
	a := r.src.State().Active
	if a == nil || !a.Launched || a.WorkPID <= 0 {
		return nil
	}
	fate, err := killSurvivor(a.WorkPID, a.WorkStartTime)
	if err != nil {
		return fmt.Errorf("check the work command of the previous run (pid %d): %w", a.WorkPID, err)
	}
	switch fate {
	case survivorKilled:
		r.survivorKilled = true
		r.log.Warn("killed the work command the previous run left running", "task", a.TaskID, "pid", a.WorkPID)
	case survivorGone:
		r.log.Info("the work command of the previous run is gone", "task", a.TaskID, "pid", a.WorkPID)
	case survivorReused:
		r.log.Info("the pid of the previous work command now belongs to another process; not touched", "task", a.TaskID, "pid", a.WorkPID)
	default:
		r.log.Warn("cannot tell whether the work command of the previous run still runs (no start time recorded); nothing killed", "task", a.TaskID, "pid", a.WorkPID)
	}
	return nil
}

// retryable waits with backoff after an unknown outcome, or returns the
// error when it is not one to retry.
func (r *runner) retryable(err error) error {
	if errors.Is(err, client.ErrUnknownOutcome) {
		r.backoff = min(max(r.backoff*2, backoffMin), backoffMax)
		d := r.backoff/2 + rand.N(r.backoff/2+1)
		r.log.Warn("will replay the same request", "in", d.String(), "err", err.Error())
		r.wait(d)
		return nil
	}
	if errors.Is(err, device.ErrClaimLost) {
		return nil
	}
	return err
}

// presence sends the presence heartbeat with the readiness checks.
func (r *runner) presence(ctx context.Context, activeTask string) error {
	res, err := r.src.Presence(ctx, client.Presence{AppVersion: appVersion,
		OSVersion: runtime.GOOS + "/" + runtime.GOARCH, TargetAppVersion: targetAppVersion,
		Checks: r.checks, ActiveTaskID: activeTask, ClientTime: r.clock.Now()})
	if err != nil {
		return err
	}
	r.lastPresence = r.clock.Now()
	r.presenceOK = res.Claimable
	if !res.Claimable && r.learnChecks && r.learn(res.MissingChecks) {
		return r.presence(ctx, activeTask)
	}
	if !res.Claimable {
		missing := strings.Join(res.MissingChecks, ",")
		hint := "pass --check NAME=true for each missing check once it holds"
		if missing == "" {
			hint = "no check is missing: the device may be disabled or revoked on the server"
		}
		r.log.Warn("device not claimable", "missing_checks", missing, "hint", hint)
	}
	return nil
}

// learn adds the missing checks the agent does not report yet as true and
// reports whether it added any (each check is learned once: one the
// server still names after that is left to the log).
func (r *runner) learn(missing []string) bool {
	var added []string
	for _, c := range missing {
		if _, ok := r.checks[c]; !ok {
			r.checks[c] = true
			added = append(added, c)
		}
	}
	if len(added) == 0 {
		return false
	}
	r.log.Info("reporting the checks the server requires of this device as true (no --check given)",
		"checks", strings.Join(added, ","))
	return true
}

// wait waits d, or less when a signal arrives.
func (r *runner) wait(d time.Duration) {
	if r.quitting {
		return
	}
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case s := <-r.signals:
		r.onSignal(s)
	}
}

func (r *runner) onSignal(s os.Signal) {
	if !r.stopping {
		r.stopping = true
		r.log.Info("signal: no new claim; the current task is finished first (signal again to leave at once, keeping state)", "signal", s.String())
		return
	}
	r.quitting = true
	r.log.Info("second signal: leaving now; everything is kept for recovery", "signal", s.String())
}
