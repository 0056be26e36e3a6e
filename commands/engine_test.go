package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/projections"
)

// gatedLog wraps the real store: it counts appends, can hold an append
// until released, and can fail the next append.
type gatedLog struct {
	store    *ledger.Store
	appends  atomic.Int32
	sizes    []int
	mu       sync.Mutex
	hold     chan struct{} // when set, the next Append waits for it
	held     chan struct{} // closed when an Append is waiting on hold
	failNext atomic.Bool
	ioNext   atomic.Bool // the next append fails as a failed fdatasync of the file would
}

func (g *gatedLog) Append(b *ledger.Batch) error {
	g.mu.Lock()
	hold, held := g.hold, g.held
	g.hold = nil
	g.mu.Unlock()
	if hold != nil {
		close(held)
		<-hold
	}
	if g.failNext.Swap(false) {
		return errors.New("injected commit failure")
	}
	if g.ioNext.Swap(false) {
		return fmt.Errorf("%w: fdatasync: %w", ledger.ErrCommitIO, syscall.EIO)
	}
	g.appends.Add(1)
	g.mu.Lock()
	g.sizes = append(g.sizes, len(b.Events))
	g.mu.Unlock()
	return g.store.Append(b)
}

func newTestEngine(t *testing.T) (*Engine, *gatedLog, *ManualClock) {
	t.Helper()
	return newTestEngineWith(t, nil)
}

