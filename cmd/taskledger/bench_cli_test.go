package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"taskledger/ledger/jetstream/jstest"
)

// TestBenchCommand runs `taskledger bench` briefly in every mode that
// needs no outside server and checks that it prints one line per scenario
// and the ratios of the same run. (A benchmark, not a timed test: no figure
// is asserted.)
func TestBenchCommand(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"bench", "--devices", "2", "--duration", "100ms", "--data", t.TempDir()}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{
		"raw bbolt, 1 tx/command", "raw bbolt, group commit, 2 writers", "raw bbolt, group commit, 64 writers",
		"raw bbolt, group commit, 256 writers", "in-process, 2 devices",
		"ratio in-process 2 devices / raw group commit 2 writers", "ratio in-process 2 devices / raw 1 tx per command",
		"ratio raw group commit 256 writers / raw 1 tx per command", "durable cmds/s",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "ERRORS") {
		t.Errorf("a scenario had errors:\n%s", out.String())
	}

	out.Reset()
	code = run([]string{"bench", "--mode", "http", "--devices", "2", "--duration", "100ms", "--by-op"}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "http, 2 devices (server in this process)") ||
		!strings.Contains(out.String(), "by op: ") {
		t.Fatalf("http mode: exit %d:\n%s%s", code, out.String(), errb.String())
	}

	// --loop all: the mix line as before, then one line for each loop.
	out.Reset()
	code = run([]string{"bench", "--mode", "http", "--devices", "2", "--duration", "100ms", "--loop", "all", "--by-op"}, &out, &errb)
	if code != 0 {
		t.Fatalf("--loop all: exit %d:\n%s%s", code, out.String(), errb.String())
	}
	lines := strings.Split(out.String(), "\n")
	var names []string
	for i, l := range lines {
		if strings.HasPrefix(l, "http, 2 devices") {
			names = append(names, l[:strings.Index(l, " (server in this process)")])
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "    by op: ") {
				t.Errorf("no by-op line after %q", l)
				continue
			}
			byOp := lines[i+1]
			switch {
			case strings.Contains(l, "claim → release loop") && (strings.Contains(byOp, "start ") || !strings.Contains(byOp, "release ")):
				t.Errorf("the release loop ran other commands: %s", byOp)
			case strings.Contains(l, "full loop") && (strings.Contains(byOp, "release ") || !strings.Contains(byOp, "cancel-ack ")):
				t.Errorf("the full loop released or did not finish: %s", byOp)
			}
		}
	}
	want := []string{"http, 2 devices", "http, 2 devices, claim → release loop", "http, 2 devices, full loop"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q:\n%s", names, want, out.String())
	}

	// One loop only: just its line.
	out.Reset()
	code = run([]string{"bench", "--mode", "http", "--devices", "2", "--duration", "100ms", "--loop", "release"}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "http, 2 devices, claim → release loop (server in this process)") ||
		strings.Contains(out.String(), "http, 2 devices (server") || strings.Contains(out.String(), "full loop") {
		t.Errorf("--loop release: exit %d:\n%s%s", code, out.String(), errb.String())
	}
}

func TestBenchCommandFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"bench", "--mode", "fast"}, 1, "--mode must be"},
		{[]string{"bench", "--devices", "0"}, 1, "--devices must be"},
		{[]string{"bench", "--devices", "64,x"}, 1, "--devices must be"},
		{[]string{"bench", "--duration", "0s"}, 1, "--duration must be positive"},
		{[]string{"bench", "--mode", "http", "--url", "http://127.0.0.1:1"}, 1, "--admin-token"},
		{[]string{"bench", "extra"}, 2, "usage: taskledger bench"},
		{[]string{"bench", "--mode", "cluster", "--nats-server", "/nonexistent/nats-server"}, 1, "cluster mode needs the nats-server binary"},
		{[]string{"bench", "--mode", "http", "--loop", "fast"}, 2, `invalid argument "fast" for "--loop" flag: --loop must be mix, release, full, all`},
		{[]string{"bench", "--mode", "http", "--loop", "release,"}, 2, `unknown loop ""`},
		{[]string{"bench", "--mode", "http", "--loop", "Full"}, 2, `unknown loop "Full"`},
	} {
		var out, errb bytes.Buffer
		t.Setenv("TASKLEDGER_ADMIN_TOKEN", "")
		if code := run(tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.msg)
		}
	}
}

