package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"taskledger/commands"
	"taskledger/projections"
)

// Metrics are the Prometheus series of api.md and operations.md.
type Metrics struct {
	reg          *prometheus.Registry
	batchSize    prometheus.Histogram
	commitSecs   prometheus.Histogram
	commandsT    *prometheus.CounterVec
	claims       prometheus.Counter
	replaySecs   prometheus.Gauge
	snapshotSecs prometheus.Histogram
	requests     *prometheus.CounterVec
	leaseExpiry  *prometheus.CounterVec
	commitFails  prometheus.Counter
}

// NewMetrics registers the series on a fresh registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "taskledger_append_batch_size",
			Help: "Commands per committed append batch.", Buckets: prometheus.ExponentialBuckets(1, 2, 13)}),
		commitSecs: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "taskledger_append_commit_seconds",
			Help: "Latency of one append transaction (including fsync).", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		commandsT: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taskledger_commands_total",
			Help: "Commands sequenced, by type and outcome (ok or the error code)."}, []string{"type", "outcome"}),
		claims: prometheus.NewCounter(prometheus.CounterOpts{Name: "taskledger_claims_total",
			Help: "Successful claims (new claims, not replays or resumes)."}),
		replaySecs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "taskledger_replay_seconds",
			Help: "Duration of the last start-up load (snapshot + tail replay)."}),
		snapshotSecs: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "taskledger_snapshot_seconds",
			Help: "Duration of snapshot writes.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taskledger_http_requests_total",
			Help: "HTTP requests by route and status."}, []string{"route", "status"}),
		leaseExpiry: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taskledger_lease_expiries_total",
			Help: "Lease expiries observed by committed events: claim (an expired claim taken over by another device " +
				"or closed by an operator) and running (a report after the running lease expired)."}, []string{"lease"}),
		commitFails: prometheus.NewCounter(prometheus.CounterOpts{Name: "taskledger_commit_failures_total",
			Help: "Append batches whose write or fsync failed (their commands were answered 503)."}),
	}
	m.leaseExpiry.WithLabelValues(LeaseClaim)
	m.leaseExpiry.WithLabelValues(LeaseRunning)
	// taskledger_commands_total is listed from the start (api.md names it):
	// a vector shows nothing until it has a series, so every command type
	// starts with its "ok" series at zero.
	for _, typ := range commandTypes() {
		m.commandsT.WithLabelValues(typ, "ok")
	}
	m.reg.MustRegister(m.batchSize, m.commitSecs, m.commandsT, m.claims, m.replaySecs, m.snapshotSecs, m.requests, m.leaseExpiry, m.commitFails,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Engine returns the sequencer hooks that feed these series.
func (m *Metrics) Engine() commands.Metrics {
	return commands.Metrics{
		BatchCommitted: func(n, _ int, d time.Duration) {
			m.batchSize.Observe(float64(n))
			m.commitSecs.Observe(d.Seconds())
		},
		Command: func(cmd commands.Command, res commands.Result, err error) {
			outcome := "ok"
			if rec := res.Record; err == nil && rec != nil && rec.Outcome == projections.OutcomeRefused {
				err = commands.RecordedError(rec.Code) // a recorded refusal (late report, claim_requires_manual)
			}
			if err != nil {
				outcome = toAPIError(err).Code
				if isUnavailable(err) {
					outcome = "unavailable"
				}
			}
			m.commandsT.WithLabelValues(commands.TypeName(cmd), outcome).Inc()
		},
		Claimed:      func() { m.claims.Inc() },
		CommitFailed: func(error) { m.commitFails.Inc() },
	}
}

// commandTypes are the type labels of taskledger_commands_total
// (commands.TypeName of every command).
func commandTypes() []string {
	return append([]string{commands.OpClaimNext, "presence", commands.OpRegisterDevice, commands.OpRevokeDevice,
		commands.OpCreateTask, commands.OpAmend, commands.OpSetReferenceImage, commands.OpAuthorize,
		commands.OpRevokeAuthorization, commands.OpCancel, commands.OpRecover}, commands.TaskOps()...)
}

// ObserveReplay records the start-up load duration.
func (m *Metrics) ObserveReplay(d time.Duration) { m.replaySecs.Set(d.Seconds()) }

// Lease kinds of taskledger_lease_expiries_total.
const (
	LeaseClaim   = "claim"
	LeaseRunning = "running"
)

// ObserveLeaseExpiry counts one observed lease expiry of kind LeaseClaim
// or LeaseRunning.
func (m *Metrics) ObserveLeaseExpiry(lease string) { m.leaseExpiry.WithLabelValues(lease).Inc() }

// ObserveSnapshot records a snapshot write.
func (m *Metrics) ObserveSnapshot(d time.Duration) { m.snapshotSecs.Observe(d.Seconds()) }

func (m *Metrics) request(route string, status int) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
}

// Register adds GET /metrics.
func (m *Metrics) Register(e *echo.Echo) {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	e.GET("/metrics", func(c echo.Context) error {
		h.ServeHTTP(c.Response(), c.Request())
		return nil
	})
}

// Handler serves GET /metrics alone (serve --metrics-listen): every other
// path is 404, every other method 405.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	return mux
}
