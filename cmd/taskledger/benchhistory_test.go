package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchHistoryMode runs `taskledger bench --mode history` at two tiny
// sizes with --verify: each generated history passes `taskledger verify`
// before the node opens it, and the run prints each size's figures and
// the four slopes. With --data the histories are kept there.
func TestBenchHistoryMode(t *testing.T) {
	data := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"bench", "--mode", "history", "--finished", "200,400", "--live", "20", "--history-devices", "4",
		"--requests", "5", "--data", data, "--verify"}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out.String(), errb.String())
	}
	s := out.String()
	if n := strings.Count(s, "    verify: ok: "); n != 2 {
		t.Errorf("%d verify lines, want 2:\n%s", n, s)
	}
	for _, want := range []string{
		"history 200 finished + 20 live", "history 400 finished + 20 live", "finished tasks/s", "start from snapshot",
		"list SUCCEEDED by device, limit 100", "slope 200 → 400 finished: heap after start",
		"slope 200 → 400 finished: start-up", "slope 200 → 400 finished: snapshot", "slope 200 → 400 finished: list p99 by device",
		"list SUCCEEDED from a cursor spread over the history, limit 100", "slope 200 → 400 finished: page p99 deep in it",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	kept, _ := filepath.Glob(filepath.Join(data, "history-*", "history-400-20", "taskledger.db"))
	if len(kept) != 1 {
		entries, _ := os.ReadDir(data)
		t.Errorf("the 400-task history is not kept under --data: %v", entries)
	}
}

func TestBenchHistoryModeRefusesBadSizes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--finished", "0"}, "--finished must be one or two numbers"},
		{[]string{"--finished", "400,200"}, "ascending"},
		{[]string{"--finished", "1,2,3"}, "--finished must be one or two numbers"},
		{[]string{"--finished", "x"}, "--finished must be one or two numbers"},
		{[]string{"--live", "-1"}, "--live must be a number from 0"},
		{[]string{"--history-devices", "0"}, "--history-devices must be a number from 1"},
		{[]string{"--requests", "0"}, "--requests must be a number from 1"},
		{[]string{"--per-day", "0"}, "--per-day must be a number from 1"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"bench", "--mode", "history", "--data", t.TempDir()}, tc.args...)
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.msg)
		}
		if out.Len() != 0 {
			t.Errorf("%v: a refused run printed %q", tc.args, out.String())
		}
	}
}
