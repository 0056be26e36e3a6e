package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"taskledger/projections"
)

// The gauges an operator's dashboard and alert rules read
// (docs/monitoring/): each is computed at scrape time from the state it
// describes, so no timer or background loop keeps it.

// Cluster roles of taskledger_cluster_role.
const (
	RoleStandalone = "standalone" // one bbolt node: it sequences
	RoleFollower   = "follower"
	RolePromoting  = "promoting"
	RoleSequencer  = "sequencer"
)

// ClusterRoles lists every value of taskledger_cluster_role's role label.
func ClusterRoles() []string {
	return []string{RoleStandalone, RoleFollower, RolePromoting, RoleSequencer}
}

// NodeGauges are the readings of a node that its gauges show.
type NodeGauges struct {
	// Role is the node's cluster role (one of ClusterRoles).
	Role func() string
	// Snapshot is the age in seconds of the newest snapshot (written by
	// this process, or loaded at its start) and the events after it.
	Snapshot func() (ageSeconds float64, eventsBehind uint64)
	// Disk is the free and total bytes of the data directory's file
	// system (ok false where the platform cannot tell).
	Disk func() (free, size uint64, ok bool)
}

// gaugeFunc registers a gauge read at scrape time; a second server on the
// same registry keeps the first one's.
func (m *Metrics) gaugeFunc(name, help string, f func() float64) {
	_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// watchServer adds the gauges the api server itself knows: readiness, the
// queue depth and the tasks per state.
func (s *Server) watchServer() {
	m := s.metrics
	m.gaugeFunc("taskledger_ready", "1 when /readyz answers 200 (log open, projections caught up, storage writable), else 0.",
		func() float64 {
			if s.stopping.Load() || s.eng.Err() != nil || !s.storageReady() {
				return 0
			}
			return 1
		})
	m.gaugeFunc("taskledger_tasks_claimable", "Queue depth: tasks a claim-next could take now (PENDING or with an expired reclaimable claim, eligible authorization).",
		func() (n float64) {
			s.eng.ReadNow(func(st *projections.State, now int64) { n = float64(st.ClaimableCount(now)) })
			return n
		})
	states := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taskledger_tasks",
		Help: "Tasks by state (read at scrape time)."}, []string{"state"})
	_ = m.reg.Register(prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
		var counts map[string]int
		s.eng.Read(func(st *projections.State) { counts = st.StateCounts() })
		for _, st := range projections.AllStates() {
			states.WithLabelValues(string(st)).Set(float64(counts[string(st)]))
		}
		states.Collect(ch)
	}))
}

// WatchNode adds the gauges a node reads for the api: its cluster role,
// the snapshot's age and the data directory's disk.
func (m *Metrics) WatchNode(g NodeGauges) {
	role := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taskledger_cluster_role",
		Help: "1 for the node's current role (standalone, follower, promoting, sequencer), 0 for the others."}, []string{"role"})
	_ = m.reg.Register(prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
		now := g.Role()
		for _, r := range ClusterRoles() {
			v := 0.0
			if r == now {
				v = 1
			}
			role.WithLabelValues(r).Set(v)
		}
		role.Collect(ch)
	}))
	m.gaugeFunc("taskledger_snapshot_age_seconds", "Seconds since the newest snapshot was written (or, before this process wrote one, since the one it loaded, or its start).",
		func() float64 { age, _ := g.Snapshot(); return age })
	m.gaugeFunc("taskledger_snapshot_events_behind", "Events committed after the newest snapshot (what a restart replays).",
		func() float64 { _, behind := g.Snapshot(); return float64(behind) })
	m.gaugeFunc("taskledger_disk_free_bytes", "Bytes available to the server on the data directory's file system.",
		func() float64 { free, _, _ := g.Disk(); return float64(free) })
	m.gaugeFunc("taskledger_disk_size_bytes", "Size in bytes of the data directory's file system.",
		func() float64 { _, size, _ := g.Disk(); return float64(size) })
}
