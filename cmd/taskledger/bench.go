package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"taskledger/bench"

	"github.com/spf13/cobra"
)

// rawWriters are the group-commit baselines every raw run measures.
var rawWriters = []int{64, 256}

func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	c := command("bench", nil)
	fs := c.Flags()
	devicesFlag := fs.String("devices", "256", "concurrent simulated devices (a comma-separated list runs each)")
	duration := fs.Duration("duration", 10*time.Second, "length of each scenario")
	mode := fs.String("mode", "all", "inprocess, http, raw, replay, history, cluster, or all (raw baselines + in-process, + http when --url is given; replay, history and cluster only by name)")
	natsServer := fs.String("nats-server", "nats-server", "cluster mode: the nats-server binary to start three servers of (separate processes on loopback)")
	natsURL := fs.String("nats-url", "", "cluster mode: a running NATS cluster's URLs (comma-separated) instead of starting one")
	url := fs.String("url", "", "http mode: base URL of a running server (without it, a server is started in this process on loopback)")
	adminToken := envString(fs, "admin-token", "", "http mode with --url: an admin token of that server")
	data := fs.String("data", "", "directory for the benchmark's ledgers and bbolt files (default: a temporary directory, removed afterwards)")
	byOp := fs.Bool("by-op", false, "print counts and latencies by command under each ledger scenario")
	verify := fs.Bool("verify", false, "verify each in-process ledger after its run")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := fs.String("memprofile", "", "write an allocation profile (all allocations of the run) to this file")
	traceFile := fs.String("trace", "", "write a runtime execution trace of the whole run to this file (large: keep --duration short)")
	replayEvents := fs.Int64("events", 1_000_000, "replay mode: events of the lifecycle log (scans, full replay, memory and disk figures)")
	replayTasks := fs.Int64("tasks", 1_000_000, "replay mode: tasks of the tasks-only log (start from snapshot + tail)")
	replayTail := fs.Int64("tail", 10_000, "replay mode: events after each log's snapshot")
	historyFinished := fs.String("finished", "1000000,4000000", "history mode: finished tasks of each generated history, one or two ascending sizes (two give the slopes)")
	historyLive := fs.Int("live", 100_000, "history mode: live (open) tasks after the finished ones")
	historyDevices := fs.Int("history-devices", 64, "history mode: devices the tasks are spread over (the list filters by one of them)")
	historyRequests := fs.Int("requests", 200, "history mode: timed list requests per size")
	historyPerDay := fs.Int("per-day", 100_000, "history mode: finished tasks per day of the history (with the 72 h idempotency retention, the last three days' tasks stay live)")
	beatSteps := fs.String("heartbeat-steps", "same", "in-process runs: same (heartbeats keep one step per execution and append no event), each (every heartbeat reports a new step and appends one, as before quiet heartbeats), or both (the two, in this run)")
	loops := loopsFlag{bench.LoopMix}
	fs.Var(&loops, "loop", "http runs: mix (the benchmark's mix of both loops), release (claim → release only), full (the full loop only), or a comma-separated list of them (all: the three), each on its own server and line")
	c.RunE = runCode(func(pos []string) int {
		if len(pos) > 0 {
			fmt.Fprintln(stderr, "usage: taskledger bench [--devices N[,N…]] [--duration D] [--mode inprocess|http|raw|replay|all] [--loop mix|release|full|all] [--url URL --admin-token T] [--data DIR] [--events N --tasks N --tail N] [--finished N[,N] --live N --history-devices N --requests N --per-day N]")
			return 2
		}
		var devices []int
		for _, f := range strings.Split(*devicesFlag, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 100000 {
				return fail(stderr, "--devices must be a number from 1 to 100000 (or a comma-separated list of them)")
			}
			devices = append(devices, n)
		}
		if *duration <= 0 {
			return fail(stderr, "--duration must be positive")
		}
		var beatModes []bool // StepEachHeartbeat per in-process run
		switch *beatSteps {
		case "same":
			beatModes = []bool{false}
		case "each":
			beatModes = []bool{true}
		case "both":
			beatModes = []bool{true, false}
		default:
			return fail(stderr, "--heartbeat-steps must be same, each or both")
		}
		runRaw, runIn, runHTTP, runCluster := false, false, false, false
		switch *mode {
		case "replay":
			rc, code := replayConfig(*replayEvents, *replayTasks, *replayTail, stderr)
			if code != 0 {
				return code
			}
			return benchReplay(rc, *data, *verify, *cpuProfile, *memProfile, *traceFile, stdout, stderr)
		case "history":
			sizes, err := historySizes(*historyFinished)
			switch {
			case err != nil:
				fmt.Fprintf(stderr, "taskledger: %v\n", err)
				return 2
			case *historyLive < 0 || *historyLive > 100_000_000:
				fmt.Fprintln(stderr, "taskledger: --live must be a number from 0 to 100000000")
				return 2
			case *historyDevices < 1 || *historyDevices > 100_000:
				fmt.Fprintln(stderr, "taskledger: --history-devices must be a number from 1 to 100000")
				return 2
			case *historyRequests < 1 || *historyRequests > 1_000_000:
				fmt.Fprintln(stderr, "taskledger: --requests must be a number from 1 to 1000000")
				return 2
			case *historyPerDay < 1 || *historyPerDay > 100_000_000:
				fmt.Fprintln(stderr, "taskledger: --per-day must be a number from 1 to 100000000")
				return 2
			}
			hc := bench.HistoryRunConfig{Sizes: sizes, Live: *historyLive, Devices: *historyDevices, Requests: *historyRequests, PerDay: *historyPerDay}
			return benchHistory(hc, *data, *verify, *cpuProfile, *memProfile, *traceFile, stdout, stderr)
		case "all":
			runRaw, runIn, runHTTP = true, true, *url != ""
		case "raw":
			runRaw = true
		case "inprocess":
			runIn = true
		case "http":
			runHTTP = true
		case "cluster":
			runIn, runCluster = true, true
		default:
			return fail(stderr, "--mode must be inprocess, http, raw, replay, history, cluster or all")
		}
		if runCluster && *natsURL == "" {
			if _, err := exec.LookPath(*natsServer); err != nil {
				return fail(stderr, "cluster mode needs the nats-server binary (--nats-server PATH) or a running cluster (--nats-url): %v", err)
			}
		}
		if *url != "" && *adminToken == "" && runHTTP {
			return fail(stderr, "--url needs --admin-token (or TASKLEDGER_ADMIN_TOKEN)")
		}

		root := *data
		if root == "" {
			tmp, err := os.MkdirTemp("", "taskledger-bench-")
			if err != nil {
				return fail(stderr, "%v", err)
			}
			defer os.RemoveAll(tmp)
			root = tmp
		} else {
			if err := os.MkdirAll(root, 0o700); err != nil {
				return fail(stderr, "%v", err)
			}
			run, err := os.MkdirTemp(root, "bench-")
			if err != nil {
				return fail(stderr, "%v", err)
			}
			root = run
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()

		gc := tuneGC()
		stopProfiles, err := startProfiles(*cpuProfile, *memProfile, *traceFile)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		defer func() {
			if err := stopProfiles(); err != nil {
				fmt.Fprintf(stderr, "taskledger: %v\n", err)
			}
		}()
		fmt.Fprintf(stdout, "taskledger bench: %s %s/%s, %d CPUs (GOMAXPROCS %d), %s, %s per scenario, data in %s\n",
			runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), gc, *duration, root)
		results := map[string]*bench.Result{}
		show := func(key string, r *bench.Result) {
			results[key] = r
			fmt.Fprintln(stdout, r.Line())
			if *byOp && key[0] != 'r' {
				fmt.Fprintln(stdout, r.OpLine())
			}
		}
		cfg := func(n int) bench.Config { return bench.Config{Devices: n, Duration: *duration} }

		if runRaw {
			r, err := bench.RawOneTx(filepath.Join(root, "raw"), bench.RawStop{Duration: *duration})
			if err != nil {
				return fail(stderr, "%v", err)
			}
			show("raw-1tx", r)
			writers := slices.Clone(rawWriters)
			for _, n := range devices {
				if !slices.Contains(writers, n) {
					writers = append(writers, n)
				}
			}
			slices.Sort(writers)
			for _, n := range writers {
				r, err := bench.RawGroupCommit(filepath.Join(root, "raw"), n, bench.RawStop{Duration: *duration})
				if err != nil {
					return fail(stderr, "%v", err)
				}
				show(fmt.Sprintf("raw-gc-%d", n), r)
			}
		}
		if runIn {
			for _, n := range devices {
				for _, each := range beatModes {
					key, c := fmt.Sprintf("in-%d", n), cfg(n)
					if each {
						key, c.StepEachHeartbeat = fmt.Sprintf("in-each-%d", n), true
					}
					dir := filepath.Join(root, "inprocess-"+key)
					r, err := bench.InProcessScenario(ctx, dir, c)
					if err != nil {
						return fail(stderr, "in-process, %d devices: %v", n, err)
					}
					if each {
						r.Name += " (a new step every heartbeat)"
					}
					show(key, r)
					if *verify {
						if code := verifyDir(dir, stdout, stderr); code != 0 {
							return code
						}
					}
				}
			}
		}
		if runCluster {
			if code := benchCluster(ctx, root, *natsServer, *natsURL, devices, cfg, *verify, show, stdout, stderr); code != 0 {
				return code
			}
		}
		if runHTTP {
			for _, n := range devices {
				for _, loop := range loops {
					c := cfg(n)
					c.Loop = loop
					key := httpKey(loop, n)
					base, tok := *url, *adminToken
					var local *bench.LocalServer
					if base == "" {
						var err error
						if local, err = bench.ServeLocal(filepath.Join(root, key), false); err != nil {
							return fail(stderr, "%v", err)
						}
						base, tok = local.URL, local.AdminToken
					}
					r, err := bench.HTTPScenario(ctx, base, tok, c)
					if local != nil {
						if cerr := local.Close(); cerr != nil && err == nil {
							err = cerr
						}
						if r != nil {
							r.Name += " (server in this process)"
						}
					}
					if err != nil {
						return fail(stderr, "http, %d devices, %s loop: %v", n, loop, err)
					}
					show(key, r)
				}
			}
		}
		printRatios(stdout, results, devices)
		for _, r := range results {
			if r.Errors > 0 {
				return fail(stderr, "some commands failed (see above)")
			}
		}
		return 0
	})
	return c
}

