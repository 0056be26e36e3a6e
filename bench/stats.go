package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Op is one kind of command a run issues.
type Op int

// The ops a run issues, in report order.
const (
	OpPresence Op = iota
	OpClaim
	OpClaimEmpty // a claim-next answered 204 (no claimable task): durable, recorded
	OpRelease
	OpStart
	OpHeartbeat
	OpCancel // the operator's cancel of a running task
	OpCancelAck
	OpCreate // the operator's replacement task
	OpPut    // raw baselines: one bbolt put
	numOps
)

var opNames = [numOps]string{"presence", "claim", "claim-204", "release", "start", "heartbeat", "cancel", "cancel-ack", "create", "put"}

func (o Op) String() string { return opNames[o] }

// recorder collects one worker's latencies; it is not shared.
type recorder struct {
	lat    [numOps][]time.Duration
	errors int
	first  error
}

func (r *recorder) add(op Op, d time.Duration) { r.lat[op] = append(r.lat[op], d) }

func (r *recorder) fail(err error) {
	r.errors++
	if r.first == nil {
		r.first = err
	}
}

// Result is one scenario's figures.
type Result struct {
	Name    string
	Workers int
	Elapsed time.Duration
	// Durable is the number of commands acknowledged after their commit.
	Durable int
	Errors  int
	// FirstError is the first error a worker saw, if any.
	FirstError error
	// P50, P99 and P999 are percentiles of every counted command's
	// latency; Max is the longest (the longest stall a device saw).
	P50, P99, P999, Max time.Duration
	// Pauses, when measured (ledger runs in this process), says what
	// could have stalled the commands.
	Pauses *Pauses
	// PerOp holds counts and latencies by op.
	PerOp map[Op]OpStats
	// Events is the number of events the run appended (ledger runs).
	Events uint64
	// CPU is the process's user + system CPU time during the run (the
	// generator's own work included): on a shared machine, CPU per command
	// is steadier than commands per second.
	CPU time.Duration
}

// CPUPerCommand is the process CPU time per durable command.
func (r *Result) CPUPerCommand() time.Duration {
	if r.Durable == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Durable)
}

// OpStats is one op's count and latency percentiles.
type OpStats struct {
	Count    int
	P50, P99 time.Duration
}

// PerSecond is the durable commands per second.
func (r *Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Durable) / r.Elapsed.Seconds()
}

// merge builds a Result from the workers' recorders.
func merge(name string, workers int, elapsed time.Duration, recs []*recorder) *Result {
	res := &Result{Name: name, Workers: workers, Elapsed: elapsed, PerOp: map[Op]OpStats{}}
	var all []time.Duration
	for op := Op(0); op < numOps; op++ {
		var lat []time.Duration
		for _, r := range recs {
			lat = append(lat, r.lat[op]...)
		}
		if len(lat) == 0 {
			continue
		}
		slices.Sort(lat)
		res.PerOp[op] = OpStats{Count: len(lat), P50: pct(lat, 50), P99: pct(lat, 99)}
		res.Durable += len(lat)
		all = append(all, lat...)
	}
	slices.Sort(all)
	res.P50, res.P99, res.P999 = pct(all, 50), pct(all, 99), pctMille(all, 999)
	if len(all) > 0 {
		res.Max = all[len(all)-1]
	}
	for _, r := range recs {
		res.Errors += r.errors
		if res.FirstError == nil {
			res.FirstError = r.first
		}
	}
	return res
}

// pct is the p-th percentile (nearest rank) of sorted.
func pct[T int64 | time.Duration](sorted []T, p int) T {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(i, 0)]
}

// pctMille is the m-th per-mille (nearest rank) of sorted.
func pctMille(sorted []time.Duration, m int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*m+999)/1000 - 1
	return sorted[max(i, 0)]
}

// Line is the one-line report of a scenario.
func (r *Result) Line() string {
	s := fmt.Sprintf("%-44s %9.0f durable cmds/s  p50 %8s  p99 %8s  p99.9 %8s  max %8s  (%d cmds in %s",
		r.Name, r.PerSecond(), round(r.P50), round(r.P99), round(r.P999), round(r.Max), r.Durable, r.Elapsed.Round(time.Millisecond))
	if r.Events > 0 {
		s += fmt.Sprintf(", %d events, %.2f events/cmd", r.Events, float64(r.Events)/float64(max(r.Durable, 1)))
	}
	if r.CPU > 0 {
		s += fmt.Sprintf(", %s CPU/cmd", round(r.CPUPerCommand()))
	}
	if r.Errors > 0 {
		s += fmt.Sprintf(", %d ERRORS, first: %v", r.Errors, r.FirstError)
	}
	s += ")"
	if r.Pauses != nil {
		s += "\n    " + r.Pauses.Line()
		if len(r.Pauses.Phases) > 0 {
			s += "\n    " + r.Pauses.PhasesLine()
			s += "\n    " + r.Pauses.TailLine()
		}
		if len(r.Pauses.Parts) > 0 {
			s += "\n    " + r.Pauses.PartsLine()
		}
	}
	return s
}

// OpLine details a ledger scenario by op.
func (r *Result) OpLine() string {
	var parts []string
	for op := Op(0); op < numOps; op++ {
		if st, ok := r.PerOp[op]; ok && op != OpPut {
			parts = append(parts, fmt.Sprintf("%s %d (p50 %s p99 %s)", op, st.Count, round(st.P50), round(st.P99)))
		}
	}
	return "    by op: " + strings.Join(parts, ", ")
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d.Round(100 * time.Nanosecond)
}
