// Command taskledger is the one binary: the server and the operator and
// auditor subcommands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func fail(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "taskledger: "+format+"\n", args...)
	return 1
}

func newServeCmd(stderr io.Writer) *cobra.Command {
	var f serveFlags
	c := command("serve", func(pos []string) int {
		if len(pos) != 0 {
			fmt.Fprintf(stderr, "taskledger: serve takes no arguments (got %q)\nusage: taskledger serve [--listen ADDR] [--clock=manual] [--data DIR] [flags]\n", pos)
			return 2
		}
		cfg, every, err := f.config()
		if err != nil {
			return fail(stderr, "%v", err)
		}
		if f.clock != "wall" && f.clock != "manual" {
			return fail(stderr, "--clock must be wall or manual")
		}
		manual := f.clock == "manual"
		if manual && !loopback(f.listen) {
			return fail(stderr, "--clock=manual is refused unless --listen is a loopback address")
		}
		if err := f.cluster.check(manual); err != nil {
			return fail(stderr, "%v", err)
		}
		nc, err := f.net.config(f.listen)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		sched, err := f.backup.config(f.data, f.cluster.nats.ledger != "")
		if err != nil {
			return fail(stderr, "%v", err)
		}
		level, err := zerolog.ParseLevel(f.logLevel)
		if err != nil {
			return fail(stderr, "--log-level: %v", err)
		}
		logger := zerolog.New(stderr).Level(level).With().Timestamp().Logger()
		gc := tuneGC()
		logger.Info().Int("gogc", gc.Percent).Int64("memory_limit", gc.Limit).Str("gogc_from", gc.PercentFrom).
			Str("memory_limit_from", gc.LimitFrom).Int64("heap_floor", gc.Floor).Msg("garbage collector")
		ln, certs, err := nc.listener(f.listen)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		var mln net.Listener
		if f.metricsListen != "" {
			if mln, err = net.Listen("tcp", f.metricsListen); err != nil {
				ln.Close()
				return fail(stderr, "--metrics-listen: %v", err)
			}
			defer mln.Close()
		}
		ncfg := node.Config{DataDir: f.data, Manual: manual, Commands: cfg, SnapshotEvery: every, Logger: logger,
			BackupDir: sched.dir, BackupEvery: sched.every, BackupKeep: sched.keep,
			Stderr: func(format string, a ...any) { fmt.Fprintf(stderr, "taskledger: "+format, a...) }, MetricsElsewhere: mln != nil}
		var nd *node.Node
		handler := &startingHandler{}
		srv := nc.httpServer(handler, logger)
		errc := make(chan error, 2)
		serving := false
		if f.cluster.nats.ledger != "" {
			// A cluster node may wait for its ledger (--start-timeout): it
			// listens meanwhile, /readyz answering 503 until the node is open.
			go func() { errc <- srv.Serve(ln) }()
			serving = true
			logger.Info().Str("listen", ln.Addr().String()).Msg("waiting for the ledger: /readyz answers 503 until it is open")
			nd, err = f.cluster.open(ncfg)
		} else {
			nd, err = node.Open(ncfg)
		}
		if err != nil {
			if serving {
				_ = srv.Close()
			} else {
				ln.Close()
			}
			if errors.Is(err, ledger.ErrInUse) {
				return fail(stderr, "the ledger in %s is in use by another process (stop the server first)", f.data)
			}
			return fail(stderr, "%v", err)
		}
		nd.API.SetLimits(nc.limits())
		handler.open(nd.Handler())
		logger.Info().Str("listen", ln.Addr().String()).Str("data", f.data).Bool("manual_clock", manual).
			Bool("tls", certs != nil).Msg("serving")
		// Signals are caught before the address is announced: a SIGTERM sent as
		// soon as the server says it listens is a graceful shutdown.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		fmt.Fprintf(stderr, "taskledger: listening on %s\n", ln.Addr())

		if !serving {
			go func() { errc <- srv.Serve(ln) }()
		}
		var msrv *http.Server
		if mln != nil {
			msrv = &http.Server{Handler: nd.Metrics.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: zerologStd(logger)}
			go func() { errc <- msrv.Serve(mln) }()
			logger.Info().Str("metrics_listen", mln.Addr().String()).Msg("serving /metrics")
			fmt.Fprintf(stderr, "taskledger: metrics on http://%s/metrics\n", mln.Addr())
		}
		var fenced error
	wait:
		for {
			select {
			case sig := <-sigs:
				logger.Info().Str("signal", sig.String()).Msg("shutting down: finishing the batch in flight")
				break wait
			case <-hup:
				reloadCertificate(certs, logger, stderr)
			case err := <-errc:
				logger.Error().Err(err).Msg("server stopped")
				break wait
			case <-nd.Engine.Fenced():
				fenced = nd.Engine.Err()
				logger.Error().Err(fenced).Msg("exiting: a write or sync of the log failed; " +
					"the service manager restarts the server, which reads the log from disk")
				break wait
			}
		}
		nd.Stopping()     // new API requests answer 503; a cluster node's loops stop
		nd.Engine.Close() // the batch in flight commits and is answered
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx) // the answers being written (503s after a fence) go out
		if msrv != nil {
			_ = msrv.Shutdown(ctx)
		}
		err = nd.Close() // waits for a snapshot being written, closes the log
		if fenced != nil {
			return fail(stderr, "%v; exiting (status 1) so that the server restarts and reads the log from disk", fenced)
		}
		if err != nil {
			return fail(stderr, "close: %v", err)
		}
		return 0
	})
	f.register(c.Flags())
	return c
}