// httpKey names an http run's result: http-N for the mix (as before the
// loops could be chosen), http-LOOP-N for the others.
func httpKey(l bench.Loop, n int) string {
	if l == bench.LoopMix {
		return fmt.Sprintf("http-%d", n)
	}
	return fmt.Sprintf("http-%s-%d", l, n)
}

// loopsFlag is --loop: the loops of the http runs, in the order given.
type loopsFlag []bench.Loop

func (f *loopsFlag) String() string {
	var names []string
	for _, l := range *f {
		names = append(names, l.String())
	}
	return strings.Join(names, ",")
}

func (f *loopsFlag) Type() string { return "loops" }

func (f *loopsFlag) Set(v string) error {
	if v == "all" {
		*f = loopsFlag{bench.LoopMix, bench.LoopRelease, bench.LoopFull}
		return nil
	}
	var loops loopsFlag
	for _, name := range strings.Split(v, ",") {
		l, err := bench.ParseLoop(strings.TrimSpace(name))
		if err != nil {
			return fmt.Errorf("--loop must be mix, release, full, all or a comma-separated list of them: %w", err)
		}
		if !slices.Contains(loops, l) {
			loops = append(loops, l)
		}
	}
	*f = loops
	return nil
}

// printRatios prints the comparisons measured in this run.
func printRatios(w io.Writer, res map[string]*bench.Result, devices []int) {
	ratio := func(label, a, b, note string) {
		ra, rb := res[a], res[b]
		if ra == nil || rb == nil || rb.PerSecond() == 0 {
			return
		}
		fmt.Fprintf(w, "ratio %-52s %7.2f%s\n", label, ra.PerSecond()/rb.PerSecond(), note)
	}
	for _, n := range devices {
		ratio(fmt.Sprintf("in-process %d devices / raw group commit %d writers", n, n), fmt.Sprintf("in-%d", n), fmt.Sprintf("raw-gc-%d", n), "  (aim ≥ 0.75)")
	}
	for _, n := range devices {
		ratio(fmt.Sprintf("in-process %d devices, quiet / a new step every heartbeat", n), fmt.Sprintf("in-%d", n), fmt.Sprintf("in-each-%d", n), "")
	}
	for _, n := range devices {
		ratio(fmt.Sprintf("in-process %d devices / raw 1 tx per command", n), fmt.Sprintf("in-%d", n), "raw-1tx", "")
	}
	for _, n := range rawWriters {
		ratio(fmt.Sprintf("raw group commit %d writers / raw 1 tx per command", n), fmt.Sprintf("raw-gc-%d", n), "raw-1tx", "")
	}
	for _, n := range devices {
		ratio(fmt.Sprintf("http %d devices / in-process %d devices", n, n), fmt.Sprintf("http-%d", n), fmt.Sprintf("in-%d", n), "")
	}
	for _, n := range devices {
		ratio(fmt.Sprintf("cluster R3 %d devices / in-process (bbolt) %d devices", n, n), fmt.Sprintf("cluster-%d", n), fmt.Sprintf("in-%d", n), "  (aim ≥ 0.4)")
	}
}

