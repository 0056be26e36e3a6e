package projections

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"taskledger/ledger"
)

// smallTombSegments makes the filter's segments small, so that a test
// reaches several full ones with a few thousand keys.
func smallTombSegments(t *testing.T, first, max uint64) {
	f, m := tombFirstCap, tombMaxCap
	tombFirstCap, tombMaxCap = first, max
	t.Cleanup(func() { tombFirstCap, tombMaxCap = f, m })
}

func tombIdemID(i int) string { return IdemID("s", fmt.Sprint("k", i)) }

// TestTombFilterSegmentsStopDoublingAtTheBound: segments double up to the
// bound and then keep it; every added key is found, each full segment is
// reported once as it fills, and fresh keys are mostly ruled out.
func TestTombFilterSegmentsStopDoublingAtTheBound(t *testing.T) {
	smallTombSegments(t, 64, 256)
	var f tombFilter
	var filled []int
	const n = 2000
	for i := range n {
		if k := f.add(TombstoneID(tombIdemID(i))); k >= 0 {
			filled = append(filled, k)
		}
	}
	want, total := uint64(0), uint64(0)
	for i, g := range f.segs {
		want = tombNextCap(want)
		if g.capacity != want {
			t.Fatalf("segment %d holds %d keys, want %d", i, g.capacity, want)
		}
		if i < len(f.segs)-1 && !g.full() {
			t.Fatalf("segment %d is not full (%d of %d) and a newer one exists", i, g.count, g.capacity)
		}
		total += g.count
	}
	if want != 256 || total != n {
		t.Fatalf("last capacity %d, %d keys counted: want 256 and %d", want, total, n)
	}
	if len(filled) != f.fullSegs() {
		t.Fatalf("filled %v, want each of the %d full segments once", filled, f.fullSegs())
	}
	for i, k := range filled {
		if k != i {
			t.Fatalf("filled %v, want 0, 1, 2, …", filled)
		}
	}
	fp := 0
	for i := range n {
		if !f.mayHave(TombstoneID(tombIdemID(i))) {
			t.Fatalf("added key %d is ruled out", i)
		}
		if f.mayHave(TombstoneID(tombIdemID(n + i))) {
			fp++
		}
	}
	if limit := len(f.segs) * n / 50; fp > limit { // about 0.8% per full segment
		t.Fatalf("%d of %d fresh keys not ruled out by %d segments (limit %d)", fp, n, len(f.segs), limit)
	}
}

// liveWithFilterRows tombstones n keys in projections that keep their
// read model on disk, applying each batch's writes to rm.
func liveWithFilterRows(t *testing.T, n int, rm memReadModel) *State {
	t.Helper()
	live := New(Config{IdempotencyRetentionMs: 50})
	live.Idem.recordsOnDisk()
	if err := live.UseFinished(rm); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		live.Idem.tombstone(tombIdemID(i))
		if i%97 == 0 || i == n-1 {
			ws, err := live.TakeReadModel()
			if err != nil {
				t.Fatal(err)
			}
			rm.apply(ws)
		}
	}
	return live
}

