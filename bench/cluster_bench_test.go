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
func benchEngine(b *testing.B, eng *commands.Engine, callers int) {
	drv := &InProcess{Engine: eng, Operator: "initial"}
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
