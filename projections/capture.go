package projections

import "sort"

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

// captured returns what a capture keeps of t: a clone while t can still
// change, t itself once it ended (no event applies to an ended task; one
// that came anyway would fold into a copy, see unshare).
func (t *Task) captured() *Task {
	if !t.Terminal() {
		return t.clone()
	}
	if !t.shared {
		t.shared = true
	}
	return t
}

// unshare replaces a task a capture holds by a copy, in the map and in
// the creation order (the other indexes name tasks by id), and returns
// the copy: what folds into it leaves the capture as it was.
func (s *State) unshare(t *Task) *Task {
	c := t.clone()
	c.shared = false
	s.Tasks[c.ID] = c
	i := sort.Search(len(s.taskOrder), func(i int) bool { return s.taskOrder[i].CreateSeq >= t.CreateSeq })
	for ; i < len(s.taskOrder); i++ {
		if s.taskOrder[i] == t {
			s.taskOrder[i] = c
			break
		}
	}
	return c
}
