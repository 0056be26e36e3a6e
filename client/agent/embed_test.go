//go:build unix

package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"taskledger/client"
	"taskledger/client/device"
)

func selfExec(t *testing.T) []string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{self, helperArg}
}

// Run over a fake task source and evidence sink (no server): with no
// checks given it learns the required one from the presence answer, runs
// each task's command (recorded before it runs), completes, fails, and
// hands the PNG left by the command to the sink.
func TestRunOverFakeSource(t *testing.T) {
	dir := t.TempDir()
	ev := filepath.Join(dir, "shot.png")
	src := newFakeSource([]string{"accessibility_connected"},
		`{"mode":"ok","n":1}`, `{"mode":"exit","n":2,"code":7}`, `{"mode":"png","n":3,"evidence":"`+ev+`"}`)
	sink := &fakeSink{}
	var log bytes.Buffer
	err := Run(context.Background(), Config{Source: src, Evidence: sink, EvidenceFile: ev, Exec: selfExec(t),
		Poll: minHeartbeat, Logger: newLogger(&syncWriter{w: &log}, client.SystemClock{}), Signals: src.stop})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	want := []string{`complete {"ok":1} task-1`, "fail exit_7 task-2", `complete {"ok":3} task-3`}
	if !slices.Equal(src.reports, want) {
		t.Fatalf("reports %q, want %q\n%s", src.reports, want, log.String())
	}
	if len(src.recorded) != 3 || slices.Contains(src.recorded, 0) {
		t.Fatalf("recorded pids %v", src.recorded)
	}
	if len(sink.files) != 1 || !bytes.HasPrefix(sink.files[0], []byte("\x89PNG")) {
		t.Fatalf("sink got %d files", len(sink.files))
	}
	first := src.presence[0]
	if len(first) != 1 || !first["agent_running"] || !src.presence[1]["accessibility_connected"] {
		t.Fatalf("presence checks %v", src.presence)
	}
	if !strings.Contains(log.String(), "checks=accessibility_connected") {
		t.Fatalf("log does not name the learned check:\n%s", log.String())
	}
}

// With explicit checks Run adds nothing: a missing check claims nothing,
// and a launched task found at start is reported interrupted.
func TestRunOverFakeSourceExplicitChecksAndInterrupted(t *testing.T) {
	src := newFakeSource([]string{"accessibility_connected"}, `{"mode":"ok","n":1}`)
	src.stop <- os.Interrupt // stop after the first wait
	err := Run(context.Background(), Config{Source: src, Exec: selfExec(t), Poll: minHeartbeat,
		Checks: map[string]bool{"agent_running": true}, Signals: src.stop})
	if err != nil || len(src.reports) != 0 || src.n != 0 {
		t.Fatalf("err %v, reports %v, claims %d", err, src.reports, src.n)
	}
	if len(src.presence) == 0 || src.presence[len(src.presence)-1]["accessibility_connected"] {
		t.Fatalf("an explicit check set grew: %v", src.presence)
	}

	src = newFakeSource(nil, `{"mode":"ok","n":2}`)
	if _, err := src.Claim(context.Background()); err != nil { // a task held …
		t.Fatal(err)
	}
	src.st.Active.Launched = true // … and launched by a previous run
	err = Run(context.Background(), Config{Source: src, Exec: selfExec(t)})
	var np *device.NeedsPersonError
	if !errors.As(err, &np) || np.Code != "interrupted" {
		t.Fatalf("launched task at start: %v", err)
	}
	if err := Run(context.Background(), Config{Exec: selfExec(t)}); !errors.Is(err, ErrUsage) {
		t.Fatalf("no source: %v", err)
	}
}
