package node

import (
	"testing"
	"time"

	"taskledger/api"
	"taskledger/commands"
)

// TestClusterReadinessNamesSequencerAndQuorum: a cluster node is ready
// while it sequences within its lease deadline, or follows a holder whose
// lease it read and saw renewed within a TTL; it names no_sequencer when
// it knows no holder (or is taking the lease) and no_quorum when the lease
// could not be renewed, read, or was not seen renewed for a whole TTL.
func TestClusterReadinessNamesSequencerAndQuorum(t *testing.T) {
	const ttl = 10 * time.Second
	clock := commands.NewManualClock(time.UnixMilli(1_800_000_000_000))
	c := &clusterLink{clock: clock, cc: ClusterConfig{LeaseTTL: ttl}}
	want := func(what, reason string) {
		t.Helper()
		if got := c.readiness(); got != reason {
			t.Fatalf("%s: readiness %q, want %q", what, got, reason)
		}
	}
	want("a follower that never read the lease", api.NotReadyNoSequencer)

	c.contact, c.leader, c.leaderRev, c.revSeen = clock.Now(), leaseValue{ID: "a", URL: "http://a"}, 7, clock.Now()
	want("a follower that read a holder's lease", "")
	clock.Advance(ttl + time.Millisecond)
	want("a follower that has not read the lease for a TTL", api.NotReadyNoQuorum)
	c.contact = clock.Now()
	want("a follower whose holder did not renew for a TTL", api.NotReadyNoQuorum)
	c.leaderRev, c.revSeen = 8, clock.Now()
	want("a follower that saw the lease renewed", "")
	c.leader = leaseValue{}
	want("a follower after stepping down (no holder known)", api.NotReadyNoSequencer)

	c.role = promoting
	want("a node taking the lease", api.NotReadyNoSequencer)
	c.role, c.deadline = sequencing, clock.Now().Add(ttl*3/4)
	want("a sequencer within its deadline", "")
	clock.Advance(ttl * 3 / 4)
	want("a sequencer that could not renew before its deadline", api.NotReadyNoQuorum)
}
