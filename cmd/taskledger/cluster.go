package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/node"
	"taskledger/projections"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

func (f *natsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.ledger, "ledger", "", "the JetStream log: nats://HOST:PORT[,HOST:PORT...]")
	fs.StringVar(&f.name, "nats-name", "TASKLEDGER", "prefix of the stream and bucket names")
	fs.StringVar(&f.creds, "nats-creds", "", "NATS credentials file (JWT and NKey seed)")
	fs.IntVar(&f.replicas, "nats-replicas", 0, "replicas of the stream, buckets and object store (default: 3 on a cluster of three or more servers, else 1); "+
		"an existing resource of other replicas is refused, never changed")
}

var errLedgerURL = errors.New("--ledger must be nats://HOST:PORT[,HOST:PORT...]")

// config is the jetstream.Config the flags name. readOnly binds existing
// resources only (every command but serve and migrate): nothing is
// created or changed, and --nats-replicas, when given, is only checked.
func (f *natsFlags) config(readOnly bool) (jetstream.Config, error) {
	if !strings.HasPrefix(f.ledger, "nats://") && !strings.HasPrefix(f.ledger, "tls://") {
		return jetstream.Config{}, errLedgerURL
	}
	if f.replicas < 0 || f.replicas > 5 {
		return jetstream.Config{}, errors.New("--nats-replicas must be between 1 and 5")
	}
	return jetstream.Config{URL: f.ledger, CredsFile: f.creds, Name: f.name, Replicas: f.replicas, ReadOnly: readOnly}, nil
}

// open binds the log for a command that only reads it.
// openOrFail is open for a command: on failure it says why on stderr and
// returns the exit code (2 for a malformed --ledger).
func (f *natsFlags) openOrFail(stderr io.Writer) (*jetstream.Log, int) {
	log, err := f.open()
	if errors.Is(err, errLedgerURL) {
		fmt.Fprintf(stderr, "taskledger: %v\n", err)
		return nil, 2
	}
	if err != nil {
		return nil, fail(stderr, "%v", err)
	}
	return log, 0
}

func (f *natsFlags) open() (*jetstream.Log, error) {
	cfg, err := f.config(true)
	if err != nil {
		return nil, err
	}
	return jetstream.Open(cfg)
}

