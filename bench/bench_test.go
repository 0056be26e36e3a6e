package bench

import (
	"context"
	"strings"
	"taskledger/wire"
	"testing"
	"time"

	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
)

// checkCounts asserts that every loop of a run finished: each claim was
// released or canceled, and each started task was canceled and replaced.
func checkCounts(t *testing.T, res *Result, devices int) {
	t.Helper()
	checkLoopCounts(t, res, LoopMix)
}

// checkLoopCounts is checkCounts for a run of the given loop: the mix
// exercises both loops, the others only their own.
func checkLoopCounts(t *testing.T, res *Result, loop Loop) {
	t.Helper()
	if res.Errors != 0 {
		t.Fatalf("%d errors, first: %v", res.Errors, res.FirstError)
	}
	n := func(op Op) int { return res.PerOp[op].Count }
	if n(OpClaimEmpty) != 0 {
		t.Errorf("%d claims found no task with a pool of twice the devices", n(OpClaimEmpty))
	}
	switch loop {
	case LoopMix:
		if n(OpClaim) == 0 || n(OpRelease) == 0 || n(OpStart) == 0 {
			t.Fatalf("the run did not exercise both loops: %+v", res.PerOp)
		}
	case LoopRelease:
		if n(OpClaim) == 0 || n(OpStart) != 0 {
			t.Fatalf("a claim → release run with %d claims and %d starts: %+v", n(OpClaim), n(OpStart), res.PerOp)
		}
	case LoopFull:
		if n(OpClaim) == 0 || n(OpRelease) != 0 {
			t.Fatalf("a full-loop run with %d claims and %d releases: %+v", n(OpClaim), n(OpRelease), res.PerOp)
		}
	}
	if n(OpClaim) != n(OpRelease)+n(OpStart) {
		t.Errorf("claims %d != releases %d + starts %d", n(OpClaim), n(OpRelease), n(OpStart))
	}
	for _, op := range []Op{OpCancel, OpCancelAck, OpCreate} {
		if n(op) != n(OpStart) {
			t.Errorf("%s %d != starts %d", op, n(op), n(OpStart))
		}
	}
	if n(OpHeartbeat) != 3*n(OpStart) {
		t.Errorf("heartbeats %d != 3 × starts %d", n(OpHeartbeat), n(OpStart))
	}
	sum := 0
	for _, st := range res.PerOp {
		sum += st.Count
	}
	if sum != res.Durable {
		t.Errorf("durable %d != sum by op %d", res.Durable, sum)
	}
	if res.P50 <= 0 || res.P99 < res.P50 || res.P999 < res.P99 || res.Max < res.P999 {
		t.Errorf("percentiles p50 %v p99 %v p99.9 %v max %v", res.P50, res.P99, res.P999, res.Max)
	}
}

// checkLedger verifies the log in dir (node.Verify) and that it holds
// exactly what the run's counts say: registrations and the pool, then one
// event per event-producing command, every task back to PENDING or
// CANCELED and no device holding a task.
func checkLedger(t *testing.T, dir string, res *Result, cfg Config) {
	t.Helper()
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rep, err := node.Verify(store, projections.Config{IdempotencyRetentionMs: (72 * time.Hour).Milliseconds()}, nil)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	n := func(op Op) int { return res.PerOp[op].Count }
	// A heartbeat appends an event only when it changes the step: the
	// first of each execution, or every one with StepEachHeartbeat.
	beats := n(OpStart)
	if cfg.StepEachHeartbeat {
		beats = n(OpHeartbeat)
	}
	want := uint64(cfg.Devices + cfg.Tasks + n(OpClaim) + n(OpRelease) + n(OpStart) + beats +
		n(OpCancel) + n(OpCancelAck) + n(OpCreate))
	if rep.Events != want {
		t.Errorf("log holds %d events, the run's counts give %d", rep.Events, want)
	}
	if res.Events != 0 && res.Events != want-uint64(cfg.Devices+cfg.Tasks) {
		t.Errorf("result names %d events, want %d", res.Events, want-uint64(cfg.Devices+cfg.Tasks))
	}
	states := rep.State.StateCounts() // ended tasks settled: counted, not in memory
	all := 0
	for _, c := range states {
		all += c
	}
	if states[string(projections.StatePending)] != cfg.Tasks || states[string(projections.StateCanceled)] != n(OpCancelAck) ||
		all != cfg.Tasks+n(OpCreate) {
		t.Errorf("task states %v, want %d PENDING and %d CANCELED", states, cfg.Tasks, n(OpCancelAck))
	}
	for _, d := range rep.State.Devices {
		if d.OpenTask != "" {
			if task := rep.State.Tasks[d.OpenTask]; task != nil && task.Open() {
				t.Errorf("device %s still holds task %s (%s)", d.ID, task.ID, task.State)
			}
		}
	}
}

