// Package node assembles a taskledger node: the ledger file, the
// projections loaded from it, the sequencer and the HTTP interface. The
// serve command, the benchmark and the end-to-end tests all start nodes
// through it.
package node

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"taskledger/api"
	"taskledger/audit/merkle"
	"taskledger/audit/transparency"
	"taskledger/commands"
	"taskledger/events"
	"taskledger/internal/durable"
	"taskledger/ledger"
	"taskledger/projections"
	"taskledger/snapshots"
)

// InitialTokenFile is written on the first start on an empty data directory.
const InitialTokenFile = "initial-admin-token"

// Config is a node's configuration.
type Config struct {
	DataDir       string
	Manual        bool // --clock=manual
	Commands      commands.Config
	SnapshotEvery uint64
	Logger        zerolog.Logger
	NoSync        bool           // benchmarks only
	Clock         commands.Clock // nil: wall clock
	// Stderr receives operator messages (where the initial token is).
	Stderr func(format string, args ...any)
	// SnapshotWritten, when set, is told about every snapshot the running
	// node writes (seq and path) or fails to write (err).
	SnapshotWritten func(seq uint64, path string, err error)
	// SnapshotTimed, when set, is told how long each snapshot the running
	// node wrote held the sequencer (capture: it decides nothing
	// meanwhile) and took in all (benchmarks).
	SnapshotTimed func(seq uint64, capture, total time.Duration)
	// WrapLog, when set, wraps the log the sequencer appends to (tests
	// that hold a commit in flight).
	WrapLog func(commands.Log) commands.Log
	// Phases, when set, is told where each command's time went
	// (commands.Metrics.Phases; benchmarks).
	Phases func(commands.Phases)
	// FreeSpace, when set, replaces the statfs of DataDir that /readyz
	// holds against api.MinFreeBytes (tests simulate a full disk).
	FreeSpace func() (uint64, error)
	// BackupDir, when set, receives a backup archive every BackupEvery
	// (serve --backup-dir, --backup-every), the BackupKeep newest kept;
	// BackupWritten, when set, is told about each interval: the archive
	// written, the error, or neither (skipped: the head is backed up).
	BackupDir     string
	BackupEvery   time.Duration
	BackupKeep    int
	BackupWritten func(path string, err error)
	// SoftCollectEvery is how often expired soft idempotency records are
	// deleted (0: DefaultSoftCollectEvery); they are also deleted at start.
	SoftCollectEvery time.Duration
	// On a cluster: the sequencer collects unreferenced blobs at each
	// promotion and every BlobCollectEvery (0: DefaultBlobCollectEvery),
	// sparing those stored less than BlobGrace ago (0:
	// DefaultBlobGrace); BlobsCollected, when set, is told each round.
	BlobCollectEvery time.Duration
	BlobGrace        time.Duration
	BlobsCollected   func(BlobsCollected, error)
	// Offline opens the ledger for one offline command (admin-token
	// create|revoke on a stopped ledger): no initial admin token on an
	// empty directory, no claim-token secret check, and a test-clock
	// ledger runs on its own clock.
	Offline bool
	// MetricsElsewhere leaves GET /metrics off the API's router: the
	// server serves Metrics.Handler() on its own listener
	// (serve --metrics-listen).
	MetricsElsewhere bool
}

// Node is a running ledger.
type Node struct {
	Store *ledger.Store // the bbolt file; nil on a cluster
	// Log is the log the node runs on: Store, or the replicated stream.
	Log     ledger.Backend
	Blobs   *ledger.Blobs
	Engine  *commands.Engine
	API     *api.Server
	Metrics *api.Metrics
	// Loaded says how the projections were loaded at start.
	Loaded *Loaded
	// Transparency is the Merkle tree, the checkpoint key and the signed
	// checkpoints.
	Transparency *transparency.Log
	// Started says how long each step of start-up took.
	Started StartPhases
	cfg     Config
	head    *headFile
	snap    *snapshotter
	soft    *softCollector
	backups *backupScheduler // nil without BackupDir
	cluster *clusterLink     // nil on bbolt
}

