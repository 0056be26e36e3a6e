package main

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"taskledger/bench"
)

// replayConfig checks the replay mode's sizes: a bad value is a usage
// error (exit 2).
func replayConfig(events, tasks, tail int64, stderr io.Writer) (bench.ReplayConfig, int) {
	const most = 100_000_000
	switch {
	case events < 100 || events > most:
		fmt.Fprintf(stderr, "taskledger: --events must be a number from 100 to %d\n", most)
	case tasks < 2 || tasks > most:
		fmt.Fprintf(stderr, "taskledger: --tasks must be a number from 2 to %d\n", most)
	case tail < 1 || tail >= min(events, tasks):
		fmt.Fprintln(stderr, "taskledger: --tail must be at least 1 and below --events and --tasks")
	default:
		return bench.ReplayConfig{Events: uint64(events), Tasks: uint64(tasks), Tail: uint64(tail)}, 0
	}
	return bench.ReplayConfig{}, 2
}

// benchReplay is `taskledger bench --mode replay`: the replay, start-up,
// memory and disk figures of two logs kept in dataDir (built there by the
// first run; without --data, in a temporary directory removed after).
func benchReplay(rc bench.ReplayConfig, dataDir string, verify bool, cpu, mem, tr string, stdout, stderr io.Writer) int {
	if dataDir == "" {
		tmp, err := os.MkdirTemp("", "taskledger-bench-replay-")
		if err != nil {
			return fail(stderr, "%v", err)
		}
		defer os.RemoveAll(tmp)
		dataDir = tmp
	} else if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fail(stderr, "%v", err)
	}
	gc := tuneGC()
	stopProfiles, err := startProfiles(cpu, mem, tr)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	fmt.Fprintf(stdout, "taskledger bench: %s %s/%s, %d CPUs (GOMAXPROCS %d), %s, replay of %d events, start at %d tasks, logs in %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), gc, rc.Events, rc.Tasks, dataDir)
	rc.Root, rc.Progress = dataDir, stdout
	r, err := bench.Replay(rc)
	if perr := stopProfiles(); perr != nil {
		fmt.Fprintf(stderr, "taskledger: %v\n", perr)
	}
	if err != nil {
		return fail(stderr, "%v", err)
	}
	for _, l := range r.Lines() {
		fmt.Fprintln(stdout, l)
	}
	if verify {
		for _, l := range []*bench.ReplayLog{r.Lifecycle, r.TasksLog} {
			if code := verifyDir(l.Dir, stdout, stderr); code != 0 {
				return code
			}
		}
	}
	return 0
}
