package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"taskledger/audit/transparency"
	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
)

// The history figures of `taskledger bench --mode history`: what a node
// costs per finished task it keeps. Each size is a generated history
// (history.go) measured only through what `serve` uses — node.Open on
// the data directory, Node.Snapshot, and the API's handler — so the
// figures stay comparable when finished tasks move out of memory.

// HistoryRunConfig sizes a history run.
type HistoryRunConfig struct {
	Root     string // each size's data directory is made in it (and removed after, unless Keep)
	Sizes    []int  // finished tasks of each history, ascending (two: the slopes)
	Live     int
	Devices  int // default 64
	Requests int // timed list requests per size (default 200)
	PerDay   int // finished tasks per day (HistoryConfig.PerDay)
	End      time.Time
	Keep     bool
	// Verify, when set, is called on each generated history before the
	// node opens it (`taskledger verify`).
	Verify func(dir string) error
	// Progress receives a line as each step starts (nil: none).
	Progress io.Writer
}

// HistoryPoint is the figures of one size.
type HistoryPoint struct {
	Gen *History
	// Replay is node.Open of the generated log with no snapshot (the
	// whole log replayed); Start node.Open from the snapshot the node
	// wrote then (Snapshot, SnapshotBytes).
	Replay, Snapshot, Start time.Duration
	// Merkle is transparency.Build on the same log just before Start (a
	// scan hashing every event, which every start does to check the
	// newest signed checkpoint; it also brings the file into the page
	// cache for Start); MerkleCPU its CPU time.
	Merkle, MerkleCPU time.Duration
	// ProofP50, ProofP99: an inclusion proof of an event spread over the
	// log in the tree of its whole size, from the tree Merkle rebuilt
	// (tiled: each reads back and hashes the 256 events of the event's
	// tile, D440).
	ProofP50, ProofP99 time.Duration
	// Phases are Start's own steps (node.StartPhases): the damage check
	// runs beside the load, and the start waits for what is left of it.
	Phases node.StartPhases
	// StartCPU is the process's CPU time during Start (the machine may be
	// shared: wall time then includes waiting for a core).
	StartCPU      time.Duration
	SnapshotBytes int64
	// Heap is the live heap (runtime.MemStats.HeapAlloc after two
	// collections) with the node started from the snapshot, less the
	// heap before it was opened.
	Heap uint64
	// ListP50, ListP99: GET /api/v1/admin/tasks?state=SUCCEEDED&device_id=D&limit=100
	// through the API's handler, D each device in turn; ListTasks the
	// tasks the first such page held.
	ListP50, ListP99 time.Duration
	ListTasks        int
	// PageP50, PageP99: GET /api/v1/admin/tasks?state=SUCCEEDED&cursor=C&limit=100,
	// C spread evenly over the history (pages of finished tasks, deep in
	// it); PageTasks the tasks the smallest page held.
	PageP50, PageP99 time.Duration
	PageTasks        int
	// ProvenanceP50, ProvenanceP99: GET /api/v1/admin/tasks/{id}/provenance
	// of the first task of each of those pages (finished tasks spread over
	// the history).
	ProvenanceP50, ProvenanceP99 time.Duration
}

// HistoryReport is the run's figures.
type HistoryReport struct {
	Points []HistoryPoint
}

// HistoryListLimit is the page size of the timed list.
const HistoryListLimit = 100

// RunHistory generates and measures each size in turn.
func RunHistory(cfg HistoryRunConfig) (*HistoryReport, error) {
	if len(cfg.Sizes) == 0 {
		return nil, errors.New("bench: a history run needs at least one size")
	}
	if cfg.Requests <= 0 {
		cfg.Requests = 200
	}
	rep := &HistoryReport{}
	for _, n := range cfg.Sizes {
		p, err := historyPoint(cfg, n)
		if err != nil {
			return nil, fmt.Errorf("history of %d finished tasks: %w", n, err)
		}
		rep.Points = append(rep.Points, *p)
		for _, l := range p.lines() {
			cfg.progress("  %s", l)
		}
	}
	return rep, nil
}

func (c HistoryRunConfig) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format+"\n", args...)
	}
}