// Errors of start-up refusals.
var (
	ErrManualLedger = errors.New("this ledger was served with --clock=manual; serve it with --clock=manual (test ledgers never return to the wall clock)")
	ErrSecret       = errors.New("the claim-token secret does not reproduce the server-issued claims in the log")
	ErrSecretReused = errors.New("the claim-token secret equals an admin or device token")
	ErrNoSecret     = errors.New("the log holds server-issued claims: --claim-token-secret is required")
)

// Open opens (creating if needed) the ledger in cfg.DataDir and starts a
// node on it. Refusals leave the data directory as it was.
func Open(cfg Config) (*Node, error) {
	if cfg.Stderr == nil {
		cfg.Stderr = func(string, ...any) {}
	}
	if err := checkLogPresent(cfg.DataDir); err != nil {
		return nil, err
	}
	fresh := !ledger.Exists(cfg.DataDir)
	store, err := ledger.Open(cfg.DataDir, ledger.Options{NoSync: cfg.NoSync})
	if err != nil {
		return nil, err
	}
	n, err := open(cfg, source{log: store, store: store, fresh: fresh})
	if err != nil {
		store.Close()
		if fresh {
			os.Remove(filepath.Join(cfg.DataDir, ledger.FileName))
		}
		return nil, err
	}
	return n, nil
}

// source is what a node runs on: the bbolt file (store set), or a
// replicated log shared with other nodes (cluster set; store nil).
type source struct {
	log     ledger.Backend
	store   *ledger.Store
	fresh   bool // a new bbolt file
	cluster *clusterLink
}

