package nodetest

import (
	"strings"
	"testing"

	"taskledger/events"
	"taskledger/ledger"
)

// Ranger is what CheckOwners reads: a log's events in order (a
// ledger.Backend, or a read-only JetStream log).
type Ranger interface {
	Range(after uint64, fn func(*ledger.Event) error) error
}

// CheckOwners folds the task events of log and fails the test at every
// claim of a task that a device still holds and every claim by a device
// that still holds a task. A claim ends by completion, failure, release,
// cancel or recovery; a claim lease that expires without one of those is
// not seen, so a test whose leases may expire cannot use it. each, when
// not nil, sees every event of the log in the same pass. It returns the
// claims counted.
func CheckOwners(t testing.TB, log Ranger, each func(*ledger.Event)) (claims int) {
	t.Helper()
	owner := map[string]string{} // task → device
	open := map[string]string{}  // device → task
	err := log.Range(0, func(e *ledger.Event) error {
		if each != nil {
			each(e)
		}
		task, isTask := strings.CutPrefix(e.Stream, "task/")
		if !isTask {
			return nil
		}
		switch e.Type {
		case events.EvTaskClaimed:
			b, err := events.DecodeBody(e.Type, e.Schema, e.Body)
			if err != nil {
				return err
			}
			dev := b.(*events.TaskClaimed).DeviceID
			if o := owner[task]; o != "" {
				t.Errorf("seq %d: task %s claimed by %s while %s holds it", e.Seq, task, dev, o)
			}
			if o := open[dev]; o != "" {
				t.Errorf("seq %d: device %s claims %s while it holds %s", e.Seq, dev, task, o)
			}
			owner[task], open[dev] = dev, task
			claims++
		case events.EvTaskCompleted, events.EvTaskFailed, events.EvTaskReleased, events.EvTaskCanceled, events.EvTaskRecovered:
			delete(open, owner[task])
			delete(owner, task)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return claims
}
