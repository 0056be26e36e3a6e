package commands

import (
	"errors"
	"testing"

	"taskledger/projections"
)

// goCapture runs CaptureDecided in a goroutine: the head and task count fn
// saw, then the outcome, arrive on the channels.
func goCapture(e *Engine) (chan int, chan error) {
	seen, done := make(chan int, 1), make(chan error, 1)
	go func() {
		done <- e.CaptureDecided(func(s *projections.State) { seen <- len(s.Tasks) })
	}()
	return seen, done
}

// TestCaptureDecidedWaitsForItsEvents: a capture taken while a batch
// commits and another is decided runs at once, on the decided events
// (it does not wait for the pipeline to empty), and returns only after
// every event it saw committed.
func TestCaptureDecidedWaitsForItsEvents(t *testing.T) {
	e, g, _ := newTestEngine(t)
	createTask(t, e)
	release, held := holdNext(g)
	first := goDo(e, newCreate())
	<-held
	second := goDo(e, newCreate())
	waitSequenced(t, e, 3)
	seen, done := goCapture(e)
	if n := <-seen; n != 3 { // fn ran while the first batch was held
		t.Fatalf("the capture saw %d tasks, want 3 (both decided creates)", n)
	}
	select {
	case err := <-done:
		t.Fatalf("the capture returned (%v) before its events committed", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCaptureDecidedFailsWithItsBatch: when a batch holding an event the
// capture saw fails, the capture returns ErrUnavailable.
func TestCaptureDecidedFailsWithItsBatch(t *testing.T) {
	e, g, _ := newTestEngine(t)
	release, held := holdNext(g)
	g.failNext.Store(true)
	first := goDo(e, newCreate())
	<-held
	seen, done := goCapture(e)
	if n := <-seen; n != 1 {
		t.Fatalf("the capture saw %d tasks, want the decided one", n)
	}
	close(release)
	if err := <-done; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("capture over a failed batch: %v, want ErrUnavailable", err)
	}
	if err := <-first; !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
}

// TestCaptureDecidedWhenIdleOrStopped: with nothing uncommitted the
// capture returns at once; after Close it runs on the final projections.
func TestCaptureDecidedWhenIdleOrStopped(t *testing.T) {
	e, _, _ := newTestEngine(t)
	createTask(t, e)
	seen, done := goCapture(e)
	if n, err := <-seen, <-done; n != 1 || err != nil {
		t.Fatalf("idle capture: %d tasks, %v", n, err)
	}
	e.Close()
	seen, done = goCapture(e)
	if n, err := <-seen, <-done; n != 1 || err != nil {
		t.Fatalf("capture after Close: %d tasks, %v", n, err)
	}
}