func open(cfg Config, src source) (*Node, error) {
	store, backend := src.store, src.log
	mc, err := backend.ManualClock()
	if err != nil {
		return nil, err
	}
	if mc.Enabled && cfg.Offline {
		cfg.Manual = true
	}
	if mc.Enabled && !cfg.Manual {
		return nil, ErrManualLedger
	}
	metrics := api.NewMetrics()
	start := time.Now() //tl:wallclock replay-duration metric
	// A cluster's stream keeps no read model: its nodes keep settled tasks.
	pcfg := projections.Config{IdempotencyRetentionMs: cfg.Commands.IdempotencyRetention.Milliseconds(), KeepSettled: store == nil}
	var rebuilt *readModelRebuild // the whole-log replay wrote the read model
	whole := func(c projections.Config) (*projections.State, error) { return Rebuild(backend, c) }
	if store != nil {
		whole = wholeLogLoad(store, &rebuilt)
	}
	var phases StartPhases
	var built *storedTree
	var ahead *filterAhead
	if store != nil {
		built = buildStoredTree(store)
		ahead = readFilterAhead(store)
		defer ahead.stop()
	}
	loaded, err := loadProjections(backend, cfg.DataDir, pcfg, cfg.Logger, whole)
	phases.Load = time.Since(start)
	if err != nil {
		if built != nil {
			<-built.done // no read of the store outlives a refused open
		}
		// A log that does not replay: name its first damaged event when
		// the hash chain shows one.
		if cerr := checkChain(backend, ledger.GenesisHead()); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	state := loaded.State
	from := ledger.GenesisHead()
	if loaded.Snapshot != nil {
		from = ledger.Head{Seq: loaded.Snapshot.Seq, Hash: loaded.Snapshot.Hash}
	}
	var tree *merkle.Tree
	if store != nil {
		if err := checkSnapshotsReached(loaded); err != nil {
			<-built.done
			return nil, err
		}
		t0 := time.Now() //tl:wallclock start-up phase
		tree, from, err = checkStored(store, built, cfg.DataDir, from, cfg.Logger)
		phases.DamageCheck, phases.DamageWait = built.took, time.Since(t0)
		if err != nil {
			return nil, err
		}
	}
	t0 := time.Now() //tl:wallclock start-up phase
	if err := checkChain(backend, from); err != nil {
		return nil, err
	}
	phases.ChainCheck = time.Since(t0)
	if store != nil {
		if err := checkHeadFile(cfg.DataDir, store, state.Head); err != nil {
			return nil, err
		}
		t0 := time.Now() //tl:wallclock start-up phase
		if err := syncReadModel(store, state, rebuilt, ahead, cfg.Logger); err != nil {
			return nil, err
		}
		phases.ReadModel = time.Since(t0)
		ahead.stop() // ended already, unless a rebuild dropped what it read
		phases.FilterAhead, phases.FilterAheadSegments = ahead.took, ahead.taken
	}
	metrics.ObserveReplay(time.Since(start))
	var initial []byte
	if src.cluster != nil {
		// The node whose create of the initial token wins initializes an
		// empty stream; every node reads the tokens after that.
		if initial, err = src.cluster.initialToken(cfg, state.Head); err != nil {
			return nil, err
		}
	}
	admins, err := backend.AdminTokens()
	if err != nil {
		return nil, err
	}
	if initial != nil {
		admins["initial"] = initial
	}
	// The offline admin-token command decides nothing about claims: it
	// needs no claim-token secret (and is given none).
	if !cfg.Offline {
		if err := checkSecret(backend, loaded, admins, cfg.Commands.ClaimSecret); err != nil {
			return nil, err
		}
	}
	blobs, err := ledger.OpenBlobs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if src.cluster != nil && src.cluster.blobs != nil {
		blobs.SetShared(src.cluster.blobs)
	}
	// The data directory's layout (operations.md) has snapshots/ from the
	// first start on, before the first snapshot is written into it.
	if err := os.MkdirAll(snapshots.Dir(cfg.DataDir), 0o700); err != nil {
		return nil, fmt.Errorf("snapshot directory: %w", err)
	}
	if store != nil && !cfg.Offline && state.Head.Seq == 0 && admins["initial"] == nil {
		// A new ledger, or one whose first start was cut before its initial
		// token's hash was committed: the token file is written durably
		// first, so an active hash always has its whole file (D271).
		tok, err := api.NewAdminToken()
		if err != nil {
			return nil, err
		}
		path := filepath.Join(cfg.DataDir, InitialTokenFile)
		if err := durable.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", InitialTokenFile, err)
		}
		h := sha256.Sum256([]byte(tok))
		if err := store.PutAdminToken("initial", h[:]); err != nil {
			return nil, err
		}
		admins["initial"] = h[:]
		cfg.Stderr("created a new ledger; the initial admin token is in %s (mode 0600)\n", path)
	}
	cfg.Commands.OutsideAdminTokens = make(map[string]string, len(admins))
	for name, h := range admins {
		cfg.Commands.OutsideAdminTokens[name] = hex.EncodeToString(h)
	}
	var manual *commands.ManualClock
	clock := cfg.Clock
	if clock == nil {
		clock = commands.NewSteadyClock(commands.SystemTime{}, time.UnixMilli(state.Head.At))
	}
	if cfg.Manual {
		at := max(commands.Ms(clock.Now()), state.Head.At)
		if mc.Enabled {
			at = max(mc.Now, state.Head.At)
		}
		manual = commands.NewManualClock(time.UnixMilli(at))
		if !mc.Enabled || mc.Now != at {
			if err := backend.Append(&ledger.Batch{Expected: state.Head, ManualClock: &ledger.ManualClock{Enabled: true, Now: at}}); err != nil {
				return nil, err
			}
		}
	}
	var load commands.Loader = func() (*projections.State, error) {
		l, err := LoadProjectionsFrom(backend, cfg.DataDir, pcfg, cfg.Logger)
		if err != nil {
			return nil, err
		}
		if store != nil { // the read model on disk is at the committed head
			if err := attachReadModel(store, l.State, nil, cfg.Logger); err != nil {
				return nil, err
			}
		}
		return l.State, nil
	}
	if src.cluster != nil {
		load = src.cluster.retrying(load)
	}
	var kcv []byte
	if cfg.Commands.ClaimSecret != nil {
		kcv = commands.SecretCheck(cfg.Commands.ClaimSecret)
	}
	var last uint64
	if loaded.Snapshot != nil {
		last = loaded.Snapshot.Seq
	}
	var tclock transparency.Clock = clock
	if manual != nil {
		tclock = manual
	}
	// The transparency log: on bbolt the tree and checkpoints of the file;
	// on a cluster (clustertlog.go) the stream's, signed by the sequencer
	// with the cluster's key when this node was given it.
	var tlog *transparency.Log
	if store != nil {
		if tlog, err = transparency.Open(store, tree, cfg.DataDir, tclock, cfg.Logger); err != nil {
			return nil, err
		}
	} else if src.cluster != nil && !cfg.Offline {
		if tlog, err = src.cluster.openTransparency(cfg, tclock); err != nil {
			return nil, err
		}
	}
	snap := newSnapshotter(snapshots.Dir(cfg.DataDir), cfg.SnapshotEvery, kcv, last, cfg.Logger, metrics, cfg.SnapshotWritten)
	snap.timed = cfg.SnapshotTimed
	snap.clock = clock
	snap.lastAt.Store(clock.Now().UnixMilli())
	observe := observeLeases(metrics)
	commits := api.NewNotifier()
	var hf *headFile
	if store != nil {
		if hf, err = openHeadFile(cfg.DataDir, state.Head); err != nil {
			tlog.Close()
			return nil, err
		}
		// Past every refusal, before anything can write a blob: what crashed
		// or refused uploads left in blobs/ goes.
		collectBlobs(store, blobs, state, cfg.Logger)
	}
	var log commands.Log = backend
	if src.cluster != nil {
		log = src.cluster.fence
	}
	if cfg.WrapLog != nil {
		log = cfg.WrapLog(log)
	}
	var leaves func(uint64, [][]byte, [][]byte)
	var leafHash func([]byte) []byte
	if tlog != nil {
		leaves, leafHash = tlog.Committed, tlog.LeafHash
	}
	em := metrics.Engine()
	em.Phases = cfg.Phases
	eng := commands.NewEngine(commands.Options{Log: log, Load: load, State: state, Clock: clock, Manual: manual,
		Config: cfg.Commands, Metrics: em, Logger: cfg.Logger,
		Leaves: leaves, LeafHash: leafHash, ReadModel: store != nil,
		Committed: func(head ledger.Head, events []*ledger.Event, bodies []any) {
			if hf != nil {
				hf.write(head)
			}
			snap.committed(head)
			observe(events, bodies)
			if tlog != nil && src.cluster != nil && !src.cluster.sequencing() {
				tlog.Followed(events) // a follower's tree (a sequencer's commit hands its leaves over next)
			}
			commits.Notify()
			if src.cluster != nil {
				src.cluster.applied.Notify()
			}
		}})
	if tlog != nil {
		snap.signed = func(seq uint64) {
			if src.cluster != nil && !src.cluster.sequencing() {
				return // a follower's snapshot: the sequencer signs
			}
			if _, err := tlog.SignAt(seq); err != nil {
				cfg.Logger.Error().Err(err).Msg("signing the checkpoint of a snapshot failed")
			}
		}
	}
	snap.start(eng)
	metrics.WatchNode(api.NodeGauges{
		Role:     func() string { return clusterRole(src.cluster) },
		Snapshot: snap.age,
		Disk:     func() (uint64, uint64, bool) { return diskSpace(cfg.DataDir) },
	})
	switch {
	case loaded.Snapshot == nil && len(loaded.Refused) > 0 && state.Head.Seq > 0:
		// Rebuilt because no snapshot could be trusted (a schema change,
		// say): write a fresh one now so the next start is fast again.
		if _, err := snap.take(true); err != nil {
			cfg.Logger.Warn().Err(err).Msg("could not write a fresh snapshot after the rebuild")
		}
	case cfg.SnapshotEvery > 0 && state.Head.Seq >= last+cfg.SnapshotEvery:
		snap.trigger()
	}
	extra := metrics.Register
	if cfg.MetricsElsewhere {
		extra = nil
	}
	free := cfg.FreeSpace
	if free == nil {
		free = func() (uint64, error) { return freeSpace(cfg.DataDir) }
	}
	var ready func() string
	if src.cluster != nil {
		ready = src.cluster.readiness
	}
	var backupFn api.BackupFunc
	if store != nil {
		backupFn = backupFunc(store, tlog, cfg.DataDir, tclock)
	}
	srv := api.New(api.Options{Engine: eng, Events: backend, Blobs: blobs, ManualClock: cfg.Manual,
		Logger: cfg.Logger, Metrics: metrics, Extra: extra, Commits: commits, Transparency: tlog,
		Ready: ready, FreeSpace: free, Backup: backupFn})
	var active func() bool
	if src.cluster != nil {
		active = src.cluster.sequencing
	}
	var backups *backupScheduler
	if backupFn != nil && cfg.BackupDir != "" && cfg.BackupEvery > 0 {
		backups = startBackupScheduler(cfg, backupFn, eng)
	}
	phases.Total = time.Since(start)
	phases.log(cfg.Logger, loaded)
	return &Node{Store: store, Log: backend, Blobs: blobs, Engine: eng, API: srv, Metrics: metrics, Loaded: loaded, Transparency: tlog, Started: phases,
		cfg: cfg, snap: snap, head: hf, soft: newSoftCollector(eng, cfg.SoftCollectEvery, active, cfg.Logger), backups: backups}, nil
}

