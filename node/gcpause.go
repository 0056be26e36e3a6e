package node

import "taskledger/internal/gcfloor"

// pauseGC turns the garbage collector off until the returned function is
// called (calls nest: the last one restores the setting, gcfloor.Pause).
// Restoring a snapshot allocates the whole projections at once and keeps
// all of it, so collecting meanwhile only marks memory that stays live
// (about half the CPU of a million-task restore, and the write barriers
// on every pointer it stores); the first collection runs after the
// restore, concurrently with the rest of start-up and serving.
func pauseGC() (resume func()) { return gcfloor.Pause() }
