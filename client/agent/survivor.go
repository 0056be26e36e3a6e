package agent

// survivorFate is what the start-up check found of a work command recorded
// by a previous run.
type survivorFate int

const (
	// survivorUnknown: nothing recorded, or the system cannot tell.
	survivorUnknown survivorFate = iota
	// survivorGone: the process no longer exists.
	survivorGone
	// survivorReused: the pid belongs to another process now; not touched.
	survivorReused
	// survivorKilled: the command still ran and was killed.
	survivorKilled
)