// Load builds the projections from the newest valid snapshot and the log
// after it (or the whole log), and the soft records.
func Load(store *ledger.Store, cfg projections.Config, log zerolog.Logger) (*projections.State, error) {
	l, err := LoadProjections(store, cfg, log)
	if err != nil {
		return nil, err
	}
	return l.State, nil
}

// checkSecret refuses a claim-token secret that equals a stored token hash,
// does not reproduce the stored key-check value or the server-issued claims
// of the log, or is missing while the log holds server-issued claims.
//
// Every server-issued claim after the snapshot the projections were loaded
// from is recomputed; the ones it covers only when the snapshot does not
// record that they were verified under this secret's key-check value.
func checkSecret(store ledger.Backend, l *Loaded, admins map[string][]byte, secret []byte) error {
	s := l.State
	kcv, err := store.SecretCheck()
	if err != nil {
		return err
	}
	if secret == nil {
		if kcv != nil || s.ServerClaims > 0 {
			return ErrNoSecret
		}
		return nil
	}
	hexText := hex.EncodeToString(secret)
	forbidden := map[string]bool{commands.HashToken(hexText): true, commands.HashToken(string(secret)): true}
	for _, h := range admins {
		if forbidden[hex.EncodeToString(h)] {
			return ErrSecretReused
		}
	}
	for _, d := range s.Devices {
		if forbidden[d.TokenHash] {
			return ErrSecretReused
		}
	}
	for _, a := range s.AdminTokens {
		if forbidden[a.TokenHash] {
			return ErrSecretReused
		}
	}
	mine := commands.SecretCheck(secret)
	if kcv != nil && subtle.ConstantTimeCompare(kcv, mine) != 1 {
		return ErrSecret
	}
	if err := verifyOpenServerClaims(s, secret); err != nil {
		return err
	}
	if err := verifyClaimChecks(store, secret, claimsVerifiedThrough(l, mine)); err != nil {
		return err
	}
	// From now on every server-issued claim applied (decided here, or
	// followed from another node) must carry this key-check value.
	s.CheckClaimsAgainst(hex.EncodeToString(mine))
	return nil
}