func verifyLedger(f *verifyFlags, stdout, stderr io.Writer) int {
	nf, retention := &f.nats, &f.retention
	log, code := nf.openOrFail(stderr)
	if log == nil {
		return code
	}
	defer log.Close()
	rep, err := node.VerifyBackend(log, projections.Config{IdempotencyRetentionMs: retention.Milliseconds()})
	if err != nil {
		fmt.Fprintf(stderr, "taskledger: verify FAILED: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "ok: %d events, head seq %d, hash %x (JetStream stream %s_EVENTS)\n", rep.Events, rep.Head.Seq, rep.Head.Hash, nf.name)
	rs, err := log.Resources()
	if err != nil {
		return fail(stderr, "%v", err)
	}
	printResources(stdout, rs, log.ClusterSize())
	return 0
}

func newMigrateCmd(stdout, stderr io.Writer) *cobra.Command {
	var nf natsFlags
	var data *string
	var retention *time.Duration
	c := command("migrate", func(pos []string) int {
		if len(pos) != 0 {
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
		lcfg, err := nf.config(false) // migrate creates the stream, buckets and object store
		var log *jetstream.Log
		if err == nil {
			log, err = jetstream.Open(lcfg)
		}
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
	})
	fs := c.Flags()
	data = envString(fs, "data", "./data", "data directory of the bbolt ledger to copy")
	nf.register(fs)
	retention = fs.Duration("idempotency-retention", 72*time.Hour, "idempotency retention the server uses")
	return c
}

// clusterFlags are serve's flags for running on a cluster.
type clusterFlags struct {
	nats         natsFlags
	advertise    string
	leaseTTL     time.Duration
	startTimeout string
}

func (f *clusterFlags) register(fs *pflag.FlagSet) {
	f.nats.register(fs)
	fs.StringVar(&f.advertise, "advertise", "", "with --ledger: this node's URL as the other nodes reach it (https://host:port)")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", node.DefaultLeaseTTL, "with --ledger: the sequencer lease's life (1s–60s, the same on every node)")
	envStringVar(fs, &f.startTimeout, "start-timeout", "60s",
		"with --ledger: how long a start waits for the NATS servers and the ledger's resources (1s–1h; /readyz answers 503 meanwhile)")
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
	if _, err := duration("start-timeout", f.startTimeout, time.Second, time.Hour); err != nil {
		return err
	}
	return nil
}

// open starts a node on the cluster (serve --ledger nats://...): it waits
// up to --start-timeout for the servers, binds the stream, buckets and
// object store or creates the missing ones, and warns at every start when
// they are not replicated on a cluster of several servers.
func (f *clusterFlags) open(cfg node.Config) (*node.Node, error) {
	if err := f.check(cfg.Manual); err != nil {
		return nil, err
	}
	lcfg, err := f.nats.config(false)
	if err != nil {
		return nil, err
	}
	lcfg.StartTimeout, _ = duration("start-timeout", f.startTimeout, time.Second, time.Hour)
	lcfg.Logf = func(format string, args ...any) { cfg.Logger.Warn().Msgf(format, args...) }
	log, err := jetstream.Open(lcfg)
	if err != nil {
		return nil, err
	}
	replicasWarning(log, cfg.Logger)
	n, err := node.OpenCluster(cfg, node.ClusterConfig{Log: log, Advertise: f.advertise, LeaseTTL: f.leaseTTL})
	if err != nil {
		log.Close()
		return nil, err
	}
	return n, nil
}

// replicasWarning logs, at every start, a ledger kept on one server of a
// cluster of several.
func replicasWarning(log *jetstream.Log, logger zerolog.Logger) {
	ev := logger.Info()
	if log.Replicas() == 1 && log.ClusterSize() > 1 {
		ev = logger.Warn().Str("risk", "one server holds the whole ledger: losing it loses the ledger or stops every write")
	}
	ev.Int("replicas", log.Replicas()).Int("cluster_servers", log.ClusterSize()).Bool("replicas_default", log.ReplicasDefaulted()).
		Msg("ledger resources bound")
}

// printResources writes each resource's actual replicas and storage, and
// a warning line for each that is not replicated on a cluster.
func printResources(w io.Writer, rs []jetstream.Resource, size int) {
	fmt.Fprintf(w, "cluster: %d server(s) seen; resources:\n", size)
	for _, r := range rs {
		fmt.Fprintf(w, "  %s\n", r)
	}
	for _, r := range rs {
		if r.Exists && r.Replicas == 1 && size > 1 {
			fmt.Fprintf(w, "warning: %s %s has 1 replica on a cluster of %d servers: losing its server stops the ledger\n", r.Kind, r.Name, size)
		}
	}
}

// cmdStatus is `status --ledger nats://...`: the actual replicas, storage
// and size of the stream, each bucket and the object store. It reads only:
// nothing is created or changed, and missing resources are reported.
func newStatusCmd(stdout, stderr io.Writer) *cobra.Command {
	var nf natsFlags
	c := command("status", func(pos []string) int {
		if len(pos) != 0 || nf.ledger == "" {
			fmt.Fprintf(stderr, "usage: taskledger status --ledger nats://HOST:PORT[,HOST:PORT...] [--nats-name N] [--nats-creds FILE]\n")
			return 2
		}
		cfg, err := nf.config(true)
		if err != nil {
			fmt.Fprintf(stderr, "taskledger: %v\n", err)
			return 2
		}
		rs, size, err := jetstream.Describe(cfg)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		printResources(stdout, rs, size)
		return 0
	})
	nf.register(c.Flags())
	return c
}