func TestInProcessRunCountsAndVerifies(t *testing.T) {
	cfg := Config{Devices: 4, Tasks: 8, Commands: 300, ManualClock: true}
	dir := t.TempDir()
	res, err := InProcessScenario(context.Background(), dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, res, cfg.Devices)
	if res.Durable < cfg.Commands {
		t.Errorf("durable %d < the %d commands asked for", res.Durable, cfg.Commands)
	}
	// The pauses cover the run's commits only: together they carried
	// exactly the run's events.
	p := res.Pauses
	if p == nil || p.Commits == 0 || p.CommitMax < p.CommitP99 || p.CommitMax <= 0 {
		t.Fatalf("pauses %+v for %d events", p, res.Events)
	}
	if got := int(p.EventsPerCommit*float64(p.Commits) + 0.5); got != int(res.Events) {
		t.Errorf("commits carried %d events, the run appended %d", got, res.Events)
	}
	if p.MaxEventsPerCommit < 1 || p.Snapshots != 0 {
		t.Errorf("pauses %+v: want a batch of at least one event and no snapshot in 300 commands", p)
	}
	if line := res.Line(); !strings.Contains(line, "p99.9") || !strings.Contains(line, "pauses: ") || !strings.Contains(line, "phases p50/p99/max: queued ") {
		t.Errorf("line without p99.9, pauses or phases: %s", line)
	}
	if len(p.Phases) != len(phaseNames) || p.Phases[len(p.Phases)-1].Max <= 0 || p.CommitBusy <= 0 || p.CommitBusy > 1 {
		t.Errorf("pauses %+v: want every phase measured and the committer busy for a fraction of the run", p)
	}
	// The tail and the commits' parts: a bbolt ledger's commit writes
	// pages and syncs them, and its parts fit in the commit.
	if line := res.Line(); !strings.Contains(line, "tail (the slowest 1%, ≥ ") || !strings.Contains(line, "commit parts p50/p99/max: build ") {
		t.Errorf("line without the tail or the commit parts: %s", line)
	}
	if len(p.Tail) != len(phaseNames) || p.TailFrom <= 0 || p.Tail[len(p.Tail)-1] < p.TailFrom {
		t.Errorf("tail %v from %s: want every phase, and a mean total at least the p99", p.Tail, p.TailFrom)
	}
	if len(p.Parts) != len(commitPartNames) || p.Parts[2].P50 <= 0 || p.PageWrites[0] < 2 || p.PageWrites[2] < p.PageWrites[1] {
		t.Fatalf("commit parts %+v, page writes %v: want every part, a write and at least a page and the meta page each", p.Parts, p.PageWrites)
	}
	if p.Parts[2].Max > p.CommitMax {
		t.Errorf("a commit's write took %s, longer than the longest commit %s", p.Parts[2].Max, p.CommitMax)
	}
	checkLedger(t, dir, res, cfg)
}

// With a new step at every heartbeat, every heartbeat appends an event
// (the mix as measured before heartbeats became quiet).
func TestInProcessRunWithStepEachHeartbeat(t *testing.T) {
	cfg := Config{Devices: 4, Tasks: 8, Commands: 300, ManualClock: true, StepEachHeartbeat: true}
	dir := t.TempDir()
	res, err := InProcessScenario(context.Background(), dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, res, cfg.Devices)
	checkLedger(t, dir, res, cfg)
}

