package node

import "taskledger/api"

// readiness is a cluster node's part of /readyz (api.Options.Ready): the
// reason it cannot take writes now, "" when it can. It reads only what the
// lease loop keeps (no request to NATS, nothing appended):
//
//   - a sequencer whose local deadline passed could not renew its lease
//     for three quarters of a TTL: it cannot reach a quorum (no_quorum);
//   - a follower that has not read the lease for a whole TTL cannot reach
//     NATS (no_quorum); one that knows no holder, or is promoting, has no
//     sequencer to forward to (no_sequencer); one whose holder's lease
//     revision has not moved for a whole TTL follows a sequencer that
//     cannot renew, which is a cluster without quorum (no_quorum).
func (c *clusterLink) readiness() string {
	now := c.clock.Now()
	ttl := c.cc.LeaseTTL
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.role == sequencing:
		if c.forced.Load() || now.Before(c.deadline) {
			return ""
		}
		return api.NotReadyNoQuorum
	case c.role == promoting:
		return api.NotReadyNoSequencer
	case !c.contact.IsZero() && now.Sub(c.contact) > ttl:
		return api.NotReadyNoQuorum
	case c.leader.ID == "":
		return api.NotReadyNoSequencer
	case now.Sub(c.revSeen) > ttl:
		return api.NotReadyNoQuorum
	}
	return ""
}
