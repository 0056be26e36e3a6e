package bench

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// RawValueSize is the size of a raw baseline's value: an event's size when
// the baseline was set. The lifecycle's events now store about 760 bytes
// on average; raw group commit with values that size is within a few
// percent of this one (docs/performance.md), so the baseline stays
// comparable with every earlier figure.
const RawValueSize = 300

var rawBucket = []byte("events")

// openRaw creates a fresh bbolt file in dir with default sync (fsync on
// every commit) and the log's bucket settings.
func openRaw(dir, name string) (*bolt.DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	_ = os.Remove(path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("bench: open raw bbolt: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(rawBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// rawValue returns a random value of RawValueSize bytes.
func rawValue() []byte {
	v := make([]byte, RawValueSize)
	_, _ = rand.Read(v)
	return v
}

func putSeq(b *bolt.Bucket, seq uint64, v []byte) error {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	binary.BigEndian.PutUint64(v[:8], seq) // every value differs
	return b.Put(k[:], v)
}

// RawStop bounds a raw run: by time, or by a number of puts (whichever
// comes first; zero means no bound).
type RawStop struct {
	Duration time.Duration
	Puts     int
}

func (s RawStop) done(start time.Time, puts int) bool {
	return (s.Duration > 0 && time.Since(start) >= s.Duration) || (s.Puts > 0 && puts >= s.Puts)
}

// RawOneTx writes one ~300-byte value per bbolt transaction, sequentially,
// with fsync on: the cost of a commit when nothing is batched.
func RawOneTx(dir string, stop RawStop) (*Result, error) {
	db, err := openRaw(dir, "raw-onetx.db")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rec := &recorder{}
	v := rawValue()
	cpu0, start := processCPU(), time.Now()
	var seq uint64
	for !stop.done(start, int(seq)) {
		seq++
		t0 := time.Now()
		err := db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(rawBucket)
			b.FillPercent = 1.0
			return putSeq(b, seq, v)
		})
		if err != nil {
			return nil, fmt.Errorf("bench: raw put: %w", err)
		}
		rec.add(OpPut, time.Since(t0))
	}
	res := merge("raw bbolt, 1 tx/command", 1, time.Since(start), []*recorder{rec})
	res.CPU = processCPU() - cpu0
	return res, nil
}

type rawReq struct {
	done chan error
}

// RawGroupCommit runs writers concurrent writers, each submitting one
// ~300-byte put at a time to a batching goroutine that drains everything
// queued into one bbolt Update (one fsync) and then answers the batch: the
// ceiling of the sequencer's group commit without any decision, encoding
// or projection work.
func RawGroupCommit(dir string, writers int, stop RawStop) (*Result, error) {
	db, err := openRaw(dir, fmt.Sprintf("raw-group-%d.db", writers))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	in := make(chan *rawReq, writers)
	var batcherErr error
	var commits []time.Duration // the batcher's, read after it stopped
	var sizes, maxSize int
	batcherDone := make(chan struct{})
	go func() {
		defer close(batcherDone)
		v := rawValue()
		var seq uint64
		batch := make([]*rawReq, 0, writers)
		for r := range in {
			batch = append(batch[:0], r)
		drain:
			for {
				select {
				case r, ok := <-in:
					if !ok {
						break drain
					}
					batch = append(batch, r)
				default:
					break drain
				}
			}
			t0 := time.Now()
			err := db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket(rawBucket)
				b.FillPercent = 1.0
				for range batch {
					seq++
					if err := putSeq(b, seq, v); err != nil {
						return err
					}
				}
				return nil
			})
			commits = append(commits, time.Since(t0))
			sizes += len(batch)
			maxSize = max(maxSize, len(batch))
			if err != nil && batcherErr == nil {
				batcherErr = err
			}
			for _, r := range batch {
				r.done <- err
			}
		}
	}()

	recs := make([]*recorder, writers)
	var wg sync.WaitGroup
	var puts atomic.Int64
	cpu0, start := processCPU(), time.Now()
	for i := range writers {
		recs[i] = &recorder{}
		wg.Add(1)
		go func(rec *recorder) {
			defer wg.Done()
			r := &rawReq{done: make(chan error, 1)}
			for {
				if stop.done(start, int(puts.Add(1)-1)) {
					return
				}
				t0 := time.Now()
				in <- r
				if err := <-r.done; err != nil {
					rec.fail(err)
					continue
				}
				rec.add(OpPut, time.Since(t0))
			}
		}(recs[i])
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(in)
	<-batcherDone
	cpu := processCPU() - cpu0
	if batcherErr != nil {
		return nil, fmt.Errorf("bench: raw group commit: %w", batcherErr)
	}
	res := merge(fmt.Sprintf("raw bbolt, group commit, %d writers", writers), writers, elapsed, recs)
	res.CPU = cpu
	if len(commits) > 0 {
		slices.Sort(commits)
		var sum time.Duration
		for _, d := range commits {
			sum += d
		}
		res.Pauses = &Pauses{Commits: len(commits), CommitP50: pct(commits, 50), CommitP99: pct(commits, 99), CommitMax: commits[len(commits)-1],
			CommitBusy: sum.Seconds() / elapsed.Seconds(), EventsPerCommit: float64(sizes) / float64(len(commits)), MaxEventsPerCommit: maxSize, raw: true}
	}
	return res, nil
}
