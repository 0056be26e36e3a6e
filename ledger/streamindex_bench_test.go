package ledger

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkAppendStreamIndex appends batches of 96 events over task
// streams (a new task every 6 events, as the benchmark's mix does) and
// reports the longest and the 99th-percentile Append: the stream-index
// pass written at once (chunk=all) against a chunk per commit. One op is
// one event. Run with
//
//	go test -run '^$' -bench AppendStreamIndex -benchtime 200000x ./ledger/
func BenchmarkAppendStreamIndex(b *testing.B) {
	for _, chunk := range []int{1 << 30, 256} {
		name := fmt.Sprintf("chunk=%d", chunk)
		if chunk == 1<<30 {
			name = "chunk=all"
		}
		for _, sync := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/fsync=%v", name, sync), func(b *testing.B) {
				old := streamIndexChunk
				streamIndexChunk = chunk
				defer func() { streamIndexChunk = old }()
				s, err := Open(b.TempDir(), Options{NoSync: !sync})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				const perBatch = 96
				body := make([]byte, 300)
				head := GenesisHead()
				versions := map[string]uint64{}
				var streams []string
				var took []time.Duration
				b.ResetTimer()
				for done := 0; done < b.N; done += perBatch {
					prev := head
					evs := make([]*Event, 0, perBatch)
					enc := make([][]byte, 0, perBatch)
					for i := range perBatch {
						if (done+i)%6 == 0 || len(streams) == 0 {
							streams = append(streams, "task/"+uuid.NewString())
							if len(streams) > 512 {
								streams = streams[1:]
							}
						}
						name := streams[(done+i)%len(streams)]
						versions[name]++
						e := &Event{Stream: name, StreamVersion: versions[name], Type: "test.event", Schema: 1,
							At: head.At + 1, Actor: Actor{Kind: ActorSystem, ID: "taskledger"}, Body: body}
						var raw []byte
						if head, raw, err = SealEncoded(e, head); err != nil {
							b.Fatal(err)
						}
						evs = append(evs, e)
						enc = append(enc, raw)
					}
					t0 := time.Now()
					if err := s.Append(&Batch{Expected: prev, Events: evs, Encoded: enc}); err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(t0))
				}
				b.StopTimer()
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(len(took))/1e6, "ms/append")
			})
		}
	}
}

// BenchmarkStreamStartWithPendingEntries reads the first seq of one stream
// (a read of a settled task by id) while the stream index holds a whole
// batch of entries not written to the bucket yet: the pending entries are
// kept by stream, so the read does not scan them. Run with
//
//	go test -run '^$' -bench StreamStartWithPendingEntries ./ledger/
func BenchmarkStreamStartWithPendingEntries(b *testing.B) {
	s, err := Open(b.TempDir(), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	streams := make([]string, 1500)
	for i := range streams {
		streams[i] = "task/" + uuid.NewString()
	}
	seqs := map[string][]uint64{}
	appendRoundRobin(b, s, GenesisHead(), streams, streamIndexBatch/96-1, 96, seqs)
	var written []string
	for _, name := range streams {
		if len(seqs[name]) > 0 {
			written = append(written, name)
		}
	}
	if len(written) == 0 || len(s.index.tail(written[0])) == 0 {
		b.Fatal("no pending entries")
	}
	b.ResetTimer()
	for i := range b.N {
		name := written[i%len(written)]
		if first, err := s.StreamStart(name); err != nil || first != seqs[name][0] {
			b.Fatalf("StreamStart: %d, %v", first, err)
		}
	}
}