func verifyDir(dir string, stdout, stderr io.Writer) int {
	var out strings.Builder
	code := verifyOffline(&verifyFlags{data: dir, retention: 72 * time.Hour}, &out, stderr)
	fmt.Fprintf(stdout, "    verify: %s", out.String())
	return code
}

// startProfiles starts the profiles named (empty: not taken); the
// returned function writes them.
func startProfiles(cpu, mem, tr string) (func() error, error) {
	var closers []func() error
	stop := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	if mem != "" {
		runtime.MemProfileRate = 64 * 1024
		closers = append(closers, func() error {
			f, err := os.Create(mem)
			if err != nil {
				return err
			}
			return errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		})
	}
	if cpu != "" {
		f, err := os.Create(cpu)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		closers = append(closers, func() error { pprof.StopCPUProfile(); return f.Close() })
	}
	if tr != "" {
		f, err := os.Create(tr)
		if err != nil {
			_ = stop()
			return nil, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			_ = stop()
			return nil, err
		}
		closers = append(closers, func() error { trace.Stop(); return f.Close() })
	}
	return stop, nil
}

// benchCluster runs the in-process scenario on an R3 stream of a NATS
// cluster of three separate nats-server processes (started from bin, or
// the running cluster at url), after the bbolt runs of the same devices.
func benchCluster(ctx context.Context, root, bin, url string, devices []int, cfg func(int) bench.Config, verify bool,
	show func(string, *bench.Result), stdout, stderr io.Writer) int {
	if url == "" {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		c, err := bench.StartNATSCluster(sctx, bin, filepath.Join(root, "nats"))
		cancel()
		if err != nil {
			return fail(stderr, "cluster mode: %v", err)
		}
		defer func() {
			if err := c.Close(); err != nil {
				fmt.Fprintf(stderr, "taskledger: stopping nats-server: %v\n", err)
			}
		}()
		url = c.URL
		fmt.Fprintf(stdout, "three nats-server processes (%s) on %s\n", bin, url)
	}
	for _, n := range devices {
		name := fmt.Sprintf("BENCH%d_%d", n, os.Getpid())
		r, err := bench.ClusterScenario(ctx, filepath.Join(root, "cluster-"+strconv.Itoa(n)), url, name, cfg(n), verify)
		if r != nil {
			show(fmt.Sprintf("cluster-%d", n), r)
		}
		if err != nil {
			return fail(stderr, "cluster, %d devices: %v", n, err)
		}
		if verify {
			fmt.Fprintf(stdout, "    verify: stream %s_EVENTS ok\n", name)
		}
	}
	return 0
}
