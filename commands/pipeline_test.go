package commands

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"taskledger/ledger"
	"taskledger/projections"
)

func newCreate() *CreateTask {
	return &CreateTask{AdminReq: AdminReq{Operator: "op", Key: NewID(), Fingerprint: []byte{1}}, Payload: "{}"}
}

// goDo runs cmd in a goroutine; its outcome arrives on the channel.
func goDo(e *Engine, cmd Command) chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := e.Do(context.Background(), cmd)
		ch <- err
	}()
	return ch
}

func taskCount(e *Engine) int {
	n := 0
	e.Read(func(s *projections.State) { n = len(s.Tasks) })
	return n
}

// TestPipelineDecidesWhileCommitting: commands that arrive while a batch
// commits are decided at once (they see its events), into the next batch,
// and answered only after both committed, in order.
func TestPipelineDecidesWhileCommitting(t *testing.T) {
	e, g, _ := newTestEngine(t)
	id := createTask(t, e)
	release, held := holdNext(g)
	cancel := goDo(e, &Cancel{AdminReq: AdminReq{Operator: "op", Key: NewID(), Fingerprint: []byte{2}}, TaskID: id})
	<-held
	// A second cancel of the same task, decided while the first commits,
	// sees the first: the task is CANCELED, so it is refused.
	again := goDo(e, &Cancel{AdminReq: AdminReq{Operator: "op", Key: NewID(), Fingerprint: []byte{3}}, TaskID: id})
	create := goDo(e, newCreate())
	waitSequenced(t, e, 4)
	select {
	case err := <-again:
		t.Fatalf("a command decided on an uncommitted event was answered before that commit: %v", err)
	case err := <-create:
		t.Fatalf("a command of the open batch was answered before its commit: %v", err)
	default:
	}
	close(release)
	if err := <-cancel; err != nil {
		t.Fatal(err)
	}
	if err := <-again; !errors.Is(err, ErrInvalidState) {
		t.Fatalf("second cancel: %v, want ErrInvalidState (it saw the first)", err)
	}
	if err := <-create; err != nil {
		t.Fatal(err)
	}
	if got := g.appends.Load(); got != 3 {
		t.Fatalf("%d appends, want 3 (create; cancel; the batch decided while it committed)", got)
	}
}

// TestFailedCommitFailsTheOpenBatch: when a commit fails, the batch decided
// on top of it while it committed fails too (every command decided since
// the last good commit is answered unavailable), nothing of either is
// written, and the projections are reloaded as they were.
func TestFailedCommitFailsTheOpenBatch(t *testing.T) {
	e, g, _ := newTestEngine(t)
	createTask(t, e)
	var before []byte
	e.Read(func(s *projections.State) { before, _ = s.Canonical() })
	appends := g.appends.Load()

	release, held := holdNext(g)
	g.failNext.Store(true)
	first := goDo(e, newCreate())
	<-held
	const n = 20
	open := make([]chan error, n)
	for i := range open {
		open[i] = goDo(e, newCreate())
	}
	waitSequenced(t, e, 1+1+n)
	close(release)
	if err := <-first; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the failed batch: %v, want ErrUnavailable", err)
	}
	for _, ch := range open {
		if err := <-ch; !errors.Is(err, ErrUnavailable) {
			t.Fatalf("the open batch after a failed commit: %v, want ErrUnavailable", err)
		}
	}
	if got := g.appends.Load(); got != appends {
		t.Fatalf("%d appends after the failure, want none", got-appends)
	}
	var after []byte
	e.Read(func(s *projections.State) { after, _ = s.Canonical() })
	if !bytes.Equal(before, after) {
		t.Fatal("projections changed after a failed commit")
	}
	if err := e.Err(); err != nil {
		t.Fatalf("a failed append that wrote nothing fenced the engine: %v", err)
	}
	createTask(t, e) // the engine recovered and continues the log
	if got := taskCount(e); got != 2 {
		t.Fatalf("%d tasks, want 2", got)
	}
}

// TestFailedWriteOfTheLogFencesTheEngine: when the log's file could not
// be written or synced (ledger.ErrCommitIO), the failed batch and the one
// decided on top of it are answered unavailable, and so is every later
// command: the engine is fenced (Fenced closed, Err is ErrFenced), appends
// nothing more and hands no capture out, until the process restarts.
func TestFailedWriteOfTheLogFencesTheEngine(t *testing.T) {
	e, g, _ := newTestEngine(t)
	createTask(t, e)
	appends := g.appends.Load()
	release, held := holdNext(g)
	g.ioNext.Store(true)
	first := goDo(e, newCreate())
	<-held
	const n = 20
	open := make([]chan error, n)
	for i := range open {
		open[i] = goDo(e, newCreate())
	}
	waitSequenced(t, e, 1+1+n)
	close(release)
	for i, ch := range append([]chan error{first}, open...) {
		if err := <-ch; !errors.Is(err, ErrUnavailable) {
			t.Fatalf("command %d decided before the failure was answered: %v, want ErrUnavailable", i, err)
		}
	}
	select {
	case <-e.Fenced():
	default:
		t.Fatal("the engine is not fenced after a failed write of the log")
	}
	if err := e.Err(); !errors.Is(err, ErrFenced) || !errors.Is(err, ledger.ErrCommitIO) {
		t.Fatalf("Err = %v, want ErrFenced wrapping ledger.ErrCommitIO", err)
	}
	for range 3 {
		if _, err := e.Do(context.Background(), newCreate()); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a command after the fence: %v, want ErrUnavailable", err)
		}
	}
	if got := g.appends.Load(); got != appends {
		t.Fatalf("%d appends after the failure, want none", got-appends)
	}
	if err := e.CaptureDecided(func(*projections.State) {}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("capture after the fence: %v, want ErrUnavailable", err)
	}
	e.Close()
	if err := e.CaptureDecided(func(*projections.State) {}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("capture of the stopped, fenced engine: %v, want ErrUnavailable (a snapshot of it would hold the failed batch)", err)
	}
}

