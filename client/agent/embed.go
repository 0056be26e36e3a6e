package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"time"

	"taskledger/client"
	"taskledger/client/device"
)

// Config is what Run needs: the seams (a task source and an evidence
// sink) and the `agent run` settings.
type Config struct {
	// Source gives work and takes reports (required); *device.Device is
	// the HTTP implementation.
	Source device.TaskSource
	// Evidence takes the PNG the command leaves at EvidenceFile (required
	// when EvidenceFile is set).
	Evidence     device.EvidenceSink
	EvidenceFile string
	// Exec is the work command's argv (run without a shell).
	Exec []string
	// Poll (default 2 s) and Heartbeat (default: a third of the running
	// lease) are --poll and --heartbeat.
	Poll, Heartbeat time.Duration
	// Checks are the readiness checks reported; nil learns them from the
	// presence answers (D336).
	Checks map[string]bool
	// Clock (default the system clock), Logger (default discard), Stderr
	// (the command's stderr; default discard), Signals (a first value
	// stops the next claim, a second leaves at once; nil: none).
	Clock   client.Clock
	Logger  *slog.Logger
	Stderr  io.Writer
	Signals <-chan os.Signal
}

// Run is `agent run` over c.Source: it kills a work command a previous run
// left behind, then presence, claim, start, run, report — until a signal
// stops it (nil) or something needs a person (a *device.NeedsPersonError).
func Run(ctx context.Context, c Config) error {
	if c.Source == nil || len(c.Exec) == 0 || (c.EvidenceFile != "" && c.Evidence == nil) {
		return fmt.Errorf("%w: Config needs Source and Exec (and Evidence with EvidenceFile)", ErrUsage)
	}
	r := &runner{src: c.Source, sink: c.Evidence, argv: c.Exec, poll: c.Poll, heartbeat: c.Heartbeat,
		evidence: c.EvidenceFile, clock: c.Clock, log: c.Logger, stderr: c.Stderr, signals: c.Signals}
	if r.poll <= 0 {
		r.poll = 2 * time.Second
	}
	if r.clock == nil {
		r.clock = client.SystemClock{}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.stderr == nil {
		r.stderr = io.Discard
	}
	if c.Checks == nil {
		r.checks, r.learnChecks = map[string]bool{"agent_running": true}, true
	} else {
		r.checks = maps.Clone(c.Checks)
	}
	if err := r.reapSurvivor(); err != nil {
		return err
	}
	return r.loop(ctx)
}
