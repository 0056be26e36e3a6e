package bench

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
	"taskledger/wire"
)

var historyEnd = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func verifyHistory(t *testing.T, dir string) *node.VerifyReport {
	t.Helper()
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rep, err := node.Verify(store, projections.Config{IdempotencyRetentionMs: commands.DefaultConfig().IdempotencyRetention.Milliseconds()}, nil)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := node.CheckHeadFile(dir, store); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestGeneratedHistoryVerifiesAndContinues generates a small history,
// verifies it as `taskledger verify` does (hash chain, two replays,
// signed checkpoints), checks the tasks' states and devices, and then
// continues it with the real commands on a node: the RUNNING task of a
// device completes, and that device claims a PENDING task — the
// generated events leave the projections where the deciders would.
func TestGeneratedHistoryVerifiesAndContinues(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "h")
	h, err := GenerateHistory(HistoryConfig{Dir: dir, Finished: 60, Live: 40, Devices: 8, End: historyEnd,
		batch: 16, checkpointEvery: 100}) // many transactions, several checkpoints
	if err != nil {
		t.Fatal(err)
	}
	// 8 devices, 60 finished tasks (5 or 6 events), 4 RUNNING (4 events),
	// 4 CLAIMED (2), 32 PENDING (1: more than a transaction holds).
	if want := uint64(8 + 57*5 + 3*6 + 4*4 + 4*2 + 32); h.Events != want {
		t.Errorf("events %d, want %d", h.Events, want)
	}
	rep := verifyHistory(t, dir)
	if rep.Checkpoints < 3 {
		t.Errorf("verify checked %d checkpoints, want at least 3", rep.Checkpoints)
	}

	clock := commands.NewManualClock(historyEnd.Add(time.Second))
	n, err := node.Open(node.Config{DataDir: dir, Commands: commands.DefaultConfig(), Logger: zerolog.Nop(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	counts := map[wire.State]int{}
	byDevice := map[string]map[wire.State]int{}
	var running *projections.Task
	n.Engine.Read(func(st *projections.State) {
		for s, c := range st.StateCounts() { // the ended tasks settled: counted, on disk
			if c > 0 {
				counts[wire.State(s)] = c
			}
		}
		for _, task := range st.Tasks {
			if task.Claim != nil {
				if byDevice[task.Claim.DeviceID] == nil {
					byDevice[task.Claim.DeviceID] = map[wire.State]int{}
				}
				byDevice[task.Claim.DeviceID][task.State]++
				if task.Claim.DeviceID == h.Devices[0] && task.State == projections.StateRunning {
					c := *task
					running = &c
				}
			}
		}
	})
	want := map[wire.State]int{projections.StateSucceeded: 51, projections.StateFailed: 6, projections.StateCanceled: 3,
		projections.StateRunning: 4, projections.StateClaimed: 4, projections.StatePending: 32}
	for s, c := range want {
		if counts[s] != c {
			t.Errorf("%s: %d tasks, want %d (all: %v)", s, counts[s], c, counts)
		}
	}
	for i, d := range h.Devices {
		if got := byDevice[d]; len(got) != 1 {
			t.Errorf("device %d holds %v, want one open task", i, got)
		}
	}
	if running == nil {
		t.Fatal("device 0 holds no RUNNING task")
	}

	ctx := context.Background()
	dev := commands.Principal{DeviceID: h.Devices[0]}
	n.Engine.Read(func(st *projections.State) { dev.OwnerID = st.Devices[h.Devices[0]].OwnerID })
	tok := commands.HashToken(HistoryClaimToken(running.ID))
	res, err := n.Engine.Do(ctx, &commands.TaskCall{Op: commands.OpComplete, Device: dev, TaskID: running.ID, Key: "k-complete",
		Fingerprint: fingerprint("complete"), TokenHash: tok, Generation: running.Generation, ExecutionID: running.Exec.ID,
		Version: running.Version, Result: `{"ok":true}`})
	if _, err := record(res, err, projections.OutcomeAccepted); err != nil {
		t.Fatalf("complete the generated RUNNING task: %v", err)
	}
	if _, err := n.Engine.Do(ctx, &commands.Presence{Device: dev, Presence: projections.Presence{AppVersion: "1", OSVersion: "a",
		TargetAppVersion: "7", Checks: historyChecks}}); err != nil {
		t.Fatal(err)
	}
	res, err = n.Engine.Do(ctx, &commands.ClaimNext{Device: dev, Key: "k-claim", Fingerprint: fingerprint("claim"),
		SessionID: "s", TokenHash: commands.HashToken("t")})
	rec, err := record(res, err, projections.OutcomeAccepted)
	if err != nil {
		t.Fatalf("claim a generated PENDING task: %v", err)
	}
	n.Engine.Read(func(st *projections.State) {
		if task := st.Tasks[rec.TaskID]; task == nil || task.CreateSeq <= running.CreateSeq {
			t.Errorf("claimed %s, want a task created after the running ones", rec.TaskID)
		}
	})
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	verifyHistory(t, dir)
}

// TestGenerateHistoryRefusesALedger: a directory that holds a ledger is
// left as it was.
func TestGenerateHistoryRefusesALedger(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "h")
	h, err := GenerateHistory(HistoryConfig{Dir: dir, Finished: 3, End: historyEnd})
	if err != nil {
		t.Fatal(err)
	}
	_, err = GenerateHistory(HistoryConfig{Dir: dir, Finished: 3, End: historyEnd})
	if !errors.Is(err, ErrHistoryExists) {
		t.Fatalf("second generation: %v, want ErrHistoryExists", err)
	}
	if rep := verifyHistory(t, dir); rep.Head.Seq != h.Events {
		t.Errorf("head %d after the refusal, want %d", rep.Head.Seq, h.Events)
	}
	for _, c := range []HistoryConfig{{Dir: filepath.Join(dir, "x"), Finished: -1}, {Dir: filepath.Join(dir, "y"), Devices: -2}} {
		if _, err := GenerateHistory(c); err == nil || !strings.Contains(err.Error(), "bench: ") {
			t.Errorf("%+v: %v, want a refusal", c, err)
		}
	}
}

// TestRunHistoryReportsSlopes runs the history figures at two tiny sizes
// through the node's public API and checks that every figure and slope
// is there (a benchmark: no figure is asserted beyond being measured).
func TestRunHistoryReportsSlopes(t *testing.T) {
	var verified []string
	r, err := RunHistory(HistoryRunConfig{Root: t.TempDir(), Sizes: []int{100, 300}, Live: 10, Devices: 4, Requests: 5,
		End: historyEnd, Verify: func(dir string) error { verified = append(verified, dir); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Points) != 2 || len(verified) != 2 {
		t.Fatalf("%d points, %d verified, want 2 and 2", len(r.Points), len(verified))
	}
	for _, p := range r.Points {
		if p.SnapshotBytes == 0 || p.Heap == 0 || p.Start == 0 || p.Merkle == 0 || p.ListP99 == 0 || p.ListTasks < 0 || p.ProvenanceP99 == 0 ||
			p.Phases.Load == 0 || p.Phases.DamageCheck == 0 || p.Phases.WithoutDamageCheck() <= 0 {
			t.Errorf("a figure is missing: %+v", p)
		}
	}
	lines := strings.Join(r.Lines(), "\n")
	for _, want := range []string{"history 100 finished + 10 live", "history 300 finished + 10 live",
		"slope 100 → 300 finished: heap after start", "per million finished", "list p99 by device",
		"provenance of a finished task", "its steps: load", "start-up less the check's wait"} {
		if !strings.Contains(lines, want) {
			t.Errorf("report lacks %q:\n%s", want, lines)
		}
	}
}
