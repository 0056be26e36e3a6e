package jetstream

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// A resource is one of the JetStream streams the ledger lives in: the
// events stream, a key-value bucket (a stream KV_NAME) or the object store
// (a stream OBJ_NAME). Open and the lease and blob openers bind an existing
// resource when its shape is the one asked for, create a missing one only
// when allowed (serve, migrate), and never update one: a resource of
// another shape is a *ConfigError naming both.

// Resource kinds as Resources reports them.
const (
	KindStream      = "stream"
	KindBucket      = "bucket"
	KindObjectStore = "object store"
)

// shape is the part of a resource's configuration the ledger asks for and
// checks: replicas and storage for every kind, plus the history and the
// life of a value for a bucket. Zero Replicas in a request means any.
type shape struct {
	kind     string
	replicas int
	storage  natsjs.StorageType
	history  int64         // buckets: values kept per key
	ttl      time.Duration // buckets: a value's life (0: forever)
}

func (s shape) String() string {
	r := "any replicas"
	if s.replicas > 0 {
		r = fmt.Sprintf("replicas %d", s.replicas)
	}
	out := fmt.Sprintf("%s, %s storage", r, strings.ToLower(s.storage.String()))
	if s.kind == KindBucket {
		out += fmt.Sprintf(", history %d", s.history)
		if s.ttl > 0 {
			out += fmt.Sprintf(", ttl %v", s.ttl)
		}
	}
	return out
}

// shapeOf is the shape of an existing resource's stream configuration.
func shapeOf(kind string, c natsjs.StreamConfig) shape {
	s := shape{kind: kind, replicas: c.Replicas, storage: c.Storage}
	if kind == KindBucket {
		s.history, s.ttl = c.MaxMsgsPerSubject, c.MaxAge
	}
	if s.replicas == 0 {
		s.replicas = 1
	}
	return s
}

// fits reports whether an existing resource of shape have serves a request
// for want.
func (want shape) fits(have shape) bool {
	return (want.replicas == 0 || want.replicas == have.replicas) && want.storage == have.storage &&
		want.history == have.history && want.ttl == have.ttl
}

// ConfigError is Open's (or Lease's, Blobs') refusal of a resource that
// exists with another configuration than the one asked for: nothing was
// changed. It wraps ErrConfigConflict.
type ConfigError struct {
	Kind, Name string // "bucket", "TASKLEDGER_SOFT"
	Have, Want string // the two configurations, as "replicas 1, file storage, history 1"
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("jetstream: %s %s exists with %s; this node asks for %s "+
		"(nothing was changed: start with the existing configuration, or change the resource yourself with the nats CLI)",
		e.Kind, e.Name, e.Have, e.Want)
}

// Unwrap makes errors.Is(err, ErrConfigConflict) hold.
func (e *ConfigError) Unwrap() error { return ErrConfigConflict }

// resource is one resource to bind (or create).
type resource struct {
	kind, name string // KindBucket, "TASKLEDGER_SOFT"
	stream     string // the stream behind it: "KV_TASKLEDGER_SOFT"
	want       shape
	create     func(ctx context.Context) error
}

// ensure binds r: an existing stream of a fitting shape is returned; a
// missing one is created when create is set (a creation race lost to
// another node is a bind), else it is ErrMissing. It never updates.
func (l *Log) ensure(r resource) (natsjs.Stream, error) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := l.ctx()
		st, err := l.js.Stream(ctx, r.stream)
		cancel()
		if err == nil {
			have := shapeOf(r.kind, st.CachedInfo().Config)
			if !r.want.fits(have) {
				return nil, &ConfigError{Kind: r.kind, Name: r.name, Have: have.String(), Want: r.want.String()}
			}
			return st, nil
		}
		if !errors.Is(err, natsjs.ErrStreamNotFound) {
			return nil, fmt.Errorf("jetstream: %s %s: %w", r.kind, r.name, err)
		}
		if l.cfg.ReadOnly {
			return nil, fmt.Errorf("%w: %s %s (serve or migrate creates it; this command only reads)", ErrMissing, r.kind, r.name)
		}
		if attempt > 0 {
			return nil, fmt.Errorf("jetstream: %s %s: created, then not found", r.kind, r.name)
		}
		ctx, cancel = l.ctx()
		err = r.create(ctx)
		cancel()
		if err != nil && !errors.Is(err, natsjs.ErrStreamNameAlreadyInUse) && !errors.Is(err, natsjs.ErrBucketExists) {
			return nil, fmt.Errorf("jetstream: create %s %s: %w", r.kind, r.name, err)
		}
		// Created here or by another node at the same moment: bind it.
	}
}

