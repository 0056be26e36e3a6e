package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/node"
	"taskledger/projections"
)

// The JetStream backend from the command line: `verify --ledger
// nats://...` checks a replicated log, `migrate` copies a bbolt ledger
// into an empty stream, `serve --ledger nats://... --advertise URL` runs a
// node on it (docs/operations.md, "Running on a cluster").

// natsFlags are the flags that name a JetStream log.
type natsFlags struct {
	ledger, name, creds string
	replicas            int
}

func (f *natsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.ledger, "ledger", "", "the JetStream log: nats://HOST:PORT[,HOST:PORT...]")
	fs.StringVar(&f.name, "nats-name", "TASKLEDGER", "prefix of the stream and bucket names")
	fs.StringVar(&f.creds, "nats-creds", "", "NATS credentials file (JWT and NKey seed)")
	fs.IntVar(&f.replicas, "nats-replicas", 1, "replicas of a stream created here (3 on a three-node cluster)")
}

var errLedgerURL = errors.New("--ledger must be nats://HOST:PORT[,HOST:PORT...]")

func (f *natsFlags) open() (*jetstream.Log, error) {
	if !strings.HasPrefix(f.ledger, "nats://") && !strings.HasPrefix(f.ledger, "tls://") {
		return nil, errLedgerURL
	}
	if f.replicas < 1 || f.replicas > 5 {
		return nil, errors.New("--nats-replicas must be between 1 and 5")
	}
	return jetstream.Open(jetstream.Config{URL: f.ledger, CredsFile: f.creds, Name: f.name, Replicas: f.replicas})
}

// ledgerRequested reports whether verify names a JetStream log.
func ledgerRequested(args []string) bool {
	for _, a := range args {
		if a == "--ledger" || strings.HasPrefix(a, "--ledger=") {
			return true
		}
	}
	return false
}

func cmdVerifyLedger(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("verify", stderr)
	var nf natsFlags
	nf.register(fs)
	retention := fs.Duration("idempotency-retention", 72*time.Hour, "idempotency retention the server uses")
	fs.String("data", "", "ignored with --ledger")
	if pos, err := parseInterspersed(fs, args); err != nil {
		return 2
	} else if len(pos) != 0 {
		fmt.Fprintf(stderr, "taskledger: verify takes no arguments (got %q)\n", pos)
		return 2
	}
	log, err := nf.open()
	if errors.Is(err, errLedgerURL) {
		fmt.Fprintf(stderr, "taskledger: %v\n", err)
		return 2
	}
	if err != nil {
		return fail(stderr, "%v", err)
	}
	defer log.Close()
	rep, err := node.VerifyBackend(log, projections.Config{IdempotencyRetentionMs: retention.Milliseconds()})
	if err != nil {
		fmt.Fprintf(stderr, "taskledger: verify FAILED: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "ok: %d events, head seq %d, hash %x (JetStream stream %s_EVENTS)\n", rep.Events, rep.Head.Seq, rep.Head.Hash, nf.name)
	return 0
}

func cmdMigrate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("migrate", stderr)
	data := fs.String("data", envDefault("data", "./data"), "data directory of the bbolt ledger to copy")
	var nf natsFlags
	nf.register(fs)
	retention := fs.Duration("idempotency-retention", 72*time.Hour, "idempotency retention the server uses")
	if pos, err := parseInterspersed(fs, args); err != nil {
		return 2
	} else if len(pos) != 0 {
		fmt.Fprintf(stderr, "taskledger: migrate takes no arguments (got %q)\nusage: taskledger migrate --data DIR --ledger nats://HOST:PORT [--nats-replicas N]\n", pos)
		return 2
	}
	if nf.ledger == "" {
		fmt.Fprintf(stderr, "taskledger: migrate needs --ledger nats://HOST:PORT (the empty stream to copy into)\n")
		return 2
	}
	store, err := ledger.Open(*data, ledger.Options{ReadOnly: true})
	if err != nil {
		if errors.Is(err, ledger.ErrInUse) {
			return fail(stderr, "the ledger in %s is in use by another process (stop the server first)", *data)
		}
		return fail(stderr, "%v", err)
	}
	defer store.Close()
	log, err := nf.open()
	if errors.Is(err, errLedgerURL) {
		fmt.Fprintf(stderr, "taskledger: %v\n", err)
		return 2
	}
	if err != nil {
		return fail(stderr, "%v", err)
	}
	defer log.Close()
	rep, err := node.Migrate(store, log, projections.Config{IdempotencyRetentionMs: retention.Milliseconds()})
	if err != nil {
		return fail(stderr, "%v", err)
	}
	fmt.Fprintf(stdout, "ok: migrated %d events, head seq %d, hash %x, into JetStream stream %s_EVENTS (verified)\n", rep.Events, rep.Head.Seq, rep.Head.Hash, nf.name)
	return 0
}

// clusterFlags are serve's flags for running on a cluster.
type clusterFlags struct {
	nats      natsFlags
	advertise string
	leaseTTL  time.Duration
}

func (f *clusterFlags) register(fs *flag.FlagSet) {
	f.nats.register(fs)
	fs.StringVar(&f.advertise, "advertise", "", "with --ledger: this node's URL as the other nodes reach it (https://host:port)")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", node.DefaultLeaseTTL, "with --ledger: the sequencer lease's life (1s–60s, the same on every node)")
}

// check refuses a cluster configuration serve cannot run (before it
// listens); nothing to check without --ledger.
func (f *clusterFlags) check(manual bool) error {
	if f.nats.ledger == "" {
		return nil
	}
	if manual {
		return node.ErrManualCluster
	}
	if !strings.HasPrefix(f.advertise, "http://") && !strings.HasPrefix(f.advertise, "https://") {
		return errors.New("--ledger needs --advertise http(s)://HOST:PORT (where the other nodes forward commands)")
	}
	if f.leaseTTL < time.Second || f.leaseTTL > time.Minute {
		return errors.New("--lease-ttl must be between 1s and 60s")
	}
	return nil
}

// open starts a node on the cluster (serve --ledger nats://...).
func (f *clusterFlags) open(cfg node.Config) (*node.Node, error) {
	if err := f.check(cfg.Manual); err != nil {
		return nil, err
	}
	log, err := f.nats.open()
	if err != nil {
		return nil, err
	}
	n, err := node.OpenCluster(cfg, node.ClusterConfig{Log: log, Advertise: f.advertise, LeaseTTL: f.leaseTTL})
	if err != nil {
		log.Close()
		return nil, err
	}
	return n, nil
}