// reloadCertificate reloads the TLS certificate on SIGHUP; the ledger and
// open connections stay, a failed reload keeps the certificate in use.
func reloadCertificate(certs *certReloader, logger zerolog.Logger, stderr io.Writer) {
	if certs == nil {
		logger.Info().Msg("SIGHUP: no TLS certificate to reload")
		return
	}
	if err := certs.reload(); err != nil {
		logger.Error().Err(err).Msg("SIGHUP: TLS certificate not reloaded; the previous one stays in use")
		fmt.Fprintf(stderr, "taskledger: TLS certificate not reloaded (the previous one stays in use): %v\n", err)
		return
	}
	logger.Info().Msg("SIGHUP: TLS certificate reloaded")
	fmt.Fprintf(stderr, "taskledger: TLS certificate reloaded\n")
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// verifyFlags are the flags of verify's three modes: the stopped ledger in
// --data, a running server (--server), a JetStream log (--ledger).
type verifyFlags struct {
	data, secret, key string
	retention         time.Duration
	remote            remoteFlags
	nats              natsFlags
	fs                *pflag.FlagSet // to tell a flag given from one defaulted from the environment
}

func newVerifyCmd(stdout, stderr io.Writer) *cobra.Command {
	var f verifyFlags
	c := command("verify", func(pos []string) int {
		if len(pos) != 0 {
			fmt.Fprintf(stderr, "taskledger: verify takes no arguments (got %q)\nusage: taskledger verify [--data DIR | --server URL | --ledger nats://HOST:PORT] [flags]\n", pos)
			return 2
		}
		remote := f.remote.server != ""
		if f.nats.ledger != "" && remote {
			return usage(stderr, "--ledger and --server exclude each other")
		}
		if f.nats.ledger == "" && (f.fs.Changed("nats-name") || f.fs.Changed("nats-creds") || f.fs.Changed("nats-replicas")) {
			return usage(stderr, "--nats-name, --nats-creds and --nats-replicas go with --ledger")
		}
		if !remote && (f.key != "" || f.fs.Changed("token-file") || f.fs.Changed("ca-file")) {
			return usage(stderr, "--key, --token-file and --ca-file go with --server")
		}
		if (remote || f.nats.ledger != "") && f.fs.Changed("claim-token-secret") {
			return usage(stderr, "--claim-token-secret goes with the stopped ledger in --data")
		}
		switch {
		case f.nats.ledger != "":
			return verifyLedger(&f, stdout, stderr)
		case remote:
			return verifyRemote(&f, stdout, stderr)
		}
		return verifyOffline(&f, stdout, stderr)
	})
	fs := c.Flags()
	f.fs = fs
	envStringVar(fs, &f.data, "data", "./data", "data directory of the stopped ledger")
	envStringVar(fs, &f.secret, "claim-token-secret", "", "recompute server-issued claims with this secret")
	fs.DurationVar(&f.retention, "idempotency-retention", 72*time.Hour, "idempotency retention the server uses")
	f.remote.registerConn(fs, true)
	fs.StringVar(&f.key, "key", "", "with --server: the checkpoint key's verifier string: also check the newest signed checkpoint")
	f.nats.register(fs)
	return c
}

// usage prints a command-line mistake and returns exit code 2.
func usage(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "taskledger: %s\n", msg)
	return 2
}

func verifyOffline(f *verifyFlags, stdout, stderr io.Writer) int {
	data, secret, retention := &f.data, &f.secret, &f.retention
	store, err := ledger.Open(*data, ledger.Options{ReadOnly: true})
	if err != nil {
		if errors.Is(err, ledger.ErrInUse) {
			return fail(stderr, "the ledger in %s is in use by another process (stop the server first)", *data)
		}
		return fail(stderr, "%v", err)
	}
	defer store.Close()
	var sec []byte
	if *secret != "" {
		f := serveFlags{claimSecret: *secret}
		if !secretRE.MatchString(f.claimSecret) {
			return fail(stderr, "--claim-token-secret must be exactly 64 lowercase hex characters")
		}
		sec = hexBytes(*secret)
	}
	rep, err := node.Verify(store, projections.Config{IdempotencyRetentionMs: retention.Milliseconds()}, sec)
	if err == nil {
		err = node.CheckHeadFile(*data, store)
	}
	if err != nil {
		fmt.Fprintf(stderr, "taskledger: verify FAILED: %v\n", err)
		return 1
	}
	for _, r := range rep.SkippedSnapshots {
		fmt.Fprintf(stderr, "taskledger: note: %v (start-up ignores it and rebuilds)\n", r)
	}
	if !rep.ReadModelChecked {
		fmt.Fprintf(stderr, "taskledger: note: the read model of finished tasks is not this build's or not at the head (start-up rebuilds it)\n")
	}
	fmt.Fprintf(stdout, "ok: %d events, head seq %d, %d snapshots checked, %d checkpoints checked\n", rep.Events, rep.Head.Seq, rep.Snapshots, rep.Checkpoints)
	return 0
}
