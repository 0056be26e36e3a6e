package bench

import (
	"fmt"
	"testing"
)

// BenchmarkSequencer drives the real sequencer (node.Open on a temporary
// directory, fsync on) with 1, 64 and 256 concurrent simulated devices;
// one op is one durable command. Run with
//
//	go test -run '^$' -bench Sequencer -benchtime 20000x ./bench/
func BenchmarkSequencer(b *testing.B) {
	for _, callers := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			n, err := OpenNode(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			b.ReportAllocs()
			benchEngine(b, n.Engine, callers)
		})
	}
}

// BenchmarkRawGroupCommit is the bbolt ceiling the sequencer is compared
// with: the same number of writers, one ~300-byte put each, batched.
func BenchmarkRawGroupCommit(b *testing.B) {
	for _, writers := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			res, err := RawGroupCommit(b.TempDir(), writers, RawStop{Puts: b.N})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.PerSecond(), "cmds/s")
		})
	}
}