func historyPoint(cfg HistoryRunConfig, finished int) (*HistoryPoint, error) {
	dir := filepath.Join(cfg.Root, fmt.Sprintf("history-%d-%d", finished, cfg.Live))
	cfg.progress("generating %d finished + %d live tasks in %s", finished, cfg.Live, dir)
	gen, err := GenerateHistory(HistoryConfig{Dir: dir, Finished: finished, Live: cfg.Live, Devices: cfg.Devices, End: cfg.End, PerDay: cfg.PerDay})
	if err != nil {
		return nil, err
	}
	if !cfg.Keep {
		defer os.RemoveAll(dir)
	}
	p := &HistoryPoint{Gen: gen}
	cfg.progress("  %d events in %.1fs (%.0f finished tasks/s); first start (whole log replayed) and snapshot",
		gen.Events, gen.Took.Seconds(), float64(finished)/gen.Took.Seconds())
	if cfg.Verify != nil {
		if err := cfg.Verify(dir); err != nil {
			return nil, err
		}
	}

	// The first start replays the whole log; the snapshot it writes is
	// what every later start reads.
	t0 := time.Now()
	n, err := openHistoryNode(dir)
	if err != nil {
		return nil, err
	}
	p.Replay = time.Since(t0)
	t0 = time.Now()
	path, err := n.Snapshot()
	p.Snapshot = time.Since(t0)
	if err == nil {
		var info os.FileInfo
		if info, err = os.Stat(path); err == nil {
			p.SnapshotBytes = info.Size()
		}
	}
	if cerr := n.Close(); err == nil {
		err = cerr
	}
	n = nil
	if err != nil {
		return nil, err
	}

	cfg.progress("  Merkle tree rebuild, start from the snapshot, heap, list")
	if err := timeMerkle(dir, p); err != nil {
		return nil, err
	}
	base := liveHeap()
	cpu0 := processCPU()
	t0 = time.Now()
	n, err = openHistoryNode(dir)
	if err != nil {
		return nil, err
	}
	p.Start, p.StartCPU, p.Phases = time.Since(t0), processCPU()-cpu0, n.Started
	defer n.Close()
	if h := liveHeap(); h > base {
		p.Heap = h - base
	}
	if err := timeList(n.API.Handler(), gen, cfg.Requests, p); err != nil {
		return nil, err
	}
	return p, nil
}

// timeMerkle times the scan that rebuilds the Merkle tree from the log.
func timeMerkle(dir string, p *HistoryPoint) error {
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer store.Close()
	cpu0, t0 := processCPU(), time.Now()
	tree, err := transparency.Build(store)
	p.Merkle, p.MerkleCPU = time.Since(t0), processCPU()-cpu0
	if err == nil && tree.Size() != p.Gen.Events {
		err = fmt.Errorf("bench: the Merkle tree holds %d events, the history %d", tree.Size(), p.Gen.Events)
	}
	if err != nil {
		return err
	}
	const proofs = 200
	size := tree.Size()
	lat := make([]time.Duration, 0, proofs)
	for i := range uint64(proofs) {
		t0 := time.Now()
		if _, err := tree.Inclusion((i*size/proofs+i*7919)%size, size); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	p.ProofP50, p.ProofP99 = pct(lat, 50), pct(lat, 99)
	return nil
}

func openHistoryNode(dir string) (*node.Node, error) {
	return node.Open(node.Config{DataDir: dir, Commands: commands.DefaultConfig(), Logger: zerolog.Nop()})
}

// timeList times two admin lists through the API's handler: succeeded
// tasks filtered by device, one request per device in turn, and pages of
// succeeded tasks from cursors spread over the whole history.
func timeList(h http.Handler, gen *History, requests int, p *HistoryPoint) error {
	byDevice := func(i int) string {
		return fmt.Sprintf("/api/v1/admin/tasks?state=SUCCEEDED&device_id=%s&limit=%d", gen.Devices[i%len(gen.Devices)], HistoryListLimit)
	}
	deep := func(i int) string {
		cursor := 1 + uint64(i+1)*gen.Events/uint64(requests+1)
		return fmt.Sprintf("/api/v1/admin/tasks?state=SUCCEEDED&cursor=%d&limit=%d", cursor, HistoryListLimit)
	}
	var err error
	if p.ListP50, p.ListP99, p.ListTasks, err = timeRequests(h, gen.AdminToken, requests, byDevice, nil); err != nil {
		return err
	}
	var ids []string
	p.PageP50, p.PageP99, p.PageTasks, err = timeRequests(h, gen.AdminToken, requests, deep, func(body []byte) {
		if _, id := pageTasks(body); id != "" {
			ids = append(ids, id)
		}
	})
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("bench: no page of finished tasks held a task")
	}
	provenance := func(i int) string { return "/api/v1/admin/tasks/" + ids[i%len(ids)] + "/provenance" }
	p.ProvenanceP50, p.ProvenanceP99, _, err = timeRequests(h, gen.AdminToken, len(ids), provenance, nil)
	return err
}

