package node

import "time"

// Test hooks of the cluster node, for the tests of package node_test.

// PauseLease stops (or resumes) the node's lease loop: a paused holder
// neither renews nor looks, as a process stopped by the scheduler would.
// It returns once no tick is in flight (a promotion under way would
// otherwise set the role after the test forced it).
func PauseLease(n *Node, paused bool) {
	n.cluster.tickMu.Lock()
	defer n.cluster.tickMu.Unlock()
	n.cluster.paused.Store(paused)
}

// ForceSequencing makes the node believe it sequences whatever its lease
// says (on), or ends that belief (off). Forced on, it returns once no
// catch-up of the tail is in flight: the node's state stays the one it
// had, whatever the stream receives next.
func ForceSequencing(n *Node, on bool) {
	c := n.cluster
	c.mu.Lock()
	c.forced.Store(on)
	if on {
		c.role = sequencing
	}
	c.mu.Unlock()
	if on {
		c.catchMu.Lock()
		defer c.catchMu.Unlock()
	}
}

// Crash stops a cluster node as a killed process would stop: no renewal,
// no release of the lease, the NATS connection closed under whatever is in
// flight; then the goroutines end.
func Crash(n *Node) {
	c := n.cluster
	c.paused.Store(true)
	n.Log.Close()
	c.stopLoops()
	n.API.Stopping()
	n.soft.close()
	n.Engine.Close()
	n.snap.close()
}

// VerifyOpenServerClaims is the start-up check that every open
// server-issued claim of the loaded projections comes from secret.
var VerifyOpenServerClaims = verifyOpenServerClaims

// CollectBlobs runs one round of the cluster's blob collection on the node
// now, sparing blobs stored less than grace ago.
func CollectBlobs(n *Node, grace time.Duration) (BlobsCollected, error) {
	return n.cluster.collectBlobs(n.Blobs, grace)
}

// SetRebuildChunk makes a read-model rebuild replay n events per read
// transaction and commit what it gathered after every one (small: many
// slices, many writes), until the returned func restores it.
func SetRebuildChunk(n int) func() {
	oldChunk, oldBytes := rebuildChunk, rebuildBytes
	rebuildChunk, rebuildBytes = n, 1
	return func() { rebuildChunk, rebuildBytes = oldChunk, oldBytes }
}

// SetPromoteHook makes every promotion of every cluster node call f with
// the node's advertised URL after it caught up with the stream, before it
// loads the soft records, until the returned func removes it.
func SetPromoteHook(f func(advertised string)) (restore func()) {
	promoteHook.Store(&f)
	return func() { promoteHook.Store(nil) }
}