// TestBenchReplayMode runs `taskledger bench --mode replay` on small logs
// twice (the second run reuses the kept logs) and checks that one run
// prints every figure, consistent with the logs' sizes, and that both
// logs verify. (No figure of speed is asserted.)
func TestBenchReplayMode(t *testing.T) {
	data := t.TempDir()
	args := []string{"bench", "--mode", "replay", "--events", "3000", "--tasks", "1000", "--tail", "200", "--data", data, "--verify"}
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	first := out.String()
	if strings.Count(first, "building the ") != 2 || strings.Count(first, "verify: ok") != 2 {
		t.Fatalf("the first run did not build and verify both logs:\n%s", first)
	}
	out.Reset()
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("second run: exit %d: %s%s", code, out.String(), errb.String())
	}
	got := out.String()
	if strings.Contains(got, "building the ") {
		t.Fatalf("the second run built its logs again:\n%s", got)
	}
	var events, tasks, records, restored, lifeTasks int
	var tailTasks, tailLife int
	var rGeneric, rEnvelope, recBytes, taskBytes, restoredBytes, fileBytes, storedBytes float64
	// scan reads the line that contains match (spaces collapsed) with format.
	scan := func(match, format string, into ...any) {
		t.Helper()
		for _, l := range strings.Split(got, "\n") {
			if l = strings.Join(strings.Fields(l), " "); strings.Contains(l, match) {
				if _, err := fmt.Sscanf(l, format, into...); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				return
			}
		}
		t.Fatalf("output lacks %q:\n%s", match, got)
	}
	scan("scan + generic msgpack decode", "scan + generic msgpack decode lifecycle (%d events)", &events)
	scan("scan + replay's envelope decoder", "scan + replay's envelope decoder lifecycle (%d events)", new(int))
	scan("full replay (decode + apply)", "full replay (decode + apply) lifecycle (%d events)", new(int))
	scan("tail tasks", "start from snapshot + %d-event tail tasks (%d tasks)", &tailTasks, &restored)
	scan("tail lifecycle", "start from snapshot + %d-event tail lifecycle (%d tasks)", &tailLife, &lifeTasks)
	scan("ratio full replay / scan + generic", "ratio full replay / scan + generic msgpack decode, same log %f", &rGeneric)
	scan("ratio full replay / scan + replay's", "ratio full replay / scan + replay's envelope decoder, same log %f", &rEnvelope)
	scan("memory replayed", "memory replayed (lifecycle): %f B per retained idempotency record (%d records), %f B per task (%d tasks",
		&recBytes, &records, &taskBytes, &tasks)
	scan("memory restored", "memory restored (tasks log): %f B per task", &restoredBytes)
	scan("disk (lifecycle)", "disk (lifecycle): %f file bytes per event (taskledger.db %f MB), %f stored bytes per event",
		&fileBytes, new(float64), &storedBytes)
	scan("disk (tasks log)", "disk (tasks log): snapshot %f MB", new(float64))
	if events < 3000 || events > 3006 || restored != 1000 || tailTasks != 200 || tailLife < 200 || tailLife > 205 {
		t.Errorf("sizes: %d events, %d restored tasks, tails %d and %d; want 3000(+5), 1000, 200 and 200(+5)",
			events, restored, tailTasks, tailLife)
	}
	// 64 devices, then 5 events per task; one record per event.
	if lifeTasks != tasks || tasks < (events-64)/5 || tasks > (events-64)/5+1 || records != events {
		t.Errorf("replayed %d tasks (start: %d), %d records of %d events", tasks, lifeTasks, records, events)
	}
	if rGeneric <= 0 || rEnvelope <= 0 {
		t.Errorf("ratios %.2f (generic) and %.2f (envelope decoder)", rGeneric, rEnvelope)
	}
	if recBytes < 100 || recBytes > 5000 || taskBytes < 100 || taskBytes > 20000 || restoredBytes < 100 || restoredBytes > 20000 {
		t.Errorf("memory figures out of range: %.0f B/record, %.0f B/task, %.0f B/restored task", recBytes, taskBytes, restoredBytes)
	}
	if storedBytes < 200 || fileBytes < storedBytes {
		t.Errorf("disk: %.0f file bytes per event, %.0f stored", fileBytes, storedBytes)
	}
}

func TestBenchReplayModeRefusesBadSizes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--events", "0"}, "--events must be a number from 100"},
		{[]string{"--events", "x"}, `invalid argument "x" for "--events" flag`},
		{[]string{"--tasks", "1"}, "--tasks must be a number from 2"},
		{[]string{"--tail", "0"}, "--tail must be at least 1"},
		{[]string{"--events", "1000", "--tasks", "500", "--tail", "500"}, "--tail must be at least 1 and below"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"bench", "--mode", "replay"}, tc.args...)
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.msg)
		}
	}
}

// TestBenchClusterMode runs the cluster mode against a running cluster
// (--nats-url: three embedded servers here; without it the mode starts
// three nats-server processes): the bbolt run, the R3 run on a verified
// stream, and their ratio, in one run.
func TestBenchClusterMode(t *testing.T) {
	servers := jstest.Cluster(t)
	var out, errb bytes.Buffer
	code := run([]string{"bench", "--mode", "cluster", "--devices", "2", "--duration", "200ms", "--data", t.TempDir(),
		"--nats-url", jstest.URLs(servers), "--verify"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"in-process, 2 devices", "cluster R3 (BENCH2_", "verify: stream BENCH2_",
		"ratio cluster R3 2 devices / in-process (bbolt) 2 devices"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