// TestFullFilterSegmentsAreRowsASnapshotLeavesOut: each segment is written
// to the read model in the batch that fills it, exactly as a replay's
// EachFilterRow computes; a snapshot leaves the full segments out (it is
// smaller by their bits), and projections restored from it rule nothing
// out until they read the segments back from the rows, after which their
// canonical bytes are the live projections'.
func TestFullFilterSegmentsAreRowsASnapshotLeavesOut(t *testing.T) {
	smallTombSegments(t, 64, 256)
	const n = 2000
	rm := memReadModel{}
	live := liveWithFilterRows(t, n, rm)

	replay := New(Config{IdempotencyRetentionMs: 50})
	for i := range n {
		replay.Idem.tombstone(tombIdemID(i))
	}
	want := map[string]string{}
	if err := replay.EachFilterRow(func(w ledger.ReadModelWrite) error {
		want[string(w.Key)] = string(w.Value)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got := rm.bucket(RMFilter)
	if len(want) != live.Idem.filter.fullSegs() || len(got) != len(want) {
		t.Fatalf("%d rows written, a replay computes %d, %d segments full", len(got), len(want), live.Idem.filter.fullSegs())
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("row %x differs from a replay's", k)
		}
	}

	snap := must(live.Capture().EncodeSnapshot())
	whole := must(live.Capture().Encode())
	var fullBytes int
	for _, g := range live.Idem.filter.segs[:live.Idem.filter.fullSegs()] {
		fullBytes += 8 * len(g.bits)
	}
	if len(whole)-len(snap) < fullBytes {
		t.Fatalf("the snapshot takes %d bytes, the canonical bytes %d: want the %d bytes of full segments left out", len(snap), len(whole), fullBytes)
	}
	r, err := Restore(snap, Config{IdempotencyRetentionMs: 50})
	if err != nil {
		t.Fatal(err)
	}
	if fresh := TombstoneID(tombIdemID(n + 1)); !r.Idem.filter.mayHave(fresh) {
		t.Fatal("a restored filter whose segments are not read back rules a key out")
	}
	if _, err := r.Canonical(); err == nil || !strings.Contains(err.Error(), "not read back") {
		t.Fatalf("canonical bytes before the read back: %v, want an error", err)
	}
	if err := r.UseFinished(rm); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(must(r.Canonical()), must(live.Canonical())) {
		t.Fatal("restored and read back, the projections differ from the live ones")
	}
}

// TestAFilterSegmentWithoutItsRowsRulesNothingOut: a full segment whose
// rows are missing or cut short stays unread, and UseFinished names it;
// lookups still answer right (an expired key expired, a fresh one fresh),
// from the tombstone index, and the canonical bytes report the damage.
func TestAFilterSegmentWithoutItsRowsRulesNothingOut(t *testing.T) {
	smallTombSegments(t, 64, 256)
	const n = 2000
	for _, damage := range []string{"missing", "short"} {
		t.Run(damage, func(t *testing.T) {
			rm := memReadModel{}
			live := liveWithFilterRows(t, n, rm)
			snap := must(live.Capture().EncodeSnapshot())
			k := RMFilter + "\x00" + string(tombChunkKey(2, 0))
			if _, ok := rm[k]; !ok {
				t.Fatal("no row for segment 2")
			}
			if damage == "missing" {
				delete(rm, k)
			} else {
				rm[k] = rm[k][:8]
			}
			r, err := Restore(snap, Config{IdempotencyRetentionMs: 50})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.UseFinished(rm); err == nil || !strings.Contains(err.Error(), "tombstone filter segment 2") {
				t.Fatalf("read back: %v, want segment 2 named", err)
			}
			if r.Idem.filter.segs[2].bits != nil || r.Idem.filter.segs[1].bits == nil {
				t.Fatal("want segment 2 unread and the others read back")
			}
			for i, wantExpired := range map[int]bool{5: true, 400: true, n + 7: false, n + 8: false} {
				s, key, _ := strings.Cut(tombIdemID(i), "\x00")
				if _, expired := r.Idem.Lookup(s, key, 0, 50); expired != wantExpired {
					t.Errorf("key %d: expired %v, want %v", i, expired, wantExpired)
				}
			}
			if _, err := r.Canonical(); err == nil || !strings.Contains(err.Error(), "segment 2") {
				t.Fatalf("canonical bytes: %v, want segment 2 named", err)
			}
		})
	}
}

// TestTombFilterDecodeRefusesMoreSegmentsOnDiskThanItHas: a section that
// leaves more segments to the read model than it counts is refused.
func TestTombFilterDecodeRefusesMoreSegmentsOnDiskThanItHas(t *testing.T) {
	e := newEncBuf(4)
	e.uv(1)
	e.uv(2)
	var f tombFilter
	if err := f.decode(string(e.b)); err == nil || !strings.Contains(err.Error(), "tombstone filter segments") {
		t.Fatalf("decode: %v, want a refusal", err)
	}
}

// TestFilterSegmentsReadAheadAreTakenAtTheirSize: the rows of every full
// segment read before any projections exist are the live filter's bits;
// projections restored from a snapshot take each segment read ahead at
// its size (no read of their own) and read a wrong-sized one again, to
// the live projections; a read called off stops between rows, and one
// that meets a segment without rows ends there.
func TestFilterSegmentsReadAheadAreTakenAtTheirSize(t *testing.T) {
	smallTombSegments(t, 64, 256)
	const n = 2000
	rm := memReadModel{}
	live := liveWithFilterRows(t, n, rm)
	full := live.Idem.filter.fullSegs()

	ahead, err := ReadTombFilterRows(rm, nil)
	if err != nil || ahead.Segments() != full {
		t.Fatalf("read ahead %d segments (%v), want the %d full ones", ahead.Segments(), err, full)
	}
	for i := range full {
		if !slices.Equal(ahead.segs[i], live.Idem.filter.segs[i].bits) {
			t.Fatalf("segment %d read ahead differs from the live one", i)
		}
	}
	ahead.segs[1] = ahead.segs[1][:len(ahead.segs[1])-1] // a wrong size: read again
	r, err := Restore(must(live.Capture().EncodeSnapshot()), Config{IdempotencyRetentionMs: 50})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.UseFinishedWith(rm, ahead); err != nil {
		t.Fatal(err)
	}
	if &r.Idem.filter.segs[0].bits[0] != &ahead.segs[0][0] {
		t.Fatal("segment 0 was read again, not taken from the read ahead")
	}
	if len(r.Idem.filter.segs[1].bits) != len(live.Idem.filter.segs[1].bits) {
		t.Fatal("segment 1 was taken at a wrong size")
	}
	if !bytes.Equal(must(r.Canonical()), must(live.Canonical())) {
		t.Fatal("restored with the segments read ahead, the projections differ from the live ones")
	}

	if got, err := ReadTombFilterRows(rm, func() bool { return true }); !errors.Is(err, errTombReadStopped) || got.Segments() != 0 {
		t.Fatalf("a read called off at once: %d segments, %v", got.Segments(), err)
	}
	delete(rm, RMFilter+"\x00"+string(tombChunkKey(2, 0)))
	if got, err := ReadTombFilterRows(rm, nil); err != nil || got.Segments() != 2 {
		t.Fatalf("segment 2's rows gone: read %d segments (%v), want the 2 before it", got.Segments(), err)
	}
}