// runLocalHTTP runs the HTTP scenario against a server in this process
// (manual clock) and returns its result and ledger directory.
func runLocalHTTP(t *testing.T, cfg Config) (*Result, string) {
	t.Helper()
	dir := t.TempDir()
	ls, err := ServeLocal(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	res, err := HTTPScenario(context.Background(), ls.URL, ls.AdminToken, cfg)
	if cerr := ls.Close(); cerr != nil {
		t.Errorf("close: %v", cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return res, dir
}

func TestHTTPRunCountsAndVerifies(t *testing.T) {
	cfg := Config{Devices: 4, Tasks: 8, Commands: 150}
	res, dir := runLocalHTTP(t, cfg)
	checkCounts(t, res, cfg.Devices)
	checkLedger(t, dir, res, cfg)
}

// Each loop runs only its own commands, names itself in its line, and
// leaves a ledger that verifies and holds exactly what the counts say.
func TestHTTPLoopsRunOnlyTheirCommands(t *testing.T) {
	for _, loop := range []Loop{LoopRelease, LoopFull} {
		t.Run(loop.String(), func(t *testing.T) {
			cfg := Config{Devices: 3, Tasks: 6, Commands: 120, Loop: loop}
			res, dir := runLocalHTTP(t, cfg)
			checkLoopCounts(t, res, loop)
			checkLedger(t, dir, res, cfg)
			if want := map[Loop]string{LoopRelease: "claim → release loop", LoopFull: "full loop"}[loop]; !strings.Contains(res.Name, want) {
				t.Errorf("name %q lacks %q", res.Name, want)
			}
		})
	}
}

func TestParseLoop(t *testing.T) {
	for _, l := range []Loop{LoopMix, LoopRelease, LoopFull} {
		if got, err := ParseLoop(l.String()); err != nil || got != l {
			t.Errorf("ParseLoop(%q) = %v, %v", l, got, err)
		}
	}
	for _, bad := range []string{"", "Mix", "all", "release "} {
		if _, err := ParseLoop(bad); err == nil || !strings.Contains(err.Error(), "want mix, release or full") {
			t.Errorf("ParseLoop(%q): %v", bad, err)
		}
	}
}

func TestRawBaselinesCount(t *testing.T) {
	dir := t.TempDir()
	one, err := RawOneTx(dir, RawStop{Puts: 20})
	if err != nil {
		t.Fatal(err)
	}
	if one.Durable != 20 || one.PerOp[OpPut].Count != 20 {
		t.Errorf("one tx per command: %d durable, want 20", one.Durable)
	}
	gc, err := RawGroupCommit(dir, 8, RawStop{Puts: 200})
	if err != nil {
		t.Fatal(err)
	}
	if gc.Durable != 200 || gc.Errors != 0 {
		t.Errorf("group commit: %d durable, %d errors, want 200 and 0", gc.Durable, gc.Errors)
	}
	// The batches, as the ledger runs print its commits: together they
	// carried every put.
	if p := gc.Pauses; p == nil || int(p.EventsPerCommit*float64(p.Commits)+0.5) != 200 || p.MaxEventsPerCommit > 8 {
		t.Errorf("group commit batches %+v: want 200 puts in batches of at most 8", p)
	} else if line := gc.Line(); !strings.Contains(line, "commits: ") {
		t.Errorf("group commit line without its commits: %s", line)
	}
}

// The HTTP driver's idempotency keys are canonical UUIDv4s, distinct
// within a driver and between drivers.
func TestHTTPKeysAreDistinctUUIDs(t *testing.T) {
	a, b := newKeySource(), newKeySource()
	seen := map[string]bool{}
	for range 5000 {
		for _, k := range []string{a.next(), b.next()} {
			if !wire.IsUUID(k) || seen[k] {
				t.Fatalf("key %q: a UUIDv4 %v, seen before %v", k, wire.IsUUID(k), seen[k])
			}
			seen[k] = true
		}
	}
	a.n.Store(1<<63 - 1)
	if k := a.next(); !wire.IsUUID(k) {
		t.Errorf("a large counter gives %q", k)
	}
}
