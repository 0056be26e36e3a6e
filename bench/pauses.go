package bench

import (
	"fmt"
	"math"
	"runtime/metrics"
	"slices"
	"sync"
	"time"

	"taskledger/commands"
	"taskledger/ledger"
)

// Pauses is what could have stalled a ledger run's commands: the longest
// commits (a stream-index pass is inside one), the snapshots'
// captures, and the collector's stop-the-world pauses.
type Pauses struct {
	Commits            int
	CommitP99          time.Duration
	CommitMax          time.Duration
	CommitP50          time.Duration
	CommitBusy         float64 // the commits' summed time / the run's
	EventsPerCommit    float64
	SoftPerCommit      float64 // soft records (leases, idempotency records) written or deleted
	MaxEventsPerCommit int
	Snapshots          int
	SnapshotLockMax    time.Duration // the longest capture (the sequencer decides nothing meanwhile)
	SnapshotTotalMax   time.Duration // the longest capture + encode + write + fsync
	GCCycles           uint64
	GCPauseMax         time.Duration // upper bound of the highest bucket with a pause
	GCCPU              time.Duration // the collector's CPU (background and assists)
	// Phases: where the commands answered after a commit spent their
	// time, each phase's p50 / p99 / max (commands.Phases).
	Phases []PhaseStat
	// Tail: where the slowest commands (total ≥ TailFrom, the p99) spent
	// their time, each phase's mean over them (Phases' order).
	Tail     []time.Duration
	TailFrom time.Duration
	// Parts: what each commit of a bbolt ledger spent its time on
	// (commitPartNames: building the transaction, spilling its nodes into
	// pages, writing them with both fdatasyncs) and its page writes, each
	// part's p50 / p99 / max; none for a log that is not a bbolt ledger.
	Parts      []PhaseStat
	PageWrites [3]int64 // page writes per commit: p50, p99, max
	raw        bool     // a raw group commit's batches: commits only
}

// PhaseStat is one phase of the commands' time.
type PhaseStat struct {
	Name          string
	P50, P99, Max time.Duration
}

// PhasesLine is the one-line report of the phases.
func (p *Pauses) PhasesLine() string {
	s := "phases p50/p99/max:"
	for i, ph := range p.Phases {
		if i > 0 {
			s += ";"
		}
		s += fmt.Sprintf(" %s %s/%s/%s", ph.Name, round(ph.P50), round(ph.P99), round(ph.Max))
	}
	return s
}

// TailLine is the one-line report of the tail: where the slowest
// hundredth of the commands spent their time.
func (p *Pauses) TailLine() string {
	s := fmt.Sprintf("tail (the slowest 1%%, ≥ %s), mean:", round(p.TailFrom))
	for i, d := range p.Tail {
		if i > 0 {
			s += ";"
		}
		s += fmt.Sprintf(" %s %s", phaseNames[i], round(d))
	}
	return s
}

// PartsLine is the one-line report of the commits' parts.
func (p *Pauses) PartsLine() string {
	s := "commit parts p50/p99/max:"
	for _, ph := range p.Parts {
		s += fmt.Sprintf(" %s %s/%s/%s;", ph.Name, round(ph.P50), round(ph.P99), round(ph.Max))
	}
	return s + fmt.Sprintf(" page writes %d/%d/%d", p.PageWrites[0], p.PageWrites[1], p.PageWrites[2])
}

// Line is the one-line report of the pauses.
func (p *Pauses) Line() string {
	if p.raw {
		return fmt.Sprintf("commits: %d (%.1f puts/commit, max %d) p50 %s p99 %s max %s, busy %.0f%%",
			p.Commits, p.EventsPerCommit, p.MaxEventsPerCommit, round(p.CommitP50), round(p.CommitP99), round(p.CommitMax), 100*p.CommitBusy)
	}
	return fmt.Sprintf("pauses: %d commits (%.1f events and %.1f soft records/commit, max %d events) p50 %s p99 %s max %s, busy %.0f%%; %d snapshots, capture max %s, total max %s; "+
		"GC %d cycles, STW max ≤ %s, GC CPU %s",
		p.Commits, p.EventsPerCommit, p.SoftPerCommit, p.MaxEventsPerCommit, round(p.CommitP50), round(p.CommitP99), round(p.CommitMax), 100*p.CommitBusy,
		p.Snapshots, round(p.SnapshotLockMax), round(p.SnapshotTotalMax),
		p.GCCycles, round(p.GCPauseMax), p.GCCPU.Round(time.Millisecond))
}