// TestReadersSeeCommittedStateOnly: a reader that arrives while a batch
// commits and another is decided waits until both committed, then sees
// them; the sequencer stops deciding for it, so it is not starved by a
// steady stream of commands.
func TestReadersSeeCommittedStateOnly(t *testing.T) {
	e, g, _ := newTestEngine(t)
	release, held := holdNext(g)
	first := goDo(e, newCreate())
	<-held
	second := goDo(e, newCreate())
	waitSequenced(t, e, 2)

	read := make(chan int, 1)
	go func() { read <- taskCount(e) }()
	deadline := time.Now().Add(20 * time.Second)
	for e.readers.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the reader never waited")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case n := <-read:
		t.Fatalf("a reader saw %d tasks while both batches were uncommitted", n)
	default:
	}

	// Keep commands coming while the reader waits.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := e.Do(context.Background(), newCreate()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	close(release)
	n := <-read
	close(stop)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("the reader saw %d tasks, want both committed ones", n)
	}
}

// TestAuthenticateFollowsCommits: a device token authenticates from the
// moment its registration is answered (not while it commits) until its
// revocation is answered.
func TestAuthenticateFollowsCommits(t *testing.T) {
	e, g, _ := newTestEngine(t)
	h := HashToken("tldev_" + NewID())
	release, held := holdNext(g)
	reg := make(chan Result, 1)
	go func() {
		res, err := e.Do(context.Background(), &RegisterDevice{AdminReq: AdminReq{Operator: "op", Key: NewID()},
			OwnerID: NewID(), Name: "d", TokenHash: h})
		if err != nil {
			t.Error(err)
		}
		reg <- res
	}()
	<-held
	if _, ok := e.Authenticate(h); ok {
		t.Fatal("a token authenticated before its registration committed")
	}
	close(release)
	res := <-reg
	p, ok := e.Authenticate(h)
	if !ok || p.DeviceID != res.Record.DeviceID {
		t.Fatalf("after the registration: %+v %v", p, ok)
	}
	if _, err := e.Do(context.Background(), &RevokeDevice{AdminReq: AdminReq{Operator: "op", Key: NewID()},
		DeviceID: p.DeviceID, Reason: "lost"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Authenticate(h); ok {
		t.Fatal("a revoked device's token still authenticates")
	}
}

// TestAdvanceSeenByTheOpenBatch: a command decided while a test-clock
// advance commits already runs at the advanced time.
func TestAdvanceSeenByTheOpenBatch(t *testing.T) {
	e, g, clock := newTestEngine(t)
	start := Ms(clock.Now())
	release, held := holdNext(g)
	adv := make(chan Result, 1)
	go func() {
		res, err := e.Do(context.Background(), &AdvanceClock{Seconds: 3600})
		if err != nil {
			t.Error(err)
		}
		adv <- res
	}()
	<-held
	created := make(chan Result, 1)
	go func() {
		res, err := e.Do(context.Background(), &CreateTask{AdminReq: AdminReq{Operator: "op", Key: NewID(), Fingerprint: []byte{1}},
			Payload: "{}", AuthorizeTTL: time.Hour})
		if err != nil {
			t.Error(err)
		}
		created <- res
	}()
	waitSequenced(t, e, 2)
	close(release)
	if res := <-adv; res.Value != start+3_600_000 {
		t.Fatalf("advance answered %v, want %d", res.Value, start+3_600_000)
	}
	res := <-created
	if res.Now != start+3_600_000 {
		t.Fatalf("the command after the advance ran at %d, want %d", res.Now, start+3_600_000)
	}
	e.Read(func(s *projections.State) {
		if tk := s.Tasks[res.Record.TaskID]; tk == nil || tk.CreatedAt != start+3_600_000 || tk.Auth.ExpiresAt != start+7_200_000 {
			t.Errorf("task %+v, want it created at the advanced time", tk)
		}
	})
}

// TestNextCommitDoesNotWaitForAnswers: once a batch committed, the next
// batch commits while the first one's commands are still being answered
// (answering is not on the committer's path), and each is answered after
// its own commit.
func TestNextCommitDoesNotWaitForAnswers(t *testing.T) {
	e, g, _ := newTestEngine(t)
	gate, entered := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.metrics.Command = func(Command, Result, error) { // runs as each command is answered
		once.Do(func() {
			close(entered)
			<-gate
		})
	}
	appends := g.appends.Load()
	first := goDo(e, newCreate())
	<-entered // the first batch committed; its answer is held
	second := goDo(e, newCreate())
	deadline := time.Now().Add(20 * time.Second)
	for g.appends.Load() < appends+2 {
		if time.Now().After(deadline) {
			close(gate)
			t.Fatalf("%d appends while the first batch was being answered, want 2", g.appends.Load()-appends)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-first:
		t.Fatalf("answered while its answer was held: %v", err)
	default:
	}
	close(gate)
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if got := taskCount(e); got != 2 {
		t.Fatalf("%d tasks, want 2", got)
	}
}

// TestMerkleLeavesGrowBeforeTheAnswerWhileTheNextBatchCommits: a batch's
// leaves (Options.Leaves) are handed over after its commit on the
// answering goroutine: while they are, the next batch commits (the tree's
// hashing is not between two commits), and no command of either batch is
// answered until its own leaves are in, in seq order.
func TestMerkleLeavesGrowBeforeTheAnswerWhileTheNextBatchCommits(t *testing.T) {
	inHook, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var firsts []uint64
	e, g, _ := newTestEngineWith(t, func(o *Options) {
		o.Leaves = func(first uint64, raws, _ [][]byte) {
			mu.Lock()
			firsts = append(firsts, first)
			n := len(firsts)
			mu.Unlock()
			if n == 1 {
				close(inHook)
				<-release
			}
		}
	})
	first := goDo(e, newCreate())
	<-inHook
	second := goDo(e, newCreate())
	deadline := time.Now().Add(10 * time.Second)
	for g.appends.Load() < 2 {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("%d appends while the first batch's leaves were handed over, want 2: the next commit waited for the tree", g.appends.Load())
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-first:
		t.Fatalf("a command was answered before its batch's leaves were in the tree: %v", err)
	case err := <-second:
		t.Fatalf("a command was answered before its batch's leaves were in the tree: %v", err)
	default:
	}
	close(release)
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(firsts) != 2 || firsts[0] != 1 || firsts[1] != 2 {
		t.Fatalf("leaves handed over from seqs %v, want [1 2]", firsts)
	}
}

// TestMerkleLeavesAreHashedWhileTheirBatchCommits: with Options.LeafHash
// a batch's leaves are hashed while its commit is still running, not
// between its commit and its answers, and Leaves gets each leaf's hash
// beside its bytes.
func TestMerkleLeavesAreHashedWhileTheirBatchCommits(t *testing.T) {
	hash := func(raw []byte) []byte { h := sha256.Sum256(raw); return h[:] }
	hashedAll := make(chan struct{})
	var hashedN atomic.Int32
	var mu sync.Mutex
	var gotRaws, gotHashes [][]byte
	e, g, _ := newTestEngineWith(t, func(o *Options) {
		o.LeafHash = func(raw []byte) []byte {
			if hashedN.Add(1) == 1 {
				close(hashedAll) // a create appends one event
			}
			return hash(raw)
		}
		o.Leaves = func(first uint64, raws, hashes [][]byte) {
			mu.Lock()
			defer mu.Unlock()
			gotRaws, gotHashes = raws, hashes
		}
	})
	hold, held := holdNext(g)
	done := goDo(e, newCreate())
	<-held // the batch's append waits
	select {
	case <-hashedAll:
	case <-time.After(10 * time.Second):
		close(hold)
		t.Fatal("the leaves were not hashed while their batch's commit was held")
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gotRaws) != 1 || len(gotHashes) != 1 || !bytes.Equal(gotHashes[0], hash(gotRaws[0])) {
		t.Fatalf("Leaves got %d leaves and %d hashes, want one leaf and its hash", len(gotRaws), len(gotHashes))
	}
}

// TestCloseWaitsForTheLeafHashesOfAFailedBatch: a batch that fails is never
// handed to the tree, so nothing waits for its leaves' hashing there;
// Close does, and no hashing goroutine outlives the engine.
func TestCloseWaitsForTheLeafHashesOfAFailedBatch(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	var once sync.Once
	e, g, _ := newTestEngineWith(t, func(o *Options) {
		o.LeafHash = func(raw []byte) []byte {
			once.Do(func() {
				close(started)
				<-release
				finished.Store(true)
			})
			h := sha256.Sum256(raw)
			return h[:]
		}
		o.Leaves = func(uint64, [][]byte, [][]byte) {}
	})
	g.failNext.Store(true)
	if err := <-goDo(e, newCreate()); err == nil {
		t.Fatal("the command of a failed commit was answered without an error")
	}
	<-started
	closed := make(chan struct{})
	go func() { e.Close(); close(closed) }()
	select {
	case <-closed:
		close(release)
		t.Fatal("Close returned while the failed batch's leaves were still being hashed")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if !finished.Load() {
		t.Fatal("the hashing had not finished when Close returned")
	}
}
