package main

import (
	"bytes"
	"strings"
	"testing"
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
		{[]string{"bench", "--mode", "http", "--loop", "fast"}, 2, `invalid value "fast" for flag -loop: --loop must be mix, release, full, all`},
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
