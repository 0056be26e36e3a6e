package node

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"taskledger/api"
	"taskledger/commands"
	"taskledger/internal/durable"
	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/projections"
)

// A node on a cluster: the log is a JetStream stream shared by every
// node; exactly one node (the holder of the sequencer lease) runs its
// engine's commands and appends, every other node follows the stream into
// its own projections, serves reads and forwards commands (forward.go).
// The role changes in lease.go; following is follow.go.

// A load reads the stream's soft bucket once, not once a prefix.
var _ projections.WholeSoftReader = (*jetstream.Log)(nil)

// Cluster defaults.
const (
	DefaultLeaseTTL = 5 * time.Second
	// DefaultReadWait bounds how long a follower's read waits for its
	// projections to reach the stream's head before answering 503.
	DefaultReadWait = 2 * time.Second
)

// ErrManualCluster is serve's refusal of the manual test clock on a
// cluster: only the sequencer's test clock moves (a follower's reads see
// its own, never below the head), which tests can live with and operators
// should not. OpenCluster itself accepts it for the linearizability test.
var ErrManualCluster = errors.New("--clock=manual is refused with --ledger nats:// (the test clock is single-node)")

// ErrNotSequencer is the append of a node that does not hold the lease (its
// commands are answered 503).
var ErrNotSequencer = errors.New("this node is not the sequencer")

// ClusterConfig is what a node on a cluster needs besides Config.
type ClusterConfig struct {
	// Log is the shared stream (the caller opened it; Close closes it).
	Log *jetstream.Log
	// Advertise is this node's URL as the other nodes reach it
	// (https://host:port): followers forward commands there.
	Advertise string
	// LeaseTTL is how long a lease lives after its last renewal
	// (default DefaultLeaseTTL); it is renewed every quarter of it, and
	// the holder stops appending three quarters after its last renewal
	// began. Every node of a cluster must use the same.
	LeaseTTL time.Duration
	// Poll is how often a follower reads the stream when no wake-up came
	// (default a tenth of LeaseTTL).
	Poll time.Duration
	// ReadWait bounds a follower's read barrier (default DefaultReadWait).
	ReadWait time.Duration
	// Transport forwards commands to the sequencer (nil: a clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
}

// role is what a cluster node does now.
type role int32

const (
	following  role = iota // tails the stream, forwards commands
	promoting              // holds the lease, catching up before it appends
	sequencing             // holds the lease, its engine appends
)

// leaseValue is the lease key's content: who holds it and where it
// answers.
type leaseValue struct {
	ID  string `json:"id"`  // random per process: a restarted node is another holder
	URL string `json:"url"` // advertised URL
}