// verifyOpenServerClaims recomputes the token of every open server-issued
// claim of the loaded projections (at most one per device): a snapshot
// cannot bring in a claim whose token this secret does not give, whatever
// the events it was made from.
func verifyOpenServerClaims(s *projections.State, secret []byte) error {
	var bad error
	s.HeldTasks(func(t *projections.Task) bool {
		c := t.Claim
		if c.TokenOrigin != events.TokenServer {
			return true
		}
		tok := commands.ServerToken(secret, c.DeviceID, t.ID, c.AuthorizationID, c.Generation, c.Nonce)
		if subtle.ConstantTimeCompare([]byte(commands.HashToken(tok)), []byte(c.TokenHash)) != 1 {
			bad = fmt.Errorf("%w (open claim of task %s)", ErrSecret, t.ID)
			return false
		}
		return true
	})
	return bad
}

// verifyClaimChecks checks every server-issued claim after seq at start:
// one that carries its secret's key-check value is compared with this
// secret's (the fold verified at write time that it is the value the
// node's secret had, D324); one written before claims carried it is
// recomputed.
func verifyClaimChecks(src projections.Source, secret []byte, after uint64) error {
	return checkServerClaims(src, secret, after, false)
}

// VerifyServerClaims recomputes every server-issued claim after seq from
// its nonce and compares its hash in constant time (and its key-check
// value, when it carries one).
func VerifyServerClaims(src projections.Source, secret []byte, after uint64) error {
	return checkServerClaims(src, secret, after, true)
}

