package commands

import (
	"context"
	"slices"
	"testing"
	"time"

	"taskledger/projections"
)

// closedLoop runs n commands one after another, each sent as soon as the
// one before it was answered (a device's steps), reporting each outcome.
func closedLoop(e *Engine, n int) chan error {
	ch := make(chan error, n)
	go func() {
		for range n {
			_, err := e.Do(context.Background(), newCreate())
			ch <- err
		}
	}()
	return ch
}

func recv(t *testing.T, ch chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no answer", what)
	}
}

// answeredAndOpen starts A's commands (first), holds the commit of A's
// first for hold while B's command arrives into the open batch, then lets
// it commit: A's first is answered, and the open batch may wait for A.
func answeredAndOpen(t *testing.T, startA func(*Engine) chan error, hold time.Duration) (e *Engine, g *gatedLog, a, b chan error) {
	t.Helper()
	e, g, _ = newTestEngineWith(t, func(o *Options) { o.GatherMax = time.Minute })
	release, held := holdNext(g)
	a = startA(e)
	<-held
	b = goDo(e, newCreate())
	waitSequenced(t, e, 2)
	time.Sleep(hold) // the wait after a commit is bounded by its duration
	close(release)
	recv(t, a, "A1")
	return e, g, a, b
}

// TestBatchWaitsForTheCallersTheCommitAnswered: when a batch commits, the
// open batch is not handed off at once: the caller that commit answered
// sends its next command a moment later, and it joins that batch instead
// of waiting for it to commit and then for its own commit.
func TestBatchWaitsForTheCallersTheCommitAnswered(t *testing.T) {
	// A1 commits alone (nothing was in flight) for a second, long enough
	// that A2, sent on A1's answer, surely arrives within the wait.
	_, g, a, b := answeredAndOpen(t, func(e *Engine) chan error { return closedLoop(e, 2) }, time.Second)
	recv(t, a, "A2")
	recv(t, b, "B1")
	if got := g.appends.Load(); got != 2 {
		t.Fatalf("%d appends, want 2: {A1}, then {B1, A2} (without waiting for A2: {A1}, {B1}, {A2})", got)
	}
}

// TestBatchWaitsNoLongerThanTheCommitBefore: callers that do not come
// back hold nothing up for longer than the bound: the open batch commits
// on its own.
func TestBatchWaitsNoLongerThanTheCommitBefore(t *testing.T) {
	_, g, _, b := answeredAndOpen(t, func(e *Engine) chan error { return goDo(e, newCreate()) }, 0) // A never sends another
	recv(t, b, "B1")
	if got := g.appends.Load(); got != 2 {
		t.Fatalf("%d appends, want 2: {A1}, {B1}", got)
	}
}

// TestAWaitingReaderEndsTheWaitForCallers: a reader that starts waiting
// while the open batch waits for callers does not wait for them too: the
// batch goes at once, and the reader reads once it committed.
func TestAWaitingReaderEndsTheWaitForCallers(t *testing.T) {
	// A1's commit lasts 3 s, so the open batch would wait up to 3 s after
	// it for A's next command, which never comes.
	e, _, _, b := answeredAndOpen(t, func(e *Engine) chan error { return goDo(e, newCreate()) }, 3*time.Second)
	// A's answer can go out before the sequencer learned of the commit:
	// give it the moment it needs to start waiting (a reader already
	// waiting then means no wait at all).
	time.Sleep(200 * time.Millisecond)
	start := time.Now() //tl:wallclock the test measures the reader's wait
	n := 0
	e.Read(func(s *projections.State) { n = len(s.Tasks) })
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("the reader waited %v: it waited for the callers the batch waited for", waited)
	}
	if n != 2 {
		t.Fatalf("the reader saw %d tasks, want 2 (A1 and B1 committed)", n)
	}
	recv(t, b, "B1")
}

