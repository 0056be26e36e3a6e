// Command compare runs taskledger and its peers one after the other on the
// same machine and prints one table with ratios: the ledger in process
// (taskledger/bench), the SQLite design taskledger replaces (one BEGIN
// IMMEDIATE transaction per claim, WAL, synchronous=FULL), River with its
// SQLite driver (no-op jobs, fetch + complete), and raw bbolt (one
// transaction per put, and group commit).
//
// It is a module of its own so that taskledger's module never depends on
// SQLite or River:
//
//	cd bench/compare && go run . --duration 5s
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite"

	"taskledger/bench"
	"taskledger/internal/gcfloor"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// row is one line of the table.
type row struct {
	name   string
	unit   string // what one operation is
	ops    int
	took   time.Duration
	lat    []time.Duration // sorted; empty when not measured per operation
	cpu    time.Duration
	note   string
	failed error
}

func (r *row) perSecond() float64 {
	if r.took <= 0 {
		return 0
	}
	return float64(r.ops) / r.took.Seconds()
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	duration := fs.Duration("duration", 5*time.Second, "length of each scenario")
	devices := fs.Int("devices", 256, "simulated devices of the ledger run, and the writers of raw group commit")
	sqliteWorkers := fs.Int("sqlite-workers", 16, "concurrent claimers of the SQLite design")
	sqliteTasks := fs.Int("sqlite-tasks", 60000, "PENDING tasks the SQLite run starts with (it ends early when they run out)")
	riverWorkers := fs.Int("river-workers", 100, "River's MaxWorkers")
	riverJobs := fs.Int("river-jobs", 20000, "jobs inserted before the River run (it ends early when they are done)")
	only := fs.String("only", "ledger,sqlite,river,raw", "comma-separated scenarios to run")
	data := fs.String("data", "", "directory for the runs' files (default: a temporary directory, removed afterwards)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	root := *data
	if root == "" {
		tmp, err := os.MkdirTemp("", "taskledger-compare-")
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer os.RemoveAll(tmp)
		root = tmp
	} else if err := os.MkdirAll(root, 0o700); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	gc := "GOGC from the environment"
	if os.Getenv("GOGC") == "" {
		// What taskledger serve and bench run with (less the soft memory
		// limit, which bounds the floor there).
		gcfloor.Set(gcfloor.DefaultPercent, gcfloor.DefaultFloor)
		gc = fmt.Sprintf("GOGC=%d, heap floor %d MiB", gcfloor.DefaultPercent, gcfloor.DefaultFloor>>20)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		want[strings.TrimSpace(s)] = true
	}
	fmt.Fprintf(stdout, "compare: %s %s/%s, %d CPUs (GOMAXPROCS %d), %s, %s per scenario, data in %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), gc, *duration, root)

	var rows []*row
	add := func(r *row) {
		rows = append(rows, r)
		fmt.Fprintf(stdout, "  done: %s: %.0f %s/s%s\n", r.name, r.perSecond(), r.unit, errNote(r.failed))
	}
	if want["ledger"] {
		add(ledgerRun(ctx, filepath.Join(root, "ledger"), *devices, *duration))
	}
	if want["sqlite"] {
		add(sqliteRun(ctx, filepath.Join(root, "sqlite"), *sqliteWorkers, *sqliteTasks, *duration))
	}
	if want["river"] {
		add(riverRun(ctx, filepath.Join(root, "river"), *riverWorkers, *riverJobs, *duration))
	}
	if want["raw"] {
		add(fromResult(bench.RawOneTx(filepath.Join(root, "raw"), bench.RawStop{Duration: *duration})))
		add(fromResult(bench.RawGroupCommit(filepath.Join(root, "raw"), *devices, bench.RawStop{Duration: *duration})))
	}
	printTable(stdout, rows)
	for _, r := range rows {
		if r.failed != nil {
			return 1
		}
	}
	return 0
}

func errNote(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf(" (FAILED: %v)", err)
}

// printTable prints every row with its ratio to the ledger's row.
func printTable(w io.Writer, rows []*row) {
	var ledgerRate float64
	for _, r := range rows {
		if strings.HasPrefix(r.name, "taskledger") {
			ledgerRate = r.perSecond()
		}
	}
	fmt.Fprintf(w, "\n| %-46s | %-16s | %9s | %8s | %8s | %8s | %8s | %8s | %s |\n", "scenario", "operation", "ops/s", "p50", "p99", "p99.9", "max", "CPU/op", "ledger / this")
	fmt.Fprintf(w, "| %s | %s | %s: | %s: | %s: | %s: | %s: | %s: | %s: |\n", strings.Repeat("-", 46), strings.Repeat("-", 16),
		strings.Repeat("-", 8), strings.Repeat("-", 7), strings.Repeat("-", 7), strings.Repeat("-", 7), strings.Repeat("-", 7), strings.Repeat("-", 7), strings.Repeat("-", 12))
	for _, r := range rows {
		lat := func(p int) string {
			if len(r.lat) == 0 {
				return "–"
			}
			i := max((len(r.lat)*p+999)/1000-1, 0)
			return fmtDur(r.lat[i])
		}
		cpu := "–"
		if r.ops > 0 && r.cpu > 0 {
			cpu = fmtDur(r.cpu / time.Duration(r.ops))
		}
		ratio := "–"
		if rate := r.perSecond(); rate > 0 && ledgerRate > 0 {
			ratio = fmt.Sprintf("%.2f", ledgerRate/rate)
		}
		name := r.name
		if r.failed != nil {
			name += " (FAILED)"
		}
		fmt.Fprintf(w, "| %-46s | %-16s | %9.0f | %8s | %8s | %8s | %8s | %8s | %12s |\n", name, r.unit, r.perSecond(),
			lat(500), lat(990), lat(999), lat(1000), cpu, ratio)
	}
	for _, r := range rows {
		if r.note != "" {
			fmt.Fprintf(w, "%s: %s\n", r.name, r.note)
		}
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond).String()
	}
	return d.Round(100 * time.Nanosecond).String()
}

// fromResult turns a taskledger/bench result into a row.
func fromResult(res *bench.Result, err error) *row {
	if err != nil {
		return &row{name: "raw bbolt", unit: "put", failed: err}
	}
	r := &row{name: res.Name, unit: "put", ops: res.Durable, took: res.Elapsed, cpu: res.CPU}
	// The raw results keep percentiles only: show them as a 1,000-rank
	// distribution of four points.
	r.lat = percentileStub(res)
	return r
}

// percentileStub is a sorted 1,000-entry latency list whose p50, p99,
// p99.9 and max are the result's.
func percentileStub(res *bench.Result) []time.Duration {
	lat := make([]time.Duration, 1000)
	for i := range lat {
		switch {
		case i < 500:
			lat[i] = res.P50
		case i < 990:
			lat[i] = res.P99
		case i < 999:
			lat[i] = res.P999
		default:
			lat[i] = res.Max
		}
	}
	return lat
}

// ledgerRun is taskledger in process: the benchmark's command mix
// (claim → release, and claim → start → heartbeats → cancel → cancel-ack
// → a replacement task), every command answered after its fsync; the
// ledger is verified afterwards.
func ledgerRun(ctx context.Context, dir string, devices int, d time.Duration) *row {
	res, err := bench.InProcessScenario(ctx, dir, bench.Config{Devices: devices, Duration: d})
	if err != nil {
		return &row{name: "taskledger in process", unit: "command", failed: err}
	}
	r := &row{name: fmt.Sprintf("taskledger in process, %d devices", devices), unit: "durable command",
		ops: res.Durable, took: res.Elapsed, cpu: res.CPU, lat: percentileStub(res)}
	if res.Errors > 0 {
		r.failed = fmt.Errorf("%d errors, first: %v", res.Errors, res.FirstError)
	}
	claims := res.PerOp[bench.OpClaim].Count
	r.note = fmt.Sprintf("%d claims (%.0f/s) among %d commands, %d events", claims, float64(claims)/res.Elapsed.Seconds(), res.Durable, res.Events)
	if res.Pauses != nil {
		r.note += "; " + res.Pauses.Line()
	}
	if err := verifyLedger(dir); err != nil {
		r.failed = fmt.Errorf("verify: %w", err)
	} else {
		r.note += "; verify: ok"
	}
	return r
}

func verifyLedger(dir string) error {
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer store.Close()
	_, err = node.Verify(store, projections.Config{IdempotencyRetentionMs: (72 * time.Hour).Milliseconds()}, nil)
	return err
}

// openSQLite opens path with WAL and synchronous=FULL; BeginTx starts
// BEGIN IMMEDIATE transactions.
func openSQLite(path string, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(30000)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	var mode string
	var syncMode int
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.QueryRow("PRAGMA synchronous").Scan(&syncMode); err != nil {
		db.Close()
		return nil, err
	}
	if mode != "wal" || syncMode != 2 {
		db.Close()
		return nil, fmt.Errorf("sqlite: journal_mode %s synchronous %d, want wal and 2 (FULL)", mode, syncMode)
	}
	return db, nil
}

const sqliteSchema = `
CREATE TABLE tasks (
	id INTEGER PRIMARY KEY,
	state TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	payload TEXT NOT NULL,
	device_id TEXT,
	lease_expires_at INTEGER,
	version INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX tasks_claimable ON tasks (state, created_at, id);
CREATE TABLE events (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	task_id INTEGER NOT NULL,
	type TEXT NOT NULL,
	at INTEGER NOT NULL,
	body TEXT NOT NULL
);`

// sqliteRun is the design taskledger replaces: workers each claim in one
// BEGIN IMMEDIATE transaction (select the oldest PENDING task, update it,
// insert an event row), WAL, synchronous=FULL.
func sqliteRun(ctx context.Context, dir string, workers, tasks int, d time.Duration) *row {
	r := &row{name: fmt.Sprintf("SQLite, BEGIN IMMEDIATE per claim, %d workers", workers), unit: "claim"}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		r.failed = err
		return r
	}
	path := filepath.Join(dir, "tasks.db")
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		_ = os.Remove(p)
	}
	db, err := openSQLite(path, workers)
	if err != nil {
		r.failed = err
		return r
	}
	defer db.Close()
	if _, err := db.Exec(sqliteSchema); err != nil {
		r.failed = err
		return r
	}
	if err := fillTasks(ctx, db, tasks); err != nil {
		r.failed = err
		return r
	}
	lats := make([][]time.Duration, workers)
	var empty atomic.Bool
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	cpu0, start := processCPU(), time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			device := fmt.Sprintf("device-%d", w)
			for ctx.Err() == nil && time.Since(start) < d && !empty.Load() {
				t0 := time.Now()
				ok, err := claimSQLite(ctx, db, device)
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				if !ok {
					empty.Store(true)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	r.took, r.cpu = time.Since(start), processCPU()-cpu0
	for _, l := range lats {
		r.lat = append(r.lat, l...)
	}
	slices.Sort(r.lat)
	r.ops = len(r.lat)
	r.failed = first
	var claimed, evs int
	if err := db.QueryRow("SELECT (SELECT count(*) FROM tasks WHERE state = 'CLAIMED'), (SELECT count(*) FROM events)").Scan(&claimed, &evs); err != nil && r.failed == nil {
		r.failed = err
	}
	if r.failed == nil && (claimed != r.ops || evs != r.ops) {
		r.failed = fmt.Errorf("%d claims answered, %d tasks CLAIMED and %d event rows", r.ops, claimed, evs)
	}
	r.note = fmt.Sprintf("%d tasks CLAIMED and %d event rows after the run (of %d PENDING)", claimed, evs, tasks)
	if empty.Load() {
		r.note += "; the PENDING tasks ran out before the duration: raise --sqlite-tasks"
	}
	return r
}

func fillTasks(ctx context.Context, db *sql.DB, n int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, err := tx.Prepare("INSERT INTO tasks (state, created_at, payload) VALUES ('PENDING', ?, ?)")
	if err != nil {
		return err
	}
	base := time.Now().UnixMilli()
	for i := range n {
		if _, err := st.Exec(base+int64(i), `{"action":"bench","n":1}`); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// claimSQLite claims the oldest PENDING task in one BEGIN IMMEDIATE
// transaction; false when there is none.
func claimSQLite(ctx context.Context, db *sql.DB, device string) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var id int64
	err = tx.QueryRowContext(ctx, "SELECT id FROM tasks WHERE state = 'PENDING' ORDER BY created_at, id LIMIT 1").Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	now := time.Now().UnixMilli()
	res, err := tx.ExecContext(ctx, "UPDATE tasks SET state = 'CLAIMED', device_id = ?, lease_expires_at = ?, version = version + 1 WHERE id = ? AND state = 'PENDING'",
		device, now+30000, id)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return false, fmt.Errorf("sqlite: task %d was not PENDING inside its own transaction", id)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO events (task_id, type, at, body) VALUES (?, 'task.claimed', ?, ?)",
		id, now, fmt.Sprintf(`{"device_id":%q,"lease_expires_at":%d}`, device, now+30000)); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// noopArgs is River's benchmark job.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverRun inserts jobs, then lets River (SQLite driver, one connection as
// its documentation asks) fetch, run and complete them; a job counts once
// River reports it completed.
func riverRun(ctx context.Context, dir string, workers, jobs int, d time.Duration) *row {
	r := &row{name: fmt.Sprintf("River + riversqlite, %d workers, no-op jobs", workers), unit: "job"}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		r.failed = err
		return r
	}
	path := filepath.Join(dir, "river.db")
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		_ = os.Remove(p)
	}
	db, err := openSQLite(path, 1)
	if err != nil {
		r.failed = err
		return r
	}
	defer db.Close()
	drv := riversqlite.New(db)
	mig, err := rivermigrate.New(drv, nil)
	if err == nil {
		_, err = mig.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		r.failed = fmt.Errorf("river migrate: %w", err)
		return r
	}
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{})
	client, err := river.NewClient(drv, &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers: ws,
		Logger:  nil,
	})
	if err != nil {
		r.failed = err
		return r
	}
	params := make([]river.InsertManyParams, jobs)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err == nil {
		_, err = client.InsertManyFastTx(ctx, tx, params)
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
	}
	if err != nil {
		r.failed = fmt.Errorf("river insert: %w", err)
		return r
	}
	completed, cancel := client.Subscribe(river.EventKindJobCompleted)
	defer cancel()
	cpu0, start := processCPU(), time.Now()
	if err := client.Start(ctx); err != nil {
		r.failed = err
		return r
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
loop:
	for r.ops < jobs {
		select {
		case ev, ok := <-completed:
			if !ok {
				break loop
			}
			if ev.Job != nil && ev.Job.FinalizedAt != nil {
				r.lat = append(r.lat, ev.Job.FinalizedAt.Sub(ev.Job.CreatedAt))
			}
			r.ops++
		case <-deadline.C:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	r.took, r.cpu = time.Since(start), processCPU()-cpu0
	r.lat = nil // from insertion: not comparable with the others' per-operation latency
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopCancel()
	if err := client.Stop(stopCtx); err != nil && r.failed == nil {
		r.failed = err
	}
	r.note = fmt.Sprintf("%d of %d inserted jobs completed (fetch + work + complete)", r.ops, jobs)
	if r.ops == jobs {
		r.note += "; every job was done before the duration: raise --river-jobs"
	}
	return r
}
