package projections

import "slices"

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// clone copies a task deeply (every field below is a value, a string, or
// copied here; TestCaptureSharesNothing checks none is forgotten).
func (t *Task) clone() *Task {
	c := *t
	c.Image = clonePtr(t.Image)
	if t.Auth != nil {
		a := *t.Auth
		c.Auth = &a
	}
	c.Claim = clonePtr(t.Claim)
	c.Exec = clonePtr(t.Exec)
	c.Result = clonePtr(t.Result)
	c.Failure = clonePtr(t.Failure)
	c.Recovery = clonePtr(t.Recovery)
	c.LateReports = cloneSlice(t.LateReports)
	c.Evidence = cloneSlice(t.Evidence)
	return &c
}

func (d *Device) clone() *Device {
	c := *d
	c.RequiredChecks = cloneSlice(d.RequiredChecks)
	return &c
}

// unshare replaces an ended task, which captures share, by a copy, in
// the map and in the creation order (itself copied: captures share it
// too; the other indexes name tasks by id), and returns the copy. No
// event applies to an ended task, so this runs only on the way to a
// refused event.
func (s *State) unshare(t *Task) *Task {
	c := t.clone()
	s.Tasks[c.ID] = c
	s.taskOrder = slices.Clone(s.taskOrder)
	s.taskOrder[t.pos] = c
	return c
}