// pauseProbe collects Pauses while a run lasts.
type pauseProbe struct {
	mu       sync.Mutex
	on       bool
	commits  []time.Duration
	events   int
	soft     int
	maxEv    int
	snaps    int
	lockMax  time.Duration
	totalMax time.Duration
	gc0      []metrics.Sample
	began    time.Time
	phases   phaseLog
	parts    [len(commitPartNames)][]time.Duration
	writes   []int64
}

// commitPartNames are the parts of a bbolt ledger's commit: the
// transaction built (the batch's puts and deletes, with the head check and
// any wait for the store's lock), its changed nodes spilled into pages, and
// the pages written and synced (the pages, fdatasync, the meta page,
// fdatasync).
var commitPartNames = [...]string{"build", "spill", "write"}

// writeStatser is a log that reports its commits' parts: a bbolt ledger.
type writeStatser interface {
	WriteStats() ledger.WriteStats
}

var phaseNames = [...]string{"queued", "decide", "wait", "commit", "publish", "answer", "wake", "total"}

// phase records one command's commands.Phases.
func (p *pauseProbe) phase(ph commands.Phases) {
	d := [len(phaseNames)]time.Duration{ph.Queued, ph.Decide, ph.Wait, ph.Commit, ph.Publish, ph.Answer, ph.Wake}
	for _, x := range d[:len(d)-1] {
		d[len(d)-1] += x
	}
	p.mu.Lock()
	if p.on {
		p.phases.add(d)
	}
	p.mu.Unlock()
}

// phaseBlock is how many commands' phases one block of a phaseLog holds.
const phaseBlock = 1024

// phaseLog keeps every command's phases in fixed blocks. Appending to one
// slice per phase copied the whole slice each time it doubled (a megabyte
// per phase at 150,000 commands), under the probe's lock, which every
// caller takes as it is answered: the run stalled its own callers for
// milliseconds at a time, and those stalls were in the measured tail.
type phaseLog struct {
	blocks []*[phaseBlock][len(phaseNames)]time.Duration
	n      int
}

func (l *phaseLog) add(d [len(phaseNames)]time.Duration) {
	if l.n%phaseBlock == 0 {
		l.blocks = append(l.blocks, new([phaseBlock][len(phaseNames)]time.Duration))
	}
	l.blocks[l.n/phaseBlock][l.n%phaseBlock] = d
	l.n++
}

// columns returns each phase's durations, one entry per command, in the
// order they were added.
func (l *phaseLog) columns() [][]time.Duration {
	out := make([][]time.Duration, len(phaseNames))
	if l.n == 0 {
		return out
	}
	for i := range out {
		out[i] = make([]time.Duration, l.n)
	}
	for j := range l.n {
		row := &l.blocks[j/phaseBlock][j%phaseBlock]
		for i := range out {
			out[i][j] = row[i]
		}
	}
	return out
}

var gcMetrics = []string{"/gc/cycles/total:gc-cycles", "/sched/pauses/total/gc:seconds", "/cpu/classes/gc/total:cpu-seconds"}

func readGC() []metrics.Sample {
	s := make([]metrics.Sample, len(gcMetrics))
	for i, n := range gcMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	return s
}

// wrap times every Append of the log.
func (p *pauseProbe) wrap(l commands.Log) commands.Log { return timedLog{l, p} }

type timedLog struct {
	commands.Log
	p *pauseProbe
}

