package jetstream

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"taskledger/ledger"
)

// Config configures Open.
type Config struct {
	// Conn is the connection to use (the caller closes it). When nil, Open
	// connects to URL and Close closes that connection.
	Conn *nats.Conn
	// URL is a comma-separated list of server URLs (nats://h1:4222,...).
	URL string
	// CredsFile is a NATS credentials file (JWT and NKey seed) used with URL.
	CredsFile string
	// Options are extra connection options (TLS, ...) used with URL.
	Options []nats.Option
	// Name prefixes the stream and bucket names (default "TASKLEDGER"):
	// stream NAME_EVENTS on subject name.events (lower case), key-value
	// buckets NAME_SOFT and NAME_META.
	Name string
	// Replicas of the stream, buckets and object store. Creating, 0 means
	// DefaultReplicas of the cluster's size (3 on three or more servers);
	// an existing resource must have exactly the replicas asked for. Read
	// only, 0 means any.
	Replicas int
	// ReadOnly binds existing resources only: a missing one is ErrMissing,
	// and nothing is ever created or updated (verify, export, status).
	// Otherwise missing resources are created (serve, migrate).
	ReadOnly bool
	// Timeout bounds each request to the server (default 5s).
	Timeout time.Duration
	// StartTimeout, when set, makes Open (and Lease and Blobs after it)
	// wait for the servers: a transient failure (no server up yet, no
	// responders, no leader, a deadline) is retried with backoff until
	// StartTimeout after Open began. Zero: one attempt.
	StartTimeout time.Duration
	// Logf, when set, is told what a start is waiting for before each retry.
	Logf func(format string, args ...any)
}

func (cfg Config) withDefaults() Config {
	if cfg.Name == "" {
		cfg.Name = "TASKLEDGER"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	return cfg
}

// connect returns cfg.Conn, or a new connection to cfg.URL (own true).
func (cfg Config) connect() (*nats.Conn, bool, error) {
	if cfg.Conn != nil {
		return cfg.Conn, false, nil
	}
	opts := append([]nats.Option{nats.Name("taskledger")}, cfg.Options...)
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, false, fmt.Errorf("jetstream: connect: %w", err)
	}
	return nc, true, nil
}

// Log is a ledger.Backend on a JetStream stream. Several Logs (processes)
// may open the same stream; the stream's expected-last-sequence check makes
// sure that of writers appending at the same head exactly one wins.
type Log struct {
	cfg        Config
	nc         *nats.Conn
	ownConn    bool
	shut       atomic.Bool // Close was called (set under mu; read without it where a read must not wait)
	js         natsjs.JetStream
	stream     natsjs.Stream
	soft       natsjs.KeyValue
	meta       natsjs.KeyValue
	subject    string
	streamName string
	size       int          // servers in the cluster, as the client sees them
	defaulted  bool         // Replicas was chosen from size, not asked for
	startBy    time.Time    // StartTimeout after Open began (zero: no retries)
	startReq   atomic.Int64 // while a start retries: the bound of each request (ns)

	appendMu sync.Mutex // one Append at a time in this process

	pmu     sync.Mutex       // guards the appends started and not yet awaited
	pending []*pendingAppend // started, oldest first
	tail    ledger.Head      // after the newest pending batch of events
	tailJS  uint64           // the JetStream sequence that batch will get
	tailID  string           // and its Nats-Msg-Id ("" when nothing is pending)
	broken  error            // a pending append failed: every later one fails

	mu      sync.Mutex // guards what follows: the log as read so far
	lastJS  uint64     // JetStream sequence of the newest batch message read
	head    ledger.Head
	batches []batchRef // every batch message, in order
	streams map[string][]uint64
}

// batchRef is where one batch's events live: the message's JetStream
// sequence and the ledger seqs of its first and last event.
type batchRef struct {
	js, first, last uint64
}

var _ ledger.Backend = (*Log)(nil)

// Open connects (unless cfg.Conn is given), binds the stream and buckets
// (creating missing ones unless cfg.ReadOnly; never changing existing
// ones), and reads the stream's batch index. With cfg.StartTimeout it
// waits for servers that are not up or not ready yet.
func Open(cfg Config) (*Log, error) {
	cfg = cfg.withDefaults()
	l := &Log{cfg: cfg, head: ledger.GenesisHead(), streams: map[string][]uint64{},
		subject: strings.ToLower(cfg.Name) + ".events"}
	if cfg.StartTimeout > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.StartTimeout)
		l.startBy, _ = ctx.Deadline()
		cancel()
	}
	err := l.retry("the NATS servers and the ledger's stream and buckets", func() error {
		if l.nc == nil {
			nc, own, err := cfg.connect()
			if err != nil {
				return err
			}
			l.nc, l.ownConn = nc, own
		}
		if err := l.setup(); err != nil {
			return err
		}
		return l.sync()
	})
	if err != nil {
		if l.nc != nil {
			l.closeConn()
		}
		return nil, err
	}
	return l, nil
}

func (l *Log) ctx() (context.Context, context.CancelFunc) {
	d := l.cfg.Timeout
	if s := time.Duration(l.startReq.Load()); s > 0 && s < d {
		d = s
	}
	return context.WithTimeout(context.Background(), d)
}

// Replicas is the replicas the resources were bound or created with (0
// read only without a request: whatever they have).
func (l *Log) Replicas() int { return l.cfg.Replicas }

// ClusterSize is how many servers the cluster has, as the client sees
// them (see ClusterSize).
func (l *Log) ClusterSize() int { return l.size }

// ReplicasDefaulted reports whether Replicas was chosen from the cluster's
// size rather than asked for.
func (l *Log) ReplicasDefaulted() bool { return l.defaulted }

