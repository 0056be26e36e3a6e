package node

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"taskledger/api"
	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/projections"
	"taskledger/snapshots"
)

// snapshotter takes a snapshot every `every` events while the server runs.
// The sequencer only signals it (Committed hook); the projections are
// copied by the sequencer between two decisions (Engine.CaptureDecided,
// projections.Capture: it stops deciding for the copy only, commits go
// on), and once every event the copy holds has committed it is encoded,
// written and fsynced outside any lock. A copy whose events did not
// commit is dropped; the next trigger takes another.
type snapshotter struct {
	dir     string
	every   uint64
	eng     *commands.Engine
	kcv     []byte
	log     zerolog.Logger
	metrics *api.Metrics
	written func(seq uint64, path string, err error)
	signed  func(seq uint64) // signs the checkpoint of a snapshot's seq
	timed   func(seq uint64, capture, total time.Duration)

	mu     sync.Mutex    // one snapshot at a time
	last   atomic.Uint64 // seq of the newest snapshot written or loaded
	lastAt atomic.Int64  // when it was written (unix ms of clock), or when this process started
	clock  commands.Clock
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func newSnapshotter(dir string, every uint64, kcv []byte, last uint64, log zerolog.Logger, m *api.Metrics,
	written func(uint64, string, error)) *snapshotter {
	s := &snapshotter{dir: dir, every: every, kcv: kcv, log: log, metrics: m, written: written,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.last.Store(last)
	return s
}

// age is the newest snapshot's age in seconds and the committed events
// after it (the snapshot metrics).
func (s *snapshotter) age() (float64, uint64) {
	var secs float64
	if s.clock != nil {
		secs = float64(max(s.clock.Now().UnixMilli()-s.lastAt.Load(), 0)) / 1000
	}
	var behind uint64
	if s.eng != nil {
		if h := s.eng.Head().Seq; h > s.last.Load() {
			behind = h - s.last.Load()
		}
	}
	return secs, behind
}

// start runs the background loop over eng.
func (s *snapshotter) start(eng *commands.Engine) {
	s.eng = eng
	go s.run()
}

// committed is the sequencer's hook: it never blocks.
func (s *snapshotter) committed(head ledger.Head) {
	if s.every > 0 && head.Seq >= s.last.Load()+s.every {
		s.trigger()
	}
}

func (s *snapshotter) trigger() {
	select {
	case s.kick <- struct{}{}:
	default: // one is pending already
	}
}

func (s *snapshotter) run() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
			select {
			case <-s.stop: // shutting down: a snapshot can wait for the next start
				return
			default:
			}
			_, _ = s.take(false)
		}
	}
}

// take writes a snapshot of the committed projections unless the newest
// snapshot already covers them (force), or covers all but fewer than
// `every` events (not force); it returns the file's path ("" when there
// was nothing to write).
func (s *snapshotter) take(force bool) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now() //tl:wallclock snapshot-duration metric
	var capture *projections.Capture
	var cfg projections.Config
	var held time.Duration
	err := s.eng.CaptureDecided(func(st *projections.State) {
		t0 := time.Now() //tl:wallclock snapshot-capture metric
		if last := s.last.Load(); st.Head.Seq > last && (force || st.Head.Seq >= last+s.every) {
			capture, cfg = st.Capture(), st.Config()
		}
		held = time.Since(t0)
	})
	if err == nil && capture == nil {
		return "", nil
	}
	var snap *snapshots.Snapshot
	if err == nil { // every captured event committed
		snap, err = SnapshotOf(capture, cfg, s.kcv)
	}
	path := ""
	if err == nil {
		path, err = snapshots.Write(s.dir, snap)
	}
	if err != nil {
		s.log.Error().Err(err).Msg("snapshot failed; the log is unaffected")
		if s.written != nil {
			s.written(0, "", err)
		}
		return "", err
	}
	s.last.Store(snap.Seq)
	if s.clock != nil {
		s.lastAt.Store(s.clock.Now().UnixMilli())
	}
	if s.signed != nil {
		s.signed(snap.Seq)
	}
	if s.metrics != nil {
		s.metrics.ObserveSnapshot(time.Since(start))
	}
	if err := snapshots.Prune(s.dir, snapshots.Keep); err != nil {
		s.log.Warn().Err(err).Msg("pruning old snapshots failed")
	}
	s.log.Info().Uint64("seq", snap.Seq).Str("path", path).Int("bytes", len(snap.State)).Dur("took", time.Since(start)).
		Msg("snapshot written")
	if s.written != nil {
		s.written(snap.Seq, path, nil)
	}
	if s.timed != nil {
		s.timed(snap.Seq, held, time.Since(start))
	}
	return path, nil
}

// close stops the loop and waits for a snapshot being written to finish.
func (s *snapshotter) close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}