// checkServerClaims checks the server-issued claims after seq against
// secret: the key-check value a claim carries, and the claim token itself
// when recompute is set or the claim carries none.
func checkServerClaims(src projections.Source, secret []byte, after uint64, recompute bool) error {
	mine := hex.EncodeToString(commands.SecretCheck(secret))
	return src.Range(after, func(e *ledger.Event) error {
		if e.Type != events.EvTaskClaimed {
			return nil
		}
		b, err := events.DecodeBody(e.Type, e.Schema, e.Body)
		if err != nil {
			return err
		}
		c := b.(*events.TaskClaimed)
		if c.TokenOrigin != events.TokenServer {
			return nil
		}
		checked := c.SecretCheck != ""
		if checked && subtle.ConstantTimeCompare([]byte(c.SecretCheck), []byte(mine)) != 1 {
			return fmt.Errorf("%w (seq %d)", ErrSecret, e.Seq)
		}
		if checked && !recompute {
			return nil
		}
		tok := commands.ServerToken(secret, c.DeviceID, c.TaskID, c.AuthorizationID, c.Generation, c.Nonce)
		if subtle.ConstantTimeCompare([]byte(commands.HashToken(tok)), []byte(c.TokenHash)) != 1 {
			return fmt.Errorf("%w (seq %d)", ErrSecret, e.Seq)
		}
		return nil
	})
}

// claimsVerifiedThrough is the seq up to which the server-issued claims
// need no recomputing at start: the snapshot's, when it covers none or
// records that they were verified under the key-check value kcv; else 0.
func claimsVerifiedThrough(l *Loaded, kcv []byte) uint64 {
	snap := l.Snapshot
	if snap == nil {
		return 0
	}
	if l.SnapshotServerClaims == 0 || (snap.KeyCheck != nil && subtle.ConstantTimeCompare(snap.KeyCheck, kcv) == 1) {
		return snap.Seq
	}
	return 0
}

// Stopping begins a graceful stop before the engine closes: new API
// requests answer 503 and, on a cluster, the lease loop and the tail stop,
// so that an engine reload waiting out an outage of NATS gives up and the
// engine can close (D392). Close does the rest.
func (n *Node) Stopping() {
	n.API.Stopping()
	if n.cluster != nil {
		n.cluster.stopLoops()
	}
}

// Close stops the sequencer (finishing its batch) and closes the ledger.
func (n *Node) Close() error {
	n.Stopping()
	n.soft.close()
	n.backups.close() // a backup in progress ends before the log closes
	n.Engine.Close()
	if n.cluster != nil {
		n.cluster.release() // a standby takes over without waiting for the lease to expire
	}
	n.snap.close()
	if n.Transparency != nil {
		n.Transparency.Close()
	}
	if n.head != nil {
		n.head.close()
	}
	return n.Log.Close()
}

// Snapshot writes a snapshot of the committed projections now (unless the
// newest one already covers them) and returns its path.
func (n *Node) Snapshot() (string, error) { return n.snap.take(true) }