// timeRequests times GET path(i) for i in [0, n): p50, p99, and the
// fewest tasks a page held; seen (nil: none) gets each answer's body.
func timeRequests(h http.Handler, token string, n int, path func(i int) string, seen func(body []byte)) (p50, p99 time.Duration, fewest int, err error) {
	lat := make([]time.Duration, 0, n)
	fewest = -1
	for i := range n {
		req := httptest.NewRequest(http.MethodGet, path(i), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		w := &countingWriter{header: http.Header{}}
		t0 := time.Now()
		h.ServeHTTP(w, req)
		lat = append(lat, time.Since(t0))
		if w.status != http.StatusOK {
			return 0, 0, 0, fmt.Errorf("bench: GET %s answered %d: %.200s", path(i), w.status, w.body)
		}
		if seen != nil {
			seen(w.body)
		}
		if c, _ := pageTasks(w.body); fewest < 0 || c < fewest {
			fewest = c
		}
	}
	slices.Sort(lat)
	return lat[len(lat)*50/100], lat[min(len(lat)-1, len(lat)*99/100)], fewest, nil
}

// countingWriter keeps the answer of one request.
type countingWriter struct {
	header http.Header
	status int
	body   []byte
}

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *countingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body = append(w.body, b...)
	return len(b), nil
}

