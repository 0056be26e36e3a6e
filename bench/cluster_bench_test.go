package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

// BenchmarkClusterBesideBbolt drives the sequencer with 64 concurrent
// simulated devices (the in-process driver: commands go to the engine,
// no HTTP) on the bbolt file (fsync on) and, in the same run, on an R3
// stream of an embedded three-server NATS cluster on loopback (one
// sequencing node); one op is one durable command. The cluster's stream is
// verified afterwards. Run with
//
//	go test -run '^$' -bench ClusterBesideBbolt -benchtime 20000x ./bench/
func BenchmarkClusterBesideBbolt(b *testing.B) {
	b.Run("bbolt/callers=64", func(b *testing.B) {
		n, err := OpenNode(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer n.Close()
		benchEngine(b, n.Engine, 64)
	})
	b.Run("cluster-R3/callers=64", func(b *testing.B) {
		servers := jstest.Cluster(b)
		url := jstest.URLs(servers)
		log, err := jetstream.Open(jetstream.Config{URL: url, Name: "BENCH", Replicas: 3})
		if err != nil {
			b.Fatal(err)
		}
		n, err := node.OpenCluster(node.Config{DataDir: b.TempDir(), Commands: commands.DefaultConfig(), SnapshotEvery: 100000,
			Logger: zerolog.Nop()}, node.ClusterConfig{Log: log, Advertise: "http://127.0.0.1:1"})
		if err != nil {
			b.Fatal(err)
		}
		defer n.Close()
		jstest.Eventually(b, 20*time.Second, "the node sequences", func() error {
			if n.Role() != "sequencer" {
				return errors.New(n.Role())
			}
			return nil
		})
		benchEngine(b, n.Engine, 64)
		if _, err := node.VerifyBackend(log, projections.Config{IdempotencyRetentionMs: (72 * time.Hour).Milliseconds()}); err != nil {
			b.Fatalf("verify the stream: %v", err)
		}
	})
}

// benchEngine drives eng with callers simulated devices for b.N commands
// and reports throughput, latency percentiles and CPU per command.
// BenchmarkClusterHTTP drives two nodes of an embedded three-server R3
// cluster over HTTP with 64 simulated devices: through the sequencer, and
// through the follower (every command forwarded): the price of
// forwarding. Run with
//
//	go test -run '^$' -bench ClusterHTTP -benchtime 10000x ./bench/
func BenchmarkClusterHTTP(b *testing.B) {
	servers := jstest.Cluster(b)
	url := jstest.URLs(servers)
	seq := nodetest.StartCluster(b, url, "HTTPBENCH", b.TempDir(), node.DefaultLeaseTTL)
	jstest.Eventually(b, 20*time.Second, "the first node sequences", func() error {
		if seq.Role() != "sequencer" {
			return errors.New(seq.Role())
		}
		return nil
	})
	fol := nodetest.StartCluster(b, url, "HTTPBENCH", b.TempDir(), node.DefaultLeaseTTL)
	jstest.Eventually(b, 20*time.Second, "the follower knows the sequencer", func() error {
		if fol.Sequencer() != seq.URL {
			return errors.New(fol.Sequencer())
		}
		return nil
	})
	for _, c := range []struct {
		name string
		n    *nodetest.Node
	}{{"via-sequencer", seq}, {"via-follower", fol}} {
		b.Run(c.name+"/callers=64", func(b *testing.B) {
			drv := NewHTTP(c.n.URL, seq.AdminToken, 64)
			defer drv.Client.CloseIdleConnections()
			benchDriver(b, drv, 64)
		})
	}
	if _, err := node.VerifyBackend(seq.Log, projections.Config{IdempotencyRetentionMs: (72 * time.Hour).Milliseconds()}); err != nil {
		b.Fatalf("verify the stream: %v", err)
	}
}

func benchEngine(b *testing.B, eng *commands.Engine, callers int) {
	benchDriver(b, &InProcess{Engine: eng, Operator: "initial"}, callers)
}

// benchDriver drives drv with callers simulated devices for b.N commands
// and reports throughput, latency percentiles and CPU per command.
func benchDriver(b *testing.B, drv Driver, callers int) {
	cfg := Config{Devices: callers, Commands: b.N}
	devs, err := Setup(context.Background(), drv, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	res := Run(context.Background(), drv, devs, cfg, b.Name())
	b.StopTimer()
	if res.Errors > 0 {
		b.Fatalf("%d errors, first: %v", res.Errors, res.FirstError)
	}
	b.ReportMetric(res.PerSecond(), "cmds/s")
	b.ReportMetric(float64(res.P50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(res.P999.Microseconds()), "p99.9-µs")
	b.ReportMetric(float64(res.Max.Microseconds()), "max-µs")
	b.ReportMetric(float64(res.CPUPerCommand().Nanoseconds())/1000, "cpu-µs/cmd")
}