// newTestEngineWith is newTestEngine with opt changing the engine's
// options before it starts (hooks).
func newTestEngineWith(t *testing.T, opt func(*Options)) (*Engine, *gatedLog, *ManualClock) {
	t.Helper()
	store, err := ledger.Open(t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	pcfg := projections.Config{IdempotencyRetentionMs: cfg.IdempotencyRetention.Milliseconds()}
	g := &gatedLog{store: store}
	clock := NewManualClock(time.UnixMilli(1_800_000_000_000))
	o := Options{Log: g, State: projections.New(pcfg), Clock: clock, Config: cfg, Logger: zerolog.Nop(),
		Load: func() (*projections.State, error) { return projections.Rebuild(store, pcfg) }}
	if opt != nil {
		opt(&o)
	}
	e := NewEngine(o)
	t.Cleanup(func() {
		e.Close()
		if errors.Is(e.Err(), ErrFenced) { // its projections hold the failed batch: not the log's
			store.Close()
			return
		}
		var live []byte
		e.Read(func(s *projections.State) { live, _ = s.Canonical() })
		rebuilt, err := projections.Rebuild(store, pcfg)
		if err != nil {
			t.Errorf("rebuild: %v", err)
		} else if b, _ := rebuilt.Canonical(); !bytes.Equal(b, live) {
			t.Errorf("projections rebuilt from the log differ from the live ones")
		}
		store.Close()
	})
	return e, g, clock
}

// waitSequenced waits until the sequencer decided n commands since it
// started.
func waitSequenced(t *testing.T, e *Engine, n uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for e.sequenced.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the sequencer decided %d commands, want %d", e.sequenced.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdNext makes the next Append wait until the returned release is
// closed; held is closed once it waits.
func holdNext(g *gatedLog) (release, held chan struct{}) {
	release, held = make(chan struct{}), make(chan struct{})
	g.mu.Lock()
	g.hold, g.held = release, held
	g.mu.Unlock()
	return release, held
}

func createTask(t *testing.T, e *Engine) string {
	t.Helper()
	res, err := e.Do(context.Background(), &CreateTask{AdminReq: AdminReq{Operator: "op", Key: NewID(), Fingerprint: []byte{1}},
		Payload: `{"a":1}`, PayloadSHA256: HashToken(`{"a":1}`), AuthorizeTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return res.Record.TaskID
}

// TestGroupCommit: every command that arrives while a commit runs goes into
// the next transaction — one Append (one fsync) for the whole batch — and
// each is answered only after its batch committed.
func TestGroupCommit(t *testing.T) {
	e, g, _ := newTestEngine(t)
	hold, held := make(chan struct{}), make(chan struct{})
	g.mu.Lock()
	g.hold, g.held = hold, held
	g.mu.Unlock()

	first := make(chan error, 1)
	go func() {
		_, err := e.Do(context.Background(), &CreateTask{AdminReq: AdminReq{Operator: "op", Key: NewID()}, Payload: "{}"})
		first <- err
	}()
	<-held // the first batch is committing

	const n = 50
	var answered atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.Do(context.Background(), &CreateTask{AdminReq: AdminReq{Operator: "op", Key: NewID()}, Payload: "{}"}); err != nil {
				t.Error(err)
			}
			answered.Add(1)
		}()
	}
	waitSequenced(t, e, 1+n) // all decided into the open batch behind the commit
	if answered.Load() != 0 {
		t.Fatalf("%d commands answered before their batch committed", answered.Load())
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := g.appends.Load(); got != 2 {
		t.Fatalf("%d appends for 1+%d commands, want 2 (one per batch)", got, n)
	}
	if g.sizes[1] != n {
		t.Fatalf("second batch carried %d events, want %d", g.sizes[1], n)
	}
}

// TestFailedCommitChangesNothing: a failed commit answers every command of
// its batch as unavailable and leaves the projections exactly as before.
func TestFailedCommitChangesNothing(t *testing.T) {
	e, g, _ := newTestEngine(t)
	createTask(t, e)
	var before []byte
	e.Read(func(s *projections.State) { before, _ = s.Canonical() })

	g.failNext.Store(true)
	_, err := e.Do(context.Background(), &CreateTask{AdminReq: AdminReq{Operator: "op", Key: NewID()}, Payload: "{}"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
	var after []byte
	e.Read(func(s *projections.State) { after, _ = s.Canonical() })
	if !bytes.Equal(before, after) {
		t.Fatal("projections changed after a failed commit")
	}
	// The engine recovered: the next command commits.
	createTask(t, e)
	var tasks int
	e.Read(func(s *projections.State) { tasks = len(s.Tasks) })
	if tasks != 2 {
		t.Fatalf("%d tasks, want 2", tasks)
	}
}

// TestBatchSeesEarlierDecisions: two claims of the only task in one batch —
// the second decision sees the first and finds nothing.
func TestBatchSeesEarlierDecisions(t *testing.T) {
	e, g, _ := newTestEngine(t)
	createTask(t, e)
	var devs []Principal
	for i := 0; i < 2; i++ {
		res, err := e.Do(context.Background(), &RegisterDevice{AdminReq: AdminReq{Operator: "op", Key: NewID()},
			OwnerID: NewID(), Name: "d", HasChecks: true, RequiredChecks: []string{}, TokenHash: HashToken(NewID())})
		if err != nil {
			t.Fatal(err)
		}
		p := Principal{DeviceID: res.Record.DeviceID}
		if _, err := e.Do(context.Background(), &Presence{Device: p, Presence: projections.Presence{Checks: map[string]bool{}}}); err != nil {
			t.Fatal(err)
		}
		devs = append(devs, p)
	}
	hold, held := make(chan struct{}), make(chan struct{})
	g.mu.Lock()
	g.hold, g.held = hold, held
	g.mu.Unlock()
	go func() {
		_, _ = e.Do(context.Background(), &CreateTask{AdminReq: AdminReq{Operator: "op", Key: NewID()}, Payload: "{}"})
	}()
	<-held
	results := make(chan Result, 2)
	for _, d := range devs {
		go func() {
			r, err := e.Do(context.Background(), &ClaimNext{Device: d, Key: NewID(), SessionID: NewID(), TokenHash: HashToken(NewID())})
			if err != nil {
				t.Error(err)
			}
			results <- r
		}()
	}
	waitSequenced(t, e, 5+1+2)
	close(hold)
	statuses := map[projections.Outcome]int{}
	for i := 0; i < 2; i++ {
		r := <-results
		statuses[r.Record.Outcome]++
	}
	// Both claims were decided in one batch; the only claimable task goes to
	// the first, and the second decision already sees it taken.
	if statuses[projections.OutcomeAccepted] != 1 || statuses[projections.OutcomeNoTask] != 1 {
		t.Fatalf("outcomes %v, want one accepted and one no task", statuses)
	}
	if got := g.appends.Load(); got != 5+2 {
		t.Fatalf("%d appends", got)
	}
}