// pageTasks is how many tasks a list page holds (-1: not a page) and the
// id of its first ("" if none).
func pageTasks(body []byte) (n int, first string) {
	var doc struct {
		Tasks []struct {
			ID string `json:"id"`
		} `json:"tasks"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return -1, ""
	}
	if len(doc.Tasks) > 0 {
		first = doc.Tasks[0].ID
	}
	return len(doc.Tasks), first
}

// Slope is (value at the last size − value at the first) / (last size −
// first size), per finished task; ok is false with fewer than two sizes.
func (r *HistoryReport) slope(v func(p *HistoryPoint) float64) (float64, bool) {
	if len(r.Points) < 2 {
		return 0, false
	}
	a, b := &r.Points[0], &r.Points[len(r.Points)-1]
	dn := float64(b.Gen.Finished - a.Gen.Finished)
	if dn == 0 {
		return 0, false
	}
	return (v(b) - v(a)) / dn, true
}

// HeapSlope, StartSlope (seconds per finished task), SnapshotSlope and
// ListP99Slope (seconds per finished task) are the run's slopes.
func (r *HistoryReport) HeapSlope() (float64, bool) {
	return r.slope(func(p *HistoryPoint) float64 { return float64(p.Heap) })
}

func (r *HistoryReport) StartSlope() (float64, bool) {
	return r.slope(func(p *HistoryPoint) float64 { return p.Start.Seconds() })
}

func (r *HistoryReport) SnapshotSlope() (float64, bool) {
	return r.slope(func(p *HistoryPoint) float64 { return float64(p.SnapshotBytes) })
}

func (r *HistoryReport) ListP99Slope() (float64, bool) {
	return r.slope(func(p *HistoryPoint) float64 { return p.ListP99.Seconds() })
}

// Lines prints the figures of each size, then the slopes.
func (r *HistoryReport) Lines() []string {
	var out []string
	for i := range r.Points {
		out = append(out, r.Points[i].lines()...)
	}
	if len(r.Points) < 2 {
		return out
	}
	a, b := r.Points[0].Gen.Finished, r.Points[len(r.Points)-1].Gen.Finished
	heap, _ := r.HeapSlope()
	start, _ := r.StartSlope()
	snap, _ := r.SnapshotSlope()
	startCPU, _ := r.slope(func(p *HistoryPoint) float64 { return p.StartCPU.Seconds() })
	merkleCPU, _ := r.slope(func(p *HistoryPoint) float64 { return p.MerkleCPU.Seconds() })
	bare, _ := r.slope(func(p *HistoryPoint) float64 { return p.Phases.WithoutDamageCheck().Seconds() })
	list, _ := r.ListP99Slope()
	page, _ := r.slope(func(p *HistoryPoint) float64 { return p.PageP99.Seconds() })
	label := fmt.Sprintf("slope %d → %d finished:", a, b)
	return append(out,
		fmt.Sprintf("%s heap after start       %8.1f B per finished task      (aim ≤ 64)", label, heap),
		fmt.Sprintf("%s start-up               %8.3f s per million finished   (aim ≤ 0.1; CPU %.3f s, of which the Merkle rebuild's CPU %.3f s)", label, start*1e6, startCPU*1e6, merkleCPU*1e6),
		fmt.Sprintf("%s start-up less the check's wait %8.3f s per million finished   (aim ≤ 0.1: snapshot and tail only)", label, bare*1e6),
		fmt.Sprintf("%s snapshot               %8.1f B per finished task      (aim ≤ 16)", label, snap),
		fmt.Sprintf("%s list p99 by device     %8.2f ms per million finished  (aim: p99 ≤ 20 ms at any size)", label, list*1e9),
		fmt.Sprintf("%s page p99 deep in it    %8.2f ms per million finished", label, page*1e9))
}

// lines prints one size's figures.
func (p *HistoryPoint) lines() []string {
	g, ph := p.Gen, p.Phases
	name := fmt.Sprintf("history %d finished + %d live", g.Finished, g.Live)
	return []string{
		fmt.Sprintf("%-40s generated %9d events in %6.2f s (CPU %6.2f s)  %9.0f finished tasks/s  taskledger.db %.1f MB",
			name, g.Events, g.Took.Seconds(), g.CPU.Seconds(), float64(g.Finished)/g.Took.Seconds(), float64(g.FileBytes)/1e6),
		fmt.Sprintf("%-40s first start (whole log) %6.2f s  snapshot %6.2f s, %.1f MB  Merkle rebuild %6.2f s (CPU %6.2f s)",
			name, p.Replay.Seconds(), p.Snapshot.Seconds(), float64(p.SnapshotBytes)/1e6, p.Merkle.Seconds(), p.MerkleCPU.Seconds()),
		fmt.Sprintf("%-40s start from snapshot %6.2f s (CPU %6.2f s; the Merkle rebuild included)  heap after start %.1f MB",
			name, p.Start.Seconds(), p.StartCPU.Seconds(), float64(p.Heap)/1e6),
		fmt.Sprintf("%-40s   its steps: load %.2f s; damage check %.2f s beside it, then waited for %.2f s; chain %.2f s; read model %.2f s "+
			"(its filter's %d full segments read %.2f s beside the load); without the wait %.2f s",
			name, ph.Load.Seconds(), ph.DamageCheck.Seconds(), ph.DamageWait.Seconds(),
			ph.ChainCheck.Seconds(), ph.ReadModel.Seconds(), ph.FilterAheadSegments, ph.FilterAhead.Seconds(), ph.WithoutDamageCheck().Seconds()),
		fmt.Sprintf("%-40s list SUCCEEDED by device, limit %d: p50 %7.2f ms  p99 %7.2f ms  (%d tasks on a page at least: a finished task has no claim)",
			name, HistoryListLimit, ms(p.ListP50), ms(p.ListP99), p.ListTasks),
		fmt.Sprintf("%-40s list SUCCEEDED from a cursor spread over the history, limit %d: p50 %7.2f ms  p99 %7.2f ms  (%d tasks on a page at least)",
			name, HistoryListLimit, ms(p.PageP50), ms(p.PageP99), p.PageTasks),
		fmt.Sprintf("%-40s inclusion proof (its tile read back): p50 %7.3f ms  p99 %7.3f ms",
			name, ms(p.ProofP50), ms(p.ProofP99)),
		fmt.Sprintf("%-40s provenance of a finished task spread over the history: p50 %7.2f ms  p99 %7.2f ms",
			name, ms(p.ProvenanceP50), ms(p.ProvenanceP99)),
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
