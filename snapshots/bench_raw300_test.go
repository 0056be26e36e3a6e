package snapshots_test

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"taskledger/ledger"
)

// The ceiling, literally: a bbolt cursor scan with msgpack decoding
// of 1,000,000 300-byte events (TASKLEDGER_BENCH_EVENTS of them). The log
// is synthetic: valid sealed envelopes (stream, actor, hash chain; no
// idempotency key, which alone would take them past 300 bytes) whose body
// is padded so each stored event is 300 bytes; it is built once per
// process, or kept in $TASKLEDGER_BENCH_DIR-raw300.

const raw300Size = 300

var (
	raw300Once sync.Once
	raw300Dir  string
	raw300Err  error
)

func raw300Log(b *testing.B) (string, uint64) {
	b.Helper()
	n := uint64(envInt("TASKLEDGER_BENCH_EVENTS", 200000))
	raw300Once.Do(func() {
		if d := os.Getenv("TASKLEDGER_BENCH_DIR"); d != "" {
			raw300Dir = d + "-raw300"
			if ledger.Exists(raw300Dir) {
				return
			}
		} else {
			if benchRoot == "" {
				if benchRoot, raw300Err = os.MkdirTemp("", "taskledger-snapshot-bench-"); raw300Err != nil {
					return
				}
			}
			raw300Dir = benchRoot + "/raw300"
		}
		raw300Err = buildRaw300(raw300Dir, n)
	})
	if raw300Err != nil {
		b.Fatal(raw300Err)
	}
	store, err := ledger.Open(raw300Dir, ledger.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	head, err := store.Head()
	store.Close()
	if err != nil {
		b.Fatal(err)
	}
	return raw300Dir, head.Seq
}

func raw300Event(i uint64) *ledger.Event {
	id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
	return &ledger.Event{Stream: "task/" + id, StreamVersion: 3, Type: "task.heartbeat", Schema: 2,
		At: 1_800_000_000_000 + int64(i), Actor: ledger.Actor{Kind: ledger.ActorDevice, ID: "6f1d2c3b-0000-4000-8000-00000000d001"}}
}

func buildRaw300(dir string, n uint64) error {
	store, err := ledger.Open(dir, ledger.Options{NoSync: true})
	if err != nil {
		return err
	}
	defer store.Close()
	head := ledger.GenesisHead()
	committed := head
	var batch []*ledger.Event
	for i := uint64(1); i <= n; i++ {
		e := raw300Event(i)
		for pad := 0; ; pad++ { // the body pads the stored envelope to 300 bytes
			e.Body, _ = ledger.Marshal(map[string]string{"step": string(bytes.Repeat([]byte{'x'}, pad))})
			e.Seq, e.PrevHash, e.Hash = head.Seq+1, head.Hash, make([]byte, ledger.HashSize)
			if raw, _ := ledger.Marshal(e); len(raw) >= raw300Size {
				break
			}
		}
		if head, err = ledger.Seal(e, head); err != nil {
			return err
		}
		batch = append(batch, e)
		if len(batch) == 8192 || i == n {
			if err := store.Append(&ledger.Batch{Expected: committed, Events: batch}); err != nil {
				return err
			}
			committed, batch = head, batch[:0]
		}
	}
	return nil
}

// BenchmarkRawScan300Generic is the ceiling: every 300-byte event
// decoded with the generic msgpack decoder.
func BenchmarkRawScan300Generic(b *testing.B) {
	raw300Scan(b, func(raw []byte) error {
		var e ledger.Event
		return msgpack.Unmarshal(raw, &e)
	})
}

// BenchmarkRawScan300 is the same scan with the decoder replay uses.
func BenchmarkRawScan300(b *testing.B) {
	raw300Scan(b, func(raw []byte) error {
		_, err := ledger.DecodeEvent(raw)
		return err
	})
}

func raw300Scan(b *testing.B, decode func([]byte) error) {
	dir, events := raw300Log(b)
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	b.ResetTimer()
	c0 := processCPU()
	var size int
	for i := 0; i < b.N; i++ {
		var n uint64
		size = 0
		err := store.RangeRaw(0, func(seq uint64, raw []byte) error {
			n++
			size += len(raw)
			return decode(raw)
		})
		if err != nil || n != events {
			b.Fatalf("scan: %v (%d events)", err, n)
		}
	}
	cpuMetric(b, processCPU()-c0)
	report(b, events)
	b.ReportMetric(float64(size)/float64(events), "bytes/event")
}
