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
// into an empty stream. serve does not run on it yet (docs/operations.md,
// "Running on a cluster (in progress)").

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
