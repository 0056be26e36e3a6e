package projections

import (
	"cmp"
	"container/heap"
	"slices"
)

// The claim indexes. Both are heaps with lazy deletion: an entry is checked
// against the task when it reaches the top and dropped if it no longer
// describes the task. Every push and pop is O(log n); nothing scans.

// queueEntry is a candidate for claim selection, ordered by
// (created_at, creation seq).
type queueEntry struct {
	createdAt int64
	createSeq uint64
	taskID    string
	epoch     uint64
}

type taskQueue []queueEntry

func (q taskQueue) Len() int { return len(q) }
func (q taskQueue) Less(i, j int) bool {
	if q[i].createdAt != q[j].createdAt {
		return q[i].createdAt < q[j].createdAt
	}
	return q[i].createSeq < q[j].createSeq
}
func (q taskQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *taskQueue) Push(x any)   { *q = append(*q, x.(queueEntry)) }
func (q *taskQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// expiryEntry is a claim lease that returns its task to the queue once it
// expires.
type expiryEntry struct {
	expiresAt  int64
	taskID     string
	generation uint64
}

type expiryHeap []expiryEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expiresAt < h[j].expiresAt }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryEntry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// enqueue makes t a claim candidate (again); older entries of t go stale.
func (s *State) enqueue(t *Task) {
	s.queueCounter++
	t.queueEpoch = s.queueCounter
	heap.Push(&s.queue, queueEntry{createdAt: t.CreatedAt, createSeq: t.CreateSeq, taskID: t.ID, epoch: t.queueEpoch})
}

// dequeue makes every queue entry of t stale.
func (s *State) dequeue(t *Task) { t.queueEpoch = 0 }

// reindex puts t into the index that matches its state after an event.
func (s *State) reindex(t *Task) {
	s.trackHeld(t)
	switch {
	case t.queueable():
		if t.queueEpoch == 0 {
			s.enqueue(t)
		}
	case t.State == StateClaimed && t.Claim != nil:
		s.dequeue(t)
		heap.Push(&s.claimExpiry, expiryEntry{expiresAt: t.Claim.LeaseExpiresAt, taskID: t.ID, generation: t.Claim.Generation})
	default:
		s.dequeue(t)
	}
}

// queueable reports whether t belongs in the claim queue: PENDING with
// an active authorization that matches it.
func (t *Task) queueable() bool {
	return t.State == StatePending && t.Auth != nil && t.Auth.Status == AuthActive && t.authMatches()
}

// authMatches reports whether the authorization snapshot matches the task's
// revision, payload and reference image (time is not considered).
func (t *Task) authMatches() bool {
	a := t.Auth
	img := ""
	if t.Image != nil {
		img = t.Image.SHA256
	}
	return a.Revision == t.Revision && a.PayloadSHA256 == t.PayloadSHA256 && a.ImageSHA256 == img
}

// Eligible reports whether t's authorization allows a claim at now.
func (t *Task) Eligible(now int64) bool {
	return t.Auth != nil && t.Auth.Status == AuthActive && now < t.Auth.ExpiresAt && t.authMatches()
}

// Claimable reports whether t may be claimed at now: PENDING, or CLAIMED
// with an expired claim lease, with an eligible authorization.
func (t *Task) Claimable(now int64) bool {
	switch t.State {
	case StatePending:
	case StateClaimed:
		if t.Claim == nil || now < t.Claim.LeaseExpiresAt || t.ManualTakeover() {
			return false
		}
	default:
		return false
	}
	return t.Eligible(now)
}

// NextClaimable returns the oldest claimable task at now without taking it,
// or nil. Expired claim leases are moved back to the queue first, and
// entries that went stale are dropped on the way: amortized O(log n).
func (s *State) NextClaimable(now int64) *Task {
	for len(s.claimExpiry) > 0 && s.claimExpiry[0].expiresAt <= now {
		e := heap.Pop(&s.claimExpiry).(expiryEntry)
		t := s.Tasks[e.taskID]
		if t == nil || t.State != StateClaimed || t.Claim == nil ||
			t.Claim.Generation != e.generation || t.Claim.LeaseExpiresAt != e.expiresAt {
			continue
		}
		if t.Eligible(now) && !t.ManualTakeover() {
			s.enqueue(t)
		}
	}
	for len(s.queue) > 0 {
		e := s.queue[0]
		t := s.Tasks[e.taskID]
		if t != nil && t.queueEpoch == e.epoch && t.Claimable(now) {
			return t
		}
		heap.Pop(&s.queue)
		if t != nil && t.queueEpoch == e.epoch {
			t.queueEpoch = 0
		}
	}
	return nil
}

// taskIndexes are claim index entries of some tasks, in creation order,
// as a restore builds them chunk by chunk.
type taskIndexes struct {
	queue  taskQueue
	expiry expiryHeap
	held   []*Task // tasks a device holds (CLAIMED, RUNNING, WAITING_CONFIRMATION)
}

// index adds t (just restored) to the entries. A restored task's queue
// epoch is its creation seq: unique per task, and below every epoch the
// counter gives later (joinTaskIndexes starts it at the newest seq).
func (x *taskIndexes) index(t *Task) {
	t.queueEpoch = 0
	if t.Open() && t.Claim != nil {
		x.held = append(x.held, t)
	}
	switch {
	case t.queueable():
		t.queueEpoch = t.CreateSeq
		x.queue = append(x.queue, queueEntry{createdAt: t.CreatedAt, createSeq: t.CreateSeq, taskID: t.ID, epoch: t.queueEpoch})
	case t.State == StateClaimed && t.Claim != nil:
		x.expiry = append(x.expiry, expiryEntry{expiresAt: t.Claim.LeaseExpiresAt, taskID: t.ID, generation: t.Claim.Generation})
	}
}

// joinTaskIndexes makes the claim indexes of a restore from the entries of
// its chunks, in creation order: what reindex would give.
func (s *State) joinTaskIndexes(parts []taskIndexes) {
	nq, ne := 0, 0
	for _, p := range parts {
		nq, ne = nq+len(p.queue), ne+len(p.expiry)
	}
	s.queue, s.claimExpiry = make(taskQueue, 0, nq), make(expiryHeap, 0, ne)
	for _, p := range parts {
		s.queue = append(s.queue, p.queue...)
		s.claimExpiry = append(s.claimExpiry, p.expiry...)
		for _, t := range p.held {
			s.trackHeld(t)
		}
	}
	s.counts, s.unended, s.settling = stateCounts{}, nil, nil
	for i, t := range s.taskOrder {
		t.pos, t.unendedAt = i, 0
		s.moved(t, "")
	}
	s.queueCounter = s.Head.Seq
	if n := len(s.taskOrder); n > 0 {
		s.queueCounter = max(s.queueCounter, s.taskOrder[n-1].CreateSeq)
	}
	// Tasks come in creation order, so the queue is usually sorted
	// already, and a sorted slice is a heap.
	if !slices.IsSortedFunc(s.queue, cmpQueueEntry) {
		heap.Init(&s.queue)
	}
	heap.Init(&s.claimExpiry)
}

func cmpQueueEntry(a, b queueEntry) int {
	if c := cmp.Compare(a.createdAt, b.createdAt); c != 0 {
		return c
	}
	return cmp.Compare(a.createSeq, b.createSeq)
}

// rebuildDeviceIndex recomputes the device token index.
func (s *State) rebuildDeviceIndex() {
	s.byTokenHash = make(map[string]string, len(s.Devices))
	for id, d := range s.Devices {
		s.byTokenHash[d.TokenHash] = id
	}
}
