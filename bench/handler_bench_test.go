package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/node"
)

// handlerTransport answers a request by calling the handler in memory: the
// HTTP driver and the whole server (routing, middleware, parsing,
// authentication, sequencer, rendering) without sockets or their system
// calls.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// BenchmarkHTTPHandler drives the server's handler in memory with the
// HTTP driver through each loop, fsync off (NoSync: the API layer's CPU is
// what it measures); one op is one command. Run with
//
//	go test -run '^$' -bench HTTPHandler -benchtime 20000x ./bench/
func BenchmarkHTTPHandler(b *testing.B) {
	for _, loop := range []Loop{LoopRelease, LoopFull} {
		b.Run("loop="+loop.String(), func(b *testing.B) {
			dir := b.TempDir()
			n, err := node.Open(node.Config{DataDir: dir, NoSync: true, Commands: commands.DefaultConfig(),
				SnapshotEvery: 10000000, Logger: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			tok, err := os.ReadFile(filepath.Join(dir, node.InitialTokenFile))
			if err != nil {
				b.Fatal(err)
			}
			drv := NewHTTP("http://bench.invalid", strings.TrimSpace(string(tok)), 64)
			drv.Client.Transport, drv.raw = handlerTransport{n.API.Handler()}, nil
			cfg := Config{Devices: 64, Commands: b.N, Loop: loop}
			devs, err := Setup(context.Background(), drv, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			res := Run(context.Background(), drv, devs, cfg, fmt.Sprintf("handler, %s loop", loop))
			b.StopTimer()
			if res.Errors > 0 {
				b.Fatalf("%d errors, first: %v", res.Errors, res.FirstError)
			}
			b.ReportMetric(float64(res.CPUPerCommand().Nanoseconds())/1000, "cpu-µs/cmd")
		})
	}
}
