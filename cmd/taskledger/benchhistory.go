package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"taskledger/bench"
)

// historySizes parses --finished: one or two ascending sizes (two give
// the slopes).
func historySizes(v string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 100_000_000 {
			return nil, fmt.Errorf("--finished must be one or two numbers from 1 to 100000000, ascending (got %q)", v)
		}
		if len(sizes) > 0 && n <= sizes[len(sizes)-1] {
			return nil, fmt.Errorf("--finished must be one or two numbers from 1 to 100000000, ascending (got %q)", v)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) > 2 {
		return nil, fmt.Errorf("--finished must be one or two numbers from 1 to 100000000, ascending (got %q)", v)
	}
	return sizes, nil
}

// benchHistory is `taskledger bench --mode history`: for each size, a
// generated history of finished plus live tasks, the node's first start,
// snapshot, start from it, heap and filtered list; then the slopes.
func benchHistory(cfg bench.HistoryRunConfig, dataDir string, verify bool, cpu, mem, tr string, stdout, stderr io.Writer) int {
	if dataDir == "" {
		tmp, err := os.MkdirTemp("", "taskledger-bench-history-")
		if err != nil {
			return fail(stderr, "%v", err)
		}
		defer os.RemoveAll(tmp)
		dataDir = tmp
	} else {
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return fail(stderr, "%v", err)
		}
		run, err := os.MkdirTemp(dataDir, "history-")
		if err != nil {
			return fail(stderr, "%v", err)
		}
		dataDir, cfg.Keep = run, true
	}
	gc := tuneGC()
	stopProfiles, err := startProfiles(cpu, mem, tr)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	fmt.Fprintf(stdout, "taskledger bench: %s %s/%s, %d CPUs (GOMAXPROCS %d), %s, history of %v finished + %d live tasks on %d devices, data in %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), gc, cfg.Sizes, cfg.Live, cfg.Devices, dataDir)
	cfg.Root, cfg.Progress = dataDir, stdout
	cfg.End = time.Now().Truncate(time.Millisecond) //tl:wallclock the synthetic history ends now
	if verify {
		cfg.Verify = func(dir string) error {
			if code := verifyDir(dir, stdout, stderr); code != 0 {
				return fmt.Errorf("verify of %s failed", dir)
			}
			return nil
		}
	}
	r, err := bench.RunHistory(cfg)
	if perr := stopProfiles(); perr != nil {
		fmt.Fprintf(stderr, "taskledger: %v\n", perr)
	}
	if err != nil {
		return fail(stderr, "%v", err)
	}
	for _, l := range r.Lines() {
		fmt.Fprintln(stdout, l)
	}
	return 0
}
