//go:build unix

package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"taskledger/node/nodetest/proc"
)

// --evidence-file: a PNG the work command leaves there is uploaded to its
// execution before the completion; a stale file is removed before the next
// run, so a run that leaves none uploads none. A failed command's last
// stderr bytes end its failure detail (within the server's 256 bytes) and
// the last 4 KiB are in the agent's log.
func TestEvidenceFileAndStderrTail(t *testing.T) {
	w := newWorld(t)
	shot := filepath.Join(w.dir, "shot.png")
	withPNG := w.srv.NewTask(t, map[string]any{"mode": "png", "n": 1, "evidence": shot})
	noisy := w.srv.NewTask(t, map[string]any{"mode": "noisy", "n": 2})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a := proc.Start(t, nil, bins.Agent, "run", "--state", w.state, "--exec", strconv.Quote(self)+" "+helperArg,
		"--poll", "50ms", "--heartbeat", "100ms", "--evidence-file", shot)
	a.WaitLine(t, 0, "evidence uploaded", "task="+withPNG)
	a.WaitLine(t, 0, "task finished", "task="+withPNG, "outcome=SUCCEEDED")
	a.WaitLine(t, 0, "task finished", "task="+noisy, "outcome=FAILED")
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(t); code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, a.Stderr())
	}

	if n := w.srv.Count(t, "task.evidence_attached", withPNG); n != 1 {
		t.Fatalf("%d evidence events for the task that left a PNG", n)
	}
	if ev := w.srv.Task(t, withPNG)["evidence"].([]any); len(ev) != 1 || ev[0].(map[string]any)["kind"] != "screenshot" {
		t.Fatalf("evidence %v", ev)
	}
	if n := w.srv.Count(t, "task.evidence_attached", noisy); n != 0 {
		t.Fatalf("a stale screenshot was uploaded to the next task (%d)", n)
	}
	f := w.srv.Task(t, noisy)["failure"].(map[string]any)
	detail, _ := f["detail"].(string)
	if f["reason_code"] != "exit_3" || len(detail) > 256 ||
		!strings.HasPrefix(detail, "command exited with status 3; stderr: …") || !strings.HasSuffix(detail, "LAST-MARKER-2") {
		t.Fatalf("failure %v (detail %d bytes)", f, len(detail))
	}
	line, _ := a.WaitLine(t, 0, "work command failed", "task="+noisy)
	if !strings.Contains(line, "LAST-MARKER-2") || strings.Count(line, "early noise") < 300 {
		t.Fatalf("the log does not keep the stderr tail: %.300s…", line)
	}
}

// The tail keeps the last bytes; the detail is cut at a character
// boundary and never exceeds the server's bound.
func TestFailureDetailFitsAndCutsAtCharacters(t *testing.T) {
	tb := &tailBuffer{max: 8}
	tb.Write([]byte("0123456789"))
	tb.Write([]byte("ab\n"))
	if got := tb.String(); got != "56789ab" {
		t.Fatalf("tail %q", got)
	}
	long := strings.Repeat("é", 300) + "END"
	d := failureDetail("command exited with status 1", long)
	if len(d) > maxDetail || !strings.HasSuffix(d, "END") || !strings.Contains(d, "; stderr: …") {
		t.Fatalf("detail %q (%d bytes)", d, len(d))
	}
	for _, r := range d {
		if r == '\uFFFD' {
			t.Fatalf("detail cut inside a character: %q", d)
		}
	}
	if d := failureDetail("x", ""); d != "x" {
		t.Fatalf("no stderr: %q", d)
	}
}
