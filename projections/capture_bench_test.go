package projections

import (
	"fmt"
	"testing"
	"time"
)

// benchState holds n idempotency records of the benchmark's shape and
// n/5 tasks, all but 512 of them ended: what a run of n commands at 256
// devices leaves.
func benchState(n int) *State {
	s := New(Config{IdempotencyRetentionMs: 72 * 3600 * 1000})
	for i := range n {
		dev := fmt.Sprintf("dev-%08x", i%256)
		r := &IdemRecord{Scope: "device:" + dev + ":heartbeat", Key: fmt.Sprintf("%016x-%08x", uint64(i)*0x9e3779b97f4a7c15, i),
			Fingerprint: make([]byte, 32), At: int64(i), Seq: uint64(i), EventType: "task.heartbeat", TaskID: fmt.Sprintf("task-%012d", i/5),
			DeviceID: dev, Reply: &Reply{TaskID: fmt.Sprintf("task-%012d", i/5), State: "RUNNING", ExecutionID: fmt.Sprintf("exec-%012d", i/5), ServerTime: int64(i)}}
		s.Idem.put(r)
	}
	for i := range n / 5 {
		st := StateCanceled
		if i >= n/5-512 {
			st = StateRunning
		}
		tk := &Task{ID: fmt.Sprintf("task-%012d", i), CreateSeq: uint64(i), State: st, Auth: &Authorization{}, Exec: &Execution{}, Claim: &Claim{}}
		s.Tasks[tk.ID] = tk
		s.taskOrder = append(s.taskOrder, tk)
		s.moved(tk, "")
	}
	s.Head.At = int64(n)
	return s
}

// BenchmarkSnapshotCapture reports the capture (what the sequencer waits
// for) and the encoding (on the snapshotter's goroutine) of a 200,000-
// record state.
func BenchmarkSnapshotCapture(b *testing.B) {
	s := benchState(200_000)
	var capture, encode time.Duration
	for b.Loop() {
		t0 := time.Now()
		c := s.Capture()
		t1 := time.Now()
		if _, err := c.Encode(); err != nil {
			b.Fatal(err)
		}
		capture, encode = capture+t1.Sub(t0), encode+time.Since(t1)
	}
	b.ReportMetric(float64(capture.Microseconds())/float64(b.N), "capture-µs/op")
	b.ReportMetric(float64(encode.Milliseconds())/float64(b.N), "encode-ms/op")
}
