package commands

import (
	"taskledger/projections"
)

// ClaimedTask is the task part of a claim answer (claim-next answered 200):
// the claimed task's payload, revision, creation time and whether it has a
// reference image.
//
// It is read from the task when the answer is built, in the sequencer
// right after the decision, instead of being kept in every idempotency
// record: a claim-next replays 200 only while the recorded claim is still
// the task's open claim, and while a claim is open none of these can change
// (amend and reference-image close a claim first, and a task's creation
// time never changes). So a replay answers exactly what was answered first.
type ClaimedTask struct {
	Payload   string
	Revision  uint64
	CreatedAt int64
	HasImage  bool
	// Takeover is the claim's authorization's takeover policy ("reclaim"
	// or "manual"): the claim is open, so it is the one it was made under.
	Takeover string
}

// claimAnswer adds the claimed task to a claim-next answer of 200.
func claimAnswer(answer func(*projections.State) Result) func(*projections.State) Result {
	return func(s *projections.State) Result {
		res := answer(s)
		r := res.Record
		if r == nil || r.Outcome != projections.OutcomeAccepted {
			return res
		}
		if t := s.Tasks[r.TaskID]; t != nil {
			res.Task = &ClaimedTask{Payload: t.Payload, Revision: t.Revision, CreatedAt: t.CreatedAt, HasImage: t.Image != nil,
				Takeover: takeoverOf("", nil)}
			if t.ManualTakeover() {
				res.Task.Takeover = projections.TakeoverManual
			}
		}
		return res
	}
}