func (t timedLog) Append(b *ledger.Batch) error {
	ws, parted := t.Log.(writeStatser)
	var w0 ledger.WriteStats
	if parted {
		w0 = ws.WriteStats()
	}
	t0 := time.Now()
	err := t.Log.Append(b)
	d := time.Since(t0)
	var w1 ledger.WriteStats
	if parted {
		w1 = ws.WriteStats()
	}
	t.p.mu.Lock()
	if t.p.on && parted && err == nil {
		spill, write := w1.Spill-w0.Spill, w1.Write-w0.Write
		for i, part := range [...]time.Duration{max(d-spill-write, 0), spill, write} {
			t.p.parts[i] = append(t.p.parts[i], part)
		}
		t.p.writes = append(t.p.writes, w1.Writes-w0.Writes)
	}
	if t.p.on {
		t.p.commits = append(t.p.commits, d)
		t.p.events += len(b.Events)
		t.p.soft += len(b.Soft)
		t.p.maxEv = max(t.p.maxEv, len(b.Events))
	}
	t.p.mu.Unlock()
	return err
}

func (p *pauseProbe) snapshot(_ uint64, capture, total time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		p.snaps++
		p.lockMax = max(p.lockMax, capture)
		p.totalMax = max(p.totalMax, total)
	}
}

func (p *pauseProbe) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = true
	p.gc0 = readGC()
	p.began = time.Now()
}

func (p *pauseProbe) stop() *Pauses {
	gc1 := readGC()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = false
	r := &Pauses{Commits: len(p.commits), MaxEventsPerCommit: p.maxEv, Snapshots: p.snaps,
		SnapshotLockMax: p.lockMax, SnapshotTotalMax: p.totalMax}
	if len(p.commits) > 0 {
		slices.Sort(p.commits)
		r.CommitP50, r.CommitP99, r.CommitMax = pct(p.commits, 50), pct(p.commits, 99), p.commits[len(p.commits)-1]
		var sum time.Duration
		for _, d := range p.commits {
			sum += d
		}
		r.CommitBusy = sum.Seconds() / time.Since(p.began).Seconds()
		r.EventsPerCommit = float64(p.events) / float64(len(p.commits))
		r.SoftPerCommit = float64(p.soft) / float64(len(p.commits))
	}
	phases := p.phases.columns()
	r.TailFrom, r.Tail = tail(phases)
	for i, ds := range p.parts {
		if len(ds) > 0 {
			slices.Sort(ds)
			r.Parts = append(r.Parts, PhaseStat{commitPartNames[i], pct(ds, 50), pct(ds, 99), ds[len(ds)-1]})
		}
	}
	if n := len(p.writes); n > 0 {
		slices.Sort(p.writes)
		r.PageWrites = [3]int64{pct(p.writes, 50), pct(p.writes, 99), p.writes[n-1]}
	}
	for i, ds := range phases {
		if len(ds) > 0 {
			slices.Sort(ds)
			r.Phases = append(r.Phases, PhaseStat{phaseNames[i], pct(ds, 50), pct(ds, 99), ds[len(ds)-1]})
		}
	}
	r.GCCycles = gc1[0].Value.Uint64() - p.gc0[0].Value.Uint64()
	h0, h1 := p.gc0[1].Value.Float64Histogram(), gc1[1].Value.Float64Histogram()
	for i := len(h1.Counts) - 1; i >= 0; i-- {
		if h1.Counts[i] > h0.Counts[i] {
			hi := h1.Buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = h1.Buckets[i]
			}
			r.GCPauseMax = time.Duration(hi * float64(time.Second))
			break
		}
	}
	r.GCCPU = time.Duration((gc1[2].Value.Float64() - p.gc0[2].Value.Float64()) * float64(time.Second))
	return r
}

// tail returns the p99 of the commands' totals (the last of phases, one
// entry per command in every phase) and the mean of each phase over the
// commands whose total reached it. It reads phases before they are sorted.
func tail(phases [][]time.Duration) (from time.Duration, means []time.Duration) {
	totals := phases[len(phases)-1]
	if len(totals) == 0 {
		return 0, nil
	}
	sorted := slices.Sorted(slices.Values(totals))
	from = pct(sorted, 99)
	sums := make([]time.Duration, len(phases))
	n := 0
	for j, t := range totals {
		if t < from {
			continue
		}
		n++
		for i := range phases {
			sums[i] += phases[i][j]
		}
	}
	for i := range sums {
		sums[i] /= time.Duration(n)
	}
	return from, sums
}
