package node

import (
	"runtime/debug"
	"sync"
)

// gcPause counts the loads that hold the garbage collector off.
var gcPause struct {
	sync.Mutex
	n    int
	prev int
}

// pauseGC turns the garbage collector off until the returned function is
// called (calls nest: the last one restores the setting). Restoring a
// snapshot allocates the whole projections at once and keeps all of it,
// so collecting meanwhile only marks memory that stays live (about half
// the CPU of a million-task restore, and the write barriers on every
// pointer it stores); the first collection runs after the restore,
// concurrently with the rest of start-up and serving.
func pauseGC() (resume func()) {
	gcPause.Lock()
	if gcPause.n == 0 {
		gcPause.prev = debug.SetGCPercent(-1)
	}
	gcPause.n++
	gcPause.Unlock()
	return sync.OnceFunc(func() {
		gcPause.Lock()
		gcPause.n--
		if gcPause.n == 0 {
			debug.SetGCPercent(gcPause.prev)
		}
		gcPause.Unlock()
	})
}