// bucket binds (or creates) the key-value bucket NAME_suffix. A bucket is
// created with reads through its stream's leader only (no direct gets: a
// replica may answer a direct get before it applied the newest put), and
// bound as it is.
func (l *Log) bucket(suffix string, ttl time.Duration) (natsjs.KeyValue, error) {
	name := l.cfg.Name + "_" + suffix
	want := shape{kind: KindBucket, replicas: l.cfg.Replicas, storage: natsjs.FileStorage, history: 1, ttl: ttl}
	dup := 2 * time.Minute
	if ttl > 0 && ttl < dup {
		dup = ttl
	}
	_, err := l.ensure(resource{kind: KindBucket, name: name, stream: "KV_" + name, want: want,
		create: func(ctx context.Context) error {
			_, err := l.js.CreateStream(ctx, natsjs.StreamConfig{
				Name: "KV_" + name, Subjects: []string{"$KV." + name + ".>"},
				MaxMsgsPerSubject: 1, MaxBytes: -1, MaxAge: ttl, MaxMsgSize: -1, MaxMsgs: -1, MaxConsumers: -1,
				Storage: natsjs.FileStorage, Replicas: l.cfg.Replicas, AllowRollup: true, DenyDelete: true,
				Duplicates: dup, AllowDirect: false, Discard: natsjs.DiscardNew,
			})
			return err
		}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := l.ctx()
	defer cancel()
	kv, err := l.js.KeyValue(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("jetstream: bucket %s: %w", name, err)
	}
	// The bucket answers (its stream has a leader): a get of a key that is
	// not there is the cheapest proof.
	if _, err := kv.Get(ctx, "taskledger-probe"); err != nil && !errors.Is(err, natsjs.ErrKeyNotFound) {
		return nil, fmt.Errorf("jetstream: bucket %s: %w", name, err)
	}
	return kv, nil
}

// Resource is one resource the ledger lives in, as the servers report it.
type Resource struct {
	Kind     string // KindStream, KindBucket, KindObjectStore
	Name     string // TASKLEDGER_EVENTS, TASKLEDGER_SOFT, ...
	Exists   bool
	Replicas int    // configured replicas
	Current  int    // replicas current (the leader and the peers caught up)
	Leader   string // the server leading it ("" on a single server)
	Storage  string // "file" or "memory"
	Messages uint64
	Bytes    uint64
}

func (r Resource) String() string {
	if !r.Exists {
		return fmt.Sprintf("%-12s %-22s absent", r.Kind, r.Name)
	}
	leader := r.Leader
	if leader == "" {
		leader = "-"
	}
	return fmt.Sprintf("%-12s %-22s replicas %d (%d current, leader %s), %s storage, %d messages, %d bytes",
		r.Kind, r.Name, r.Replicas, r.Current, leader, r.Storage, r.Messages, r.Bytes)
}

// resourceNames is every resource of a ledger named name, in a fixed order.
func resourceNames(name string) []Resource {
	return []Resource{
		{Kind: KindStream, Name: name + "_EVENTS"},
		{Kind: KindBucket, Name: name + "_SOFT"},
		{Kind: KindBucket, Name: name + "_META"},
		{Kind: KindBucket, Name: name + "_LEASE"},
		{Kind: KindObjectStore, Name: name + "_BLOBS"},
	}
}

func streamOf(r Resource) string {
	switch r.Kind {
	case KindBucket:
		return "KV_" + r.Name
	case KindObjectStore:
		return "OBJ_" + r.Name
	}
	return r.Name
}

// describe reads every resource's actual configuration and state; it
// creates and changes nothing.
func describe(ctx context.Context, js natsjs.JetStream, name string) ([]Resource, error) {
	out := resourceNames(name)
	for i := range out {
		r := &out[i]
		st, err := js.Stream(ctx, streamOf(*r))
		if errors.Is(err, natsjs.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("jetstream: %s %s: %w", r.Kind, r.Name, err)
		}
		info := st.CachedInfo()
		r.Exists, r.Replicas, r.Storage = true, info.Config.Replicas, strings.ToLower(info.Config.Storage.String())
		if r.Replicas == 0 {
			r.Replicas = 1
		}
		r.Messages, r.Bytes, r.Current = info.State.Msgs, info.State.Bytes, 1
		if info.Cluster != nil {
			r.Leader = info.Cluster.Leader
			for _, p := range info.Cluster.Replicas {
				if p != nil && p.Current {
					r.Current++
				}
			}
		}
	}
	return out, nil
}

// Resources reports the actual configuration of the stream, the buckets
// and the object store (absent ones too). It changes nothing.
func (l *Log) Resources() ([]Resource, error) {
	ctx, cancel := l.ctx()
	defer cancel()
	return describe(ctx, l.js, l.cfg.Name)
}

// Describe connects as Open does and reports the resources of the ledger
// named cfg.Name, without binding, creating or changing any (the events
// stream need not exist). It also returns the cluster size it sees.
func Describe(cfg Config) ([]Resource, int, error) {
	cfg = cfg.withDefaults()
	nc, own, err := cfg.connect()
	if err != nil {
		return nil, 0, err
	}
	if own {
		defer nc.Close()
	}
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, 0, fmt.Errorf("jetstream: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	rs, err := describe(ctx, js, cfg.Name)
	return rs, ClusterSize(nc, cfg.URL), err
}

// ClusterSize is how many servers the connection's cluster has, as far as
// the client can tell: 1 when the connected server is in no cluster, else
// the distinct servers among the URLs given (urls, comma-separated) and
// those the servers announce to clients (their connect_urls, which a
// clustered server sends once its routes are up).
func ClusterSize(nc *nats.Conn, urls string) int {
	if nc.ConnectedClusterName() == "" {
		return 1
	}
	seen := map[string]bool{}
	all := append(strings.Split(urls, ","), nc.Servers()...)
	for _, u := range all {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		p, err := url.Parse(u)
		if err != nil || p.Host == "" {
			continue
		}
		seen[p.Host] = true
	}
	if len(seen) == 0 {
		return 1
	}
	return len(seen)
}

// DefaultReplicas is the replicas a ledger's resources are created with on
// a cluster of size servers when none are asked for: 3 on three or more
// servers, else 1.
func DefaultReplicas(size int) int {
	if size >= 3 {
		return 3
	}
	return 1
}
