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
	} {
		var out, errb bytes.Buffer
		t.Setenv("TASKLEDGER_ADMIN_TOKEN", "")
		if code := run(tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.msg)
		}
	}
}
