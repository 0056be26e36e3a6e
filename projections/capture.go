package projections

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
