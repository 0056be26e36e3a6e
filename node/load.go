package node

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"runtime/debug"

	"github.com/rs/zerolog"

	"taskledger/internal/gcfloor"
	"taskledger/ledger"
	"taskledger/projections"
	"taskledger/snapshots"
)

// Loaded says how the projections were loaded.
type Loaded struct {
	State *projections.State
	// Snapshot is the header of the snapshot the load started from, nil
	// when the whole log was replayed.
	Snapshot *snapshots.Header
	// SnapshotServerClaims is the number of server-issued claims the
	// snapshot covers.
	SnapshotServerClaims uint64
	// Refused lists the snapshot files that were not trusted, newest first.
	Refused []snapshots.Refusal
	// Replayed is the number of events applied from the log.
	Replayed uint64
}

// SnapshotWant is what a snapshot must have been derived with to be
// loaded with cfg: this build's projection schema and the same
// idempotency retention (it decides which records are tombstoned).
func SnapshotWant(cfg projections.Config) snapshots.Want {
	c := fmt.Sprintf("idempotency_retention_ms=%d", cfg.IdempotencyRetentionMs)
	if cfg.KeepSettled { // all tasks: one that keeps only live ones is another projection
		c += ",keep_settled"
	}
	return snapshots.Want{Schema: projections.SchemaVersion, Config: c}
}

// DataDir is the data directory of an open ledger.
func DataDir(store *ledger.Store) string { return filepath.Dir(store.Path()) }

// RestoreSnapshot builds projections from a snapshot's content and checks
// that they cover what its header says. The projections keep s.State as
// their memory (projections.RestoreOwned): it must not change afterwards.
// The garbage collector is off meanwhile (gcfloor.Pause).
func RestoreSnapshot(s *snapshots.Snapshot, cfg projections.Config) (*projections.State, error) {
	resume := gcfloor.Pause()
	st, err := projections.RestoreOwned(s.State, cfg)
	resume()
	if err != nil {
		return nil, err
	}
	if st.Head.Seq != s.Seq || !bytes.Equal(st.Head.Hash, s.Hash) {
		return nil, fmt.Errorf("%w: content covers seq %d, header seq %d", snapshots.ErrFormat, st.Head.Seq, s.Seq)
	}
	return st, nil
}

// LoadProjections builds the projections from the newest valid snapshot
// and the log after it, or from the whole log when no snapshot can be
// trusted (none, corrupt, foreign, another schema or configuration, not
// matching the log, or its tail does not apply). Refused snapshots are
// logged and reported, never fatal. Soft records are loaded last.
func LoadProjections(store *ledger.Store, cfg projections.Config, log zerolog.Logger) (*Loaded, error) {
	return LoadProjectionsFrom(store, DataDir(store), cfg, log)
}

// LoadProjectionsFrom is LoadProjections over any backend, with the
// snapshots of the data directory dir (a cluster node's own).
func LoadProjectionsFrom(store ledger.Backend, dir string, cfg projections.Config, log zerolog.Logger) (*Loaded, error) {
	return loadProjections(store, dir, cfg, log, func(cfg projections.Config) (*projections.State, error) { return Rebuild(store, cfg) })
}

// loadProjections is LoadProjectionsFrom whose replay of the whole log,
// when no snapshot loads, is whole.
func loadProjections(store ledger.Backend, dir string, cfg projections.Config, log zerolog.Logger,
	whole func(projections.Config) (*projections.State, error)) (*Loaded, error) {
	snap, refused, err := snapshots.LoadNewest(snapshots.Dir(dir), SnapshotWant(cfg), store)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Refused: refused}
	if snap != nil {
		st, claims, err := fromSnapshot(store, snap, cfg)
		if err == nil {
			h := snap.Header
			l.State, l.Snapshot, l.SnapshotServerClaims, l.Replayed = st, &h, claims, st.Head.Seq-snap.Seq
		} else {
			l.Refused = append(l.Refused, snapshots.Refusal{Path: snap.Path, Seq: snap.Seq,
				Err: fmt.Errorf("snapshot + tail does not load: %w", err)})
		}
	}
	for _, r := range l.Refused {
		log.Warn().Str("snapshot", r.Path).Uint64("seq", r.Seq).Str("reason", r.Err.Error()).
			Msg("snapshot refused; it is not trusted")
	}
	if l.State != nil {
		log.Info().Uint64("snapshot_seq", l.Snapshot.Seq).Uint64("tail_events", l.Replayed).
			Msg("projections loaded from a snapshot and the log after it")
		return l, nil
	}
	st, err := whole(cfg)
	if err != nil {
		return nil, err
	}
	l.State, l.Replayed = st, st.Head.Seq
	log.Info().Uint64("events", l.Replayed).Msg("projections rebuilt from the whole log")
	return l, nil
}

// Rebuild builds the projections from the whole log
// (projections.Rebuild). While a soft memory limit bounds the heap (serve
// and bench set one: cmd/taskledger/gc.go) the garbage collector is off
// meanwhile: a replay keeps about half of what it allocates, so collecting
// during it mostly marks memory that stays, and the limit still starts a
// collection should the heap come near it. Without a limit the collector
// runs as it is set.
func Rebuild(store projections.Source, cfg projections.Config) (*projections.State, error) {
	defer replayGC()()
	return projections.Rebuild(store, cfg)
}

// replayGC turns the garbage collector off for a replay of the whole log
// while a soft memory limit bounds the heap (Rebuild), and returns what
// turns it back on.
func replayGC() (resume func()) {
	if debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return gcfloor.Pause()
	}
	return func() {}
}

// pausedTail is the longest tail replayed with the garbage collector still
// off after a restore: a few hundred bytes of garbage per event.
const pausedTail = 100000

// fromSnapshot restores a snapshot, replays the log after it and loads
// the soft records. It returns the server-issued claims the snapshot
// covers. With a short tail the garbage collector stays off until the
// end, so its first cycle over the restored projections runs after the
// load instead of slowing it.
func fromSnapshot(store ledger.Backend, snap *snapshots.Snapshot, cfg projections.Config) (*projections.State, uint64, error) {
	if head, err := store.Head(); err == nil && head.Seq-snap.Seq <= pausedTail {
		defer gcfloor.Pause()()
	}
	st, err := RestoreSnapshot(snap, cfg)
	if err != nil {
		return nil, 0, err
	}
	claims := st.ServerClaims
	if err := st.Replay(store, nil); err != nil {
		return nil, 0, err
	}
	if err := st.LoadSoft(store); err != nil {
		return nil, 0, err
	}
	return st, claims, nil
}

// NewSnapshot captures the projections (which must not change meanwhile)
// as a snapshot; kcv is the key-check value the server-issued claims they
// cover were verified under, or nil.
func NewSnapshot(st *projections.State, kcv []byte) (*snapshots.Snapshot, error) {
	return SnapshotOf(st.Capture(), st.Config(), kcv)
}

// SnapshotOf encodes a capture of projections derived with cfg as a
// snapshot (outside any lock: the capture shares nothing mutable).
func SnapshotOf(c *projections.Capture, cfg projections.Config, kcv []byte) (*snapshots.Snapshot, error) {
	content, err := c.EncodeSnapshot()
	if err != nil {
		return nil, err
	}
	h, want := c.Head(), SnapshotWant(cfg)
	return &snapshots.Snapshot{Header: snapshots.Header{Seq: h.Seq, Hash: h.Hash, At: h.At,
		Schema: want.Schema, Config: want.Config, KeyCheck: kcv}, State: content}, nil
}
