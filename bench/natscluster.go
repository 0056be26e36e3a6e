package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/internal/freeport"
	"taskledger/ledger/jetstream"
	"taskledger/node"
	"taskledger/projections"
)

// NATSCluster is three nats-server processes routed to each other on
// loopback, each with its JetStream store under one directory: the
// cluster a deployment runs, as separate processes beside the node.
type NATSCluster struct {
	URL   string // every server's client URL, comma-separated
	procs []*exec.Cmd
}

// StartNATSCluster starts three servers of the nats-server binary bin
// with their stores and logs in dir, and waits until a JetStream client
// sees the cluster's meta leader (bounded by ctx).
func StartNATSCluster(ctx context.Context, bin, dir string) (*NATSCluster, error) {
	ports, err := freeport.Pick(6)
	if err != nil {
		return nil, err
	}
	var routes, urls []string
	for i := 0; i < 3; i++ {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3+i]))
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	c := &NATSCluster{URL: strings.Join(urls, ",")}
	for i := 0; i < 3; i++ {
		store := filepath.Join(dir, fmt.Sprintf("n%d", i+1))
		if err := os.MkdirAll(store, 0o700); err != nil {
			c.Close()
			return nil, err
		}
		logf, err := os.Create(store + ".log")
		if err != nil {
			c.Close()
			return nil, err
		}
		cmd := exec.Command(bin, "--server_name", fmt.Sprintf("n%d", i+1), "-a", "127.0.0.1", "-p", fmt.Sprint(ports[i]),
			"-js", "-sd", store, "--cluster_name", "tlbench", "--cluster", routes[i], "--routes", strings.Join(routes, ","))
		cmd.Stdout, cmd.Stderr = logf, logf
		err = cmd.Start()
		logf.Close()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("start %s: %w", bin, err)
		}
		c.procs = append(c.procs, cmd)
	}
	for {
		l, err := jetstream.Open(jetstream.Config{URL: c.URL, Name: "TLBENCH_PROBE", Replicas: 3, Timeout: time.Second})
		if err == nil {
			l.Close()
			return c, nil
		}
		select {
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("the nats-server cluster did not become ready (logs in %s): %w", dir, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Close stops the servers (SIGTERM, then SIGKILL after 10 s) and waits
// for them.
func (c *NATSCluster) Close() error {
	var errs []error
	for _, p := range c.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.procs {
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case err := <-done:
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				errs = append(errs, err)
			}
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	return errors.Join(errs...)
}

// ClusterScenario opens a fresh cluster node in dir on an R3 stream named
// name of the NATS cluster at url, waits until it sequences, and drives
// cfg through its sequencer like InProcessScenario (no HTTP). The stream
// is verified afterwards when verify is set.
func ClusterScenario(ctx context.Context, dir, url, name string, cfg Config, verify bool) (*Result, error) {
	log, err := jetstream.Open(jetstream.Config{URL: url, Name: name, Replicas: 3, StartTimeout: time.Minute})
	if err != nil {
		return nil, err
	}
	n, err := node.OpenCluster(node.Config{DataDir: dir, Commands: commands.DefaultConfig(), SnapshotEvery: 100000,
		Logger: zerolog.Nop()}, node.ClusterConfig{Log: log, Advertise: "http://127.0.0.1:1"})
	if err != nil {
		log.Close()
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); n.Role() != "sequencer"; {
		if time.Now().After(deadline) {
			n.Close()
			return nil, fmt.Errorf("the cluster node did not become the sequencer within 30s (%s)", n.Role())
		}
		time.Sleep(20 * time.Millisecond)
	}
	drv := &InProcess{Engine: n.Engine, Operator: "initial"}
	devs, err := Setup(ctx, drv, cfg)
	if err != nil {
		n.Close()
		return nil, err
	}
	before := drv.Head()
	res := Run(ctx, drv, devs, cfg, fmt.Sprintf("cluster R3 (%s), %d devices", name, len(devs)))
	res.Events = drv.Head() - before
	if err := n.Close(); err != nil {
		return nil, err
	}
	if verify {
		log, err := jetstream.Open(jetstream.Config{URL: url, Name: name, ReadOnly: true})
		if err != nil {
			return res, err
		}
		defer log.Close()
		if _, err := node.VerifyBackend(log, projections.Config{IdempotencyRetentionMs: (72 * time.Hour).Milliseconds()}); err != nil {
			return res, fmt.Errorf("verify the stream: %w", err)
		}
	}
	return res, nil
}