// clusterLink is a node's part in the cluster: the lease, the role, the
// follower's tail and the forwarding.
type clusterLink struct {
	log      *jetstream.Log
	lease    *jetstream.Lease
	blobs    *jetstream.Blobs
	fence    *fencedLog
	applied  *api.Notifier // after every commit or followed batch
	self     leaseValue
	selfJSON []byte
	clock    commands.Clock
	logger   zerolog.Logger
	cc       ClusterConfig
	eng      *commands.Engine
	fwd      *forwarder

	mu       sync.Mutex
	role     role
	rev      uint64    // the lease revision held (promoting, sequencing)
	term     uint64    // promotions so far (a soft-only batch checks it did not change)
	deadline time.Time // sequencing: no append after it (the local clock)
	leader   leaseValue
	// Readiness (readiness.go): when the lease was last read or written,
	// and the revision of the holder's lease this follower saw last, with
	// when it saw it change.
	contact   time.Time
	leaderRev uint64
	revSeen   time.Time
	catchMu   sync.Mutex // one catch-up at a time (the tail, a promotion)

	// Test hooks: a paused node's lease loop does nothing; a forced node
	// believes it sequences whatever its deadline says.
	paused atomic.Bool
	forced atomic.Bool
	tickMu sync.Mutex // held by a lease tick: PauseLease waits for one in flight

	kick   chan struct{} // wakes the tail
	gcKick chan struct{} // asks the sequencer's blob collection for a round (clusterblobgc.go)
	gcMu   sync.Mutex    // one round at a time
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// OpenCluster starts a node on a shared JetStream log: its own snapshots
// and the initial admin token file (on the node that initializes an empty
// stream) in cfg.DataDir, blobs in the cluster's object store (with a
// node-local copy in DATA/blobs). The node starts as a follower; it
// sequences once it holds the lease.
func OpenCluster(cfg Config, cc ClusterConfig) (*Node, error) {
	if cc.Log == nil || cc.Advertise == "" {
		return nil, errors.New("a cluster node needs its log and its advertised URL")
	}
	if cc.LeaseTTL <= 0 {
		cc.LeaseTTL = DefaultLeaseTTL
	}
	if cc.Poll <= 0 {
		cc.Poll = cc.LeaseTTL / 10
	}
	if cc.ReadWait <= 0 {
		cc.ReadWait = DefaultReadWait
	}
	if cfg.Stderr == nil {
		cfg.Stderr = func(string, ...any) {}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	lease, err := cc.Log.Lease(cc.LeaseTTL)
	if err != nil {
		return nil, err
	}
	blobs, err := cc.Log.Blobs()
	if err != nil {
		return nil, err
	}
	c, err := newClusterLink(cfg, cc, lease, blobs)
	if err != nil {
		return nil, err
	}
	n, err := open(cfg, source{log: cc.Log, cluster: c})
	if err != nil {
		return nil, err
	}
	c.eng = n.Engine
	n.cluster = c
	c.start()
	if !cfg.Offline {
		every, grace := cfg.BlobCollectEvery, cfg.BlobGrace
		if every <= 0 {
			every = DefaultBlobCollectEvery
		}
		if grace <= 0 {
			grace = DefaultBlobGrace
		}
		c.wg.Add(1)
		go c.blobGCLoop(n.Blobs, every, grace, cfg.BlobsCollected)
	}
	return n, nil
}

func newClusterLink(cfg Config, cc ClusterConfig, lease *jetstream.Lease, blobs *jetstream.Blobs) (*clusterLink, error) {
	id := make([]byte, 12)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	self := leaseValue{ID: hex.EncodeToString(id), URL: cc.Advertise}
	raw, _ := json.Marshal(self)
	clock := cfg.Clock
	if clock == nil {
		clock = commands.WallClock{}
	}
	logger := cfg.Logger.With().Str("node", cc.Advertise).Logger()
	fwd, err := newForwarder(cc.Transport, self.URL, logger)
	if err != nil {
		return nil, err
	}
	c := &clusterLink{log: cc.Log, lease: lease, blobs: blobs, applied: api.NewNotifier(), self: self, selfJSON: raw,
		clock: clock, logger: logger, cc: cc, fwd: fwd,
		kick: make(chan struct{}, 1), gcKick: make(chan struct{}, 1), stop: make(chan struct{})}
	c.fence = &fencedLog{c: c}
	return c, nil
}

func (c *clusterLink) start() {
	c.wg.Add(2)
	go c.leaseLoop()
	go c.tailLoop()
}

// sequencing reports whether this node may append now: it holds the
// lease and its local deadline has not passed.
func (c *clusterLink) sequencing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.role == sequencing && (c.forced.Load() || c.clock.Now().Before(c.deadline))
}

// Role is the node's role now: "sequencer", "promoting", "follower", or ""
// for a node that is not on a cluster.
func (n *Node) Role() string {
	if n.cluster == nil {
		return ""
	}
	return clusterRole(n.cluster)
}

// clusterRole is the role of taskledger_cluster_role: c's, or
// "standalone" without a cluster.
func clusterRole(c *clusterLink) string {
	if c == nil {
		return api.RoleStandalone
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return [...]string{api.RoleFollower, api.RolePromoting, api.RoleSequencer}[c.role]
}

// Sequencer is the advertised URL of the sequencer this node knows ("" when
// none is known, or not on a cluster).
func (n *Node) Sequencer() string {
	if n.cluster == nil {
		return ""
	}
	n.cluster.mu.Lock()
	defer n.cluster.mu.Unlock()
	if n.cluster.role != following {
		return n.cluster.self.URL
	}
	return n.cluster.leader.URL
}

// stopLoops ends the lease loop and the tail (before the engine closes).
func (c *clusterLink) stopLoops() {
	c.once.Do(func() { close(c.stop) })
	c.wg.Wait()
}

// release gives the lease up (a graceful stop: a standby takes over
// without waiting for it to expire).
func (c *clusterLink) release() {
	c.mu.Lock()
	held, rev := c.role != following, c.rev
	c.role = following
	c.mu.Unlock()
	if held {
		if err := c.lease.Release(rev); err != nil && !errors.Is(err, jetstream.ErrLeaseLost) {
			c.logger.Warn().Err(err).Msg("could not release the sequencer lease; it expires on its own")
		}
	}
}

// initialToken creates the initial admin token when the stream is empty
// and no node created it yet: the create is compare-and-set, so exactly
// one node writes initial-admin-token (0600) into its data directory. It
// returns the initial token's hash as stored (read by key through the
// bucket's leader: a listing may lag a create just made), nil for none.
func (c *clusterLink) initialToken(cfg Config, head ledger.Head) ([]byte, error) {
	if head.Seq == 0 && !cfg.Offline {
		tok, err := api.NewAdminToken()
		if err != nil {
			return nil, err
		}
		h := sha256.Sum256([]byte(tok))
		// The file is written durably before the hash is created, so an
		// active hash always has its whole file (D271); a node that loses
		// the race removes the file it wrote, unless it holds the token
		// already active (this node won an earlier start).
		path := filepath.Join(cfg.DataDir, InitialTokenFile)
		prev, _ := os.ReadFile(path)
		if err := durable.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", InitialTokenFile, err)
		}
		created, err := c.log.CreateAdminToken("initial", h[:])
		if err != nil || !created {
			restoreTokenFile(path, prev)
		}
		if err != nil {
			return nil, err
		}
		if created {
			cfg.Stderr("initialized an empty stream; the initial admin token is in %s (mode 0600)\n", path)
			return h[:], nil
		}
	}
	return c.log.AdminToken("initial")
}

// restoreTokenFile puts back what the initial token file held before this
// start wrote a token that did not become active (removed when nothing).
func restoreTokenFile(path string, prev []byte) {
	if len(prev) == 0 {
		_ = os.Remove(path)
		return
	}
	_ = durable.WriteFile(path, prev, 0o600)
}

// fencedLog is the cluster engine's log: only the lease holder appends,
// and a refused append (another writer moved the head) makes it step down.
type fencedLog struct{ c *clusterLink }

// Append appends b when this node sequences. A batch of events is fenced
// by the stream (the expected last sequence); a batch of soft records
// only is not, so its expected head is checked against the stream's head
// first: a soft record is written, and its command answered, only when
// the state it was decided on was the stream's newest at a moment after
// the decision (docs/decisions.md, D203).
func (f *fencedLog) Append(b *ledger.Batch) error {
	c := f.c
	if !c.sequencing() {
		return ErrNotSequencer
	}
	c.mu.Lock()
	term := c.term
	c.mu.Unlock()
	if len(b.Events) == 0 {
		h, err := c.log.Head()
		if err != nil {
			c.stepDown("the stream's head could not be read")
			return err
		}
		if h.Seq != b.Expected.Seq || !sameHash(h.Hash, b.Expected.Hash) {
			c.stepDown("the stream's head moved past this node")
			return fmt.Errorf("%w: the stream is at seq %d, this node at %d", ledger.ErrHeadMoved, h.Seq, b.Expected.Seq)
		}
	}
	err := c.log.Append(b)
	switch {
	case errors.Is(err, ledger.ErrHeadMoved):
		c.stepDown("another writer appended first")
	case err != nil:
		// Not sure where the stream's head is: follow, and take the lease
		// back (catching up first) if it is still ours.
		c.stepDown("an append failed")
	}
	if err == nil && len(b.Events) == 0 {
		err = c.stillHolds(term)
	}
	return err
}

// Start starts appending b when this node sequences, without waiting for
// the stream's acknowledgement (commands.PipelinedLog): the engine
// publishes the next batch while this one's acknowledgement is in flight.
// The wait steps down as Append does. A batch of soft records only is
// checked against the stream's head in its wait, after the batches
// started before it (the stream's log does it), and then confirmed
// against the lease as Append does.
func (f *fencedLog) Start(b *ledger.Batch) func() error {
	c := f.c
	if !c.sequencing() {
		return func() error { return ErrNotSequencer }
	}
	c.mu.Lock()
	term := c.term
	c.mu.Unlock()
	wait := c.log.Start(b)
	return func() error {
		err := wait()
		switch {
		case errors.Is(err, ledger.ErrHeadMoved):
			c.stepDown("another writer appended first")
		case err != nil:
			c.stepDown("an append failed")
		}
		if err == nil && len(b.Events) == 0 {
			err = c.stillHolds(term)
		}
		return err
	}
}

// stillHolds confirms, after a soft-only batch was written, that the lease
// is still this node's, held since the promotion of term. A node that
// takes the lease loads the soft records after it took it, so it knows
// every soft record written before this check saw the lease ours; a
// record written later (a holder paused past its lease, while the new
// sequencer appended nothing yet: the head check passed) is not
// acknowledged (D255).
func (c *clusterLink) stillHolds(term uint64) error {
	raw, _, err := c.lease.Current()
	if err != nil && !errors.Is(err, jetstream.ErrNoLease) {
		c.stepDown("the sequencer lease could not be read")
		return err
	}
	var v leaseValue
	if err == nil && json.Unmarshal(raw, &v) != nil {
		v = leaseValue{}
	}
	c.mu.Lock()
	ours := v.ID == c.self.ID && c.term == term && c.role == sequencing
	c.mu.Unlock()
	if !ours {
		c.stepDown("the sequencer lease is another's")
		return fmt.Errorf("%w: the lease was lost before the soft records were acknowledged", jetstream.ErrLeaseLost)
	}
	return nil
}

// retrying makes the engine's reload (after a failed commit or follow)
// wait out an outage of the NATS cluster: a reload that cannot read the
// stream is tried again every quarter second until it succeeds or the node
// closes. (On bbolt a failed reload stops the engine: the file is gone.)
func (c *clusterLink) retrying(load commands.Loader) commands.Loader {
	return func() (*projections.State, error) {
		for {
			s, err := load()
			if err == nil {
				return s, nil
			}
			c.logger.Warn().Err(err).Msg("reloading the projections from the stream failed; retrying")
			select {
			case <-c.stop:
				return nil, err
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
}

func sameHash(a, b []byte) bool { return string(a) == string(b) }