// TestALoneCallerDoesNotWaitForItself: one caller's commands, one after
// another, each commit alone and at once: the caller the commit answered
// is the one whose next command opens the batch.
func TestALoneCallerDoesNotWaitForItself(t *testing.T) {
	e, g, _ := newTestEngineWith(t, func(o *Options) { o.GatherMax = time.Minute })
	release, held := holdNext(g)
	a := closedLoop(e, 3)
	<-held
	time.Sleep(3 * time.Second) // a long commit: waiting after it would be as long
	close(release)
	recv(t, a, "1")
	start := time.Now() //tl:wallclock the test measures the caller's wait
	recv(t, a, "2")
	recv(t, a, "3")
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("the lone caller's next commands took %v: its batch waited for it", waited)
	}
	if got := g.appends.Load(); got != 3 {
		t.Fatalf("%d appends, want 3", got)
	}
}

// answeredTogether commits callers' first commands in one batch whose
// commit lasts hold (so the wait for their next commands is about hold)
// and returns when all of them were answered: closing next[i] makes
// caller i send its second command; done gets every command's outcome.
func answeredTogether(t *testing.T, callers int, hold time.Duration) (g *gatedLog, next []chan struct{}, done chan error) {
	t.Helper()
	e, g, _ := newTestEngineWith(t, func(o *Options) { o.GatherMax = time.Minute })
	release, held := holdNext(g)
	primer := goDo(e, newCreate()) // commits alone; its commit is held while the callers queue behind it
	<-held
	next = make([]chan struct{}, callers)
	done = make(chan error, 2*callers)
	for i := range callers {
		next[i] = make(chan struct{})
		go func() {
			_, err := e.Do(context.Background(), newCreate())
			done <- err
			<-next[i]
			_, err = e.Do(context.Background(), newCreate())
			done <- err
		}()
	}
	waitSequenced(t, e, uint64(callers)+1)
	release2, held2 := holdNext(g) // the callers' batch
	close(release)
	recv(t, primer, "primer")
	<-held2
	time.Sleep(hold)
	close(release2)
	for range callers {
		recv(t, done, "first command")
	}
	return g, next, done
}

// paced lets caller i send its next command at from + i*every.
func paced(next []chan struct{}, from, every time.Duration) {
	start := time.Now() //tl:wallclock the test paces the callers
	for i := range next {
		time.Sleep(time.Until(start.Add(from + time.Duration(i)*every)))
		close(next[i])
	}
}

// secondBatches waits for the callers' second commands and returns the
// events of each batch committed after the callers' first.
func secondBatches(t *testing.T, g *gatedLog, done chan error, callers int) []int {
	t.Helper()
	for range callers {
		recv(t, done, "second command")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizes[2:])
}

// TestGatherWaitsOnWhileCallersKeepArriving: when the wait for the
// callers the last commit answered runs out while they are still
// arriving, the batch waits on while they keep coming and goes with all
// of them, instead of leaving the late ones a whole commit behind.
func TestGatherWaitsOnWhileCallersKeepArriving(t *testing.T) {
	const callers = 20
	g, next, done := answeredTogether(t, callers, 800*time.Millisecond)
	// The wait is about 800 ms (a lull of 100 ms ends it past that); they
	// send their next commands from 740 ms after their answers, 5 ms
	// apart, the last ones past it.
	paced(next, 740*time.Millisecond, 5*time.Millisecond)
	if got := secondBatches(t, g, done, callers); len(got) != 1 || got[0] != callers {
		t.Fatalf("the batches after the callers' first: %v events, want one of %d", got, callers)
	}
}

// TestGatherWaitsOnNoLongerThanTwiceItsTime: callers that keep arriving
// hold the batch up to twice its wait and no longer: the ones after go in
// the next batch.
func TestGatherWaitsOnNoLongerThanTwiceItsTime(t *testing.T) {
	const callers = 80
	g, next, done := answeredTogether(t, callers, 200*time.Millisecond)
	// The wait is about 200 ms (a lull of 25 ms ends it past that), the
	// cap about 400 ms; they arrive from 100 ms to 495 ms, 5 ms apart:
	// 21 of them within the wait.
	paced(next, 100*time.Millisecond, 5*time.Millisecond)
	if got := secondBatches(t, g, done, callers); len(got) < 2 || got[0] <= 21 || got[0] >= callers {
		t.Fatalf("the batches after the callers' first: %v events, want the first past the wait (more than 21) and cut before the last caller", got)
	}
}