func (l *Log) setup() error {
	js, err := natsjs.New(l.nc, natsjs.WithPublishAsyncTimeout(l.cfg.Timeout))
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	l.js = js
	ctx, cancel := l.ctx()
	_, err = js.AccountInfo(ctx) // JetStream answers (a meta leader on a cluster)
	cancel()
	if err != nil {
		return fmt.Errorf("jetstream: account info: %w", err)
	}
	l.size = ClusterSize(l.nc, l.cfg.URL)
	if l.cfg.Replicas == 0 && !l.cfg.ReadOnly {
		l.cfg.Replicas, l.defaulted = DefaultReplicas(l.size), true
	}
	want := natsjs.StreamConfig{
		Name:        l.cfg.Name + "_EVENTS",
		Description: "taskledger events: one message per committed batch",
		Subjects:    []string{l.subject},
		Retention:   natsjs.LimitsPolicy,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		MaxAge:      0,
		Discard:     natsjs.DiscardNew, // never drop old events to make room
		Storage:     natsjs.FileStorage,
		Replicas:    l.cfg.Replicas,
		DenyDelete:  true,
		DenyPurge:   true,
		AllowDirect: true,
	}
	s, err := l.ensure(resource{kind: KindStream, name: want.Name, stream: want.Name,
		want: shape{kind: KindStream, replicas: l.cfg.Replicas, storage: natsjs.FileStorage},
		create: func(ctx context.Context) error {
			_, err := js.CreateStream(ctx, want)
			return err
		}})
	if err != nil {
		return err
	}
	c := s.CachedInfo().Config
	if !c.DenyDelete || !c.DenyPurge || c.MaxAge != 0 || c.MaxMsgs > 0 || c.MaxBytes > 0 ||
		len(c.Subjects) != 1 || c.Subjects[0] != l.subject {
		return fmt.Errorf("%w: %s must deny delete and purge, keep every message and take only %s",
			ErrStreamConfig, want.Name, l.subject)
	}
	l.stream, l.streamName = s, want.Name
	if l.soft, err = l.bucket("SOFT", 0); err != nil {
		return err
	}
	if l.meta, err = l.bucket("META", 0); err != nil {
		return err
	}
	return nil
}

func (l *Log) closeConn() {
	if l.ownConn {
		l.nc.Close()
	}
}

// Close releases the connection (when Open made it).
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut.Load() {
		return ledger.ErrClosed
	}
	l.shut.Store(true)
	l.closeConn()
	return nil
}

// sync reads the batch messages other writers appended since the last
// one read, checking that each continues the one before it.
func (l *Log) sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut.Load() {
		return ledger.ErrClosed
	}
	var info *natsjs.StreamInfo
	err := l.again(func(ctx context.Context) error {
		var err error
		info, err = l.stream.Info(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("jetstream: stream info: %w", err)
	}
	ctx, cancel := l.ctx()
	defer cancel()
	return l.read(ctx, l.lastJS+1, info.State.LastSeq, l.index)
}

// index adds one batch message to the in-memory index (l.mu held).
func (l *Log) index(js uint64, body []byte) error {
	head := l.head
	type entry struct {
		stream string
		seq    uint64
	}
	var entries []entry
	err := eachEnvelope(body, func(raw []byte) error {
		e, err := ledger.DecodeEvent(raw)
		if err != nil {
			return err
		}
		if e.Seq != head.Seq+1 || !bytes.Equal(e.PrevHash, head.Hash) {
			return fmt.Errorf("%w: message %d holds seq %d after seq %d", ErrMessage, js, e.Seq, head.Seq)
		}
		entries = append(entries, entry{e.Stream, e.Seq})
		head = ledger.Head{Seq: e.Seq, Hash: e.Hash, At: e.At}
		return nil
	})
	if err != nil {
		return fmt.Errorf("message %d: %w", js, err)
	}
	if len(entries) == 0 {
		return fmt.Errorf("%w: message %d holds no event", ErrMessage, js)
	}
	for _, x := range entries {
		l.streams[x.stream] = append(l.streams[x.stream], x.seq)
	}
	l.batches = append(l.batches, batchRef{js: js, first: l.head.Seq + 1, last: head.Seq})
	l.head, l.lastJS = head, js
	return nil
}

// Head returns the stream's head (after reading what others appended).
func (l *Log) Head() (ledger.Head, error) {
	if err := l.sync(); err != nil {
		return ledger.Head{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head, nil
}

func sameHead(a, b ledger.Head) bool { return a.Seq == b.Seq && bytes.Equal(a.Hash, b.Hash) }

// Append publishes the batch's events as one message and waits for the
// stream to store it, expecting the stream's last sequence to be the
// message of b.Expected: a writer whose head is stale is refused with
// ledger.ErrHeadMoved and writes nothing. Soft records and meta changes
// are written to their buckets after the message is stored (they are
// outside the chain; see doc.go). Append is Start and its wait; it must
// not be called while an append Start began is still pending.
func (l *Log) Append(b *ledger.Batch) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.start(b, false)()
}

// index adds the batch message this Log just published and the stream
// stored as message js (l.mu held): its events were checked to continue
// l.head when it was started, so nothing is decoded again.
func (l *Log) indexOwn(js uint64, evs []*ledger.Event) {
	for _, e := range evs {
		l.streams[e.Stream] = append(l.streams[e.Stream], e.Seq)
	}
	last := evs[len(evs)-1]
	l.batches = append(l.batches, batchRef{js: js, first: evs[0].Seq, last: last.Seq})
	l.head, l.lastJS = ledger.Head{Seq: last.Seq, Hash: last.Hash, At: last.At}, js
}

// locate returns the index in batches of the batch holding seq (len when
// none does).
func locate(batches []batchRef, seq uint64) int {
	return sort.Search(len(batches), func(i int) bool { return batches[i].last >= seq })
}
