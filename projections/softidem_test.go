package projections

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"taskledger/ledger"
)

const softKey = SoftIdemPrefix + "device:d1:claim-next\x00" + "0b7c1b2e-6a4f-4c1e-9d3a-2f6b1c0e8a71"

func noTaskRecord() *IdemRecord {
	return &IdemRecord{Scope: "device:d1:claim-next", Key: "0b7c1b2e-6a4f-4c1e-9d3a-2f6b1c0e8a71",
		Fingerprint: bytes.Repeat([]byte{0xab}, 32), At: 1_790_000_000_123, Outcome: OutcomeNoTask, DeviceID: "d1"}
}

func quietHeartbeatRecord() *IdemRecord {
	return &IdemRecord{Scope: "device:d1:heartbeat", Key: "5f0e2a9c-1d3b-4e7f-8a6c-9b2d4f1e3a57",
		Fingerprint: bytes.Repeat([]byte{0xcd}, 32), At: 1_790_000_000_123, Outcome: OutcomeAccepted,
		TaskID: "t1", DeviceID: "d1", Reply: &Reply{TaskID: "t1", State: string(StateRunning), Version: 3, Generation: 1,
			ExecutionID: "e1", ServerTime: 1_790_000_000_123, LeaseExpiresAt: 1_790_000_090_123,
			CancelRequested: true, Step: "working"}}
}

// TestSoftRecordCodecRoundTrips: both kinds of soft idempotency record
// come back whole from the compact encoding, which is a fraction of the
// msgpack record it replaces.
func TestSoftRecordCodecRoundTrips(t *testing.T) {
	for _, r := range []*IdemRecord{noTaskRecord(), quietHeartbeatRecord()} {
		raw, err := EncodeSoftIdem(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSoftIdem(SoftIdemPrefix+IdemID(r.Scope, r.Key), raw)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
		old, _ := ledger.Marshal(r)
		if len(raw) > 100 || 2*len(raw) > len(old) {
			t.Errorf("%s: compact record is %d bytes (msgpack %d)", r.Scope, len(raw), len(old))
		}
	}
}

// TestSoftRecordLegacyMsgpackLoads: records written as msgpack before the
// compact encoding still load.
func TestSoftRecordLegacyMsgpackLoads(t *testing.T) {
	for _, r := range []*IdemRecord{noTaskRecord(), quietHeartbeatRecord()} {
		raw, err := ledger.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSoftIdem(SoftIdemPrefix+IdemID(r.Scope, r.Key), raw)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("legacy record: %+v, %v", got, err)
		}
	}
}

// TestSoftRecordDecodeRefusesDamage: every truncation, a trailing byte, a
// bad flag or outcome, and a key that names no scope are ErrCorrupt.
func TestSoftRecordDecodeRefusesDamage(t *testing.T) {
	good, err := EncodeSoftIdem(quietHeartbeatRecord())
	if err != nil {
		t.Fatal(err)
	}
	key := SoftIdemPrefix + IdemID(quietHeartbeatRecord().Scope, quietHeartbeatRecord().Key)
	bad := map[string][]byte{
		"trailing byte":   append(append([]byte(nil), good...), 0),
		"outcome none":    patch(good, 1, byte(OutcomeNone)),
		"unknown outcome": patch(good, 1, 200),
		"cancel flag 2":   patch(good, len(good)-1, 2),
	}
	for i := range good {
		bad[fmt.Sprint("truncated at ", i)] = good[:i]
	}
	noTask, _ := EncodeSoftIdem(noTaskRecord())
	bad["reply flag 2"] = patch(noTask, len(noTask)-1, 2)
	for name, v := range bad {
		if _, err := DecodeSoftIdem(key, v); !errors.Is(err, ledger.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	timed := SoftIdemKey(IdemID(quietHeartbeatRecord().Scope, quietHeartbeatRecord().Key), quietHeartbeatRecord().At)
	if _, err := DecodeSoftIdem(timed, good); err != nil {
		t.Fatalf("the record under its time-ordered key: %v", err)
	}
	other := SoftIdemKey(IdemID(quietHeartbeatRecord().Scope, quietHeartbeatRecord().Key), quietHeartbeatRecord().At+1)
	for _, k := range []string{"idem/no-separator", "lease/x\x00y", other, "idemt/0000000000000001", "idemt/00000000000000zz/s\x00k",
		"idemt/0000000000000001-s\x00k"} {
		if _, err := DecodeSoftIdem(k, good); !errors.Is(err, ledger.ErrCorrupt) {
			t.Errorf("key %q: %v, want ErrCorrupt", k, err)
		}
	}
}

func patch(b []byte, i int, c byte) []byte {
	out := append([]byte(nil), b...)
	out[i] = c
	return out
}

// TestSoftRecordEncodeRefusesEventRecords: a record with fields only event
// records hold cannot be kept as a soft record (it would lose them).
func TestSoftRecordEncodeRefusesEventRecords(t *testing.T) {
	for name, edit := range map[string]func(r *IdemRecord){
		"seq":        func(r *IdemRecord) { r.Seq = 7 },
		"event type": func(r *IdemRecord) { r.EventType = "task.claimed" },
		"code":       func(r *IdemRecord) { r.Code = "lease_expired" },
		"no outcome": func(r *IdemRecord) { r.Outcome = OutcomeNone },
		"claim":      func(r *IdemRecord) { r.Reply.SessionID = "s" },
		"evidence":   func(r *IdemRecord) { r.Reply.Evidence = &Evidence{} },
	} {
		r := quietHeartbeatRecord()
		edit(r)
		if _, err := EncodeSoftIdem(r); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

// put records r as the commands do: with its compact encoding.
func put(t testing.TB, v *IdemView, r *IdemRecord) {
	t.Helper()
	raw, err := EncodeSoftIdem(r)
	if err != nil {
		t.Fatal(err)
	}
	v.PutSoft(r, raw)
}

func look(t testing.TB, v *IdemView, scope, key string, now, retention int64) *IdemRecord {
	t.Helper()
	r, err := v.SoftLookup(scope, key, now, retention)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func softRec(key string, at int64) *IdemRecord {
	return &IdemRecord{Scope: "device:d:claim-next", Key: key, At: at, Outcome: OutcomeNoTask}
}

// TestSoftRecordsExpireOnTheirOwnClock: a soft record is answered until
// now reaches At + retention, whatever the head; collection drops the
// expired ones oldest first, at most limit at a time, and a key recorded
// again after it expired keeps its new record.
func TestSoftRecordsExpireOnTheirOwnClock(t *testing.T) {
	v := newIdemView()
	const ret = 100
	for i, at := range []int64{0, 10, 20, 30} {
		put(t, v, softRec(string(rune('a'+i)), at))
	}
	if look(t, v, "device:d:claim-next", "a", 99, ret) == nil || look(t, v, "device:d:claim-next", "a", 100, ret) != nil {
		t.Fatal("record a is not answered exactly until At + retention")
	}
	if look(t, v, "device:d:claim-next", "a", 1<<40, 0) == nil {
		t.Fatal("retention 0 expired a record")
	}
	put(t, v, softRec("a", 105)) // a, expired, recorded again
	if got := v.ExpiredSoft(125, ret, 10); !reflect.DeepEqual(got, []string{IdemID("device:d:claim-next", "b"), IdemID("device:d:claim-next", "c")}) {
		t.Fatalf("expired at 125: %q", got)
	}
	if got := v.ExpiredSoft(125, ret, 1); len(got) != 1 {
		t.Fatalf("limit 1: %q", got)
	}
	if n := v.DropExpiredSoft(125, ret, 1); n != 1 || v.SoftCount() != 3 {
		t.Fatalf("dropped %d, %d left; want 1 and 3", n, v.SoftCount())
	}
	if n := v.DropExpiredSoft(125, ret, 10); n != 1 || v.SoftCount() != 2 {
		t.Fatalf("dropped %d, %d left; want 1 and 2", n, v.SoftCount())
	}
	if r := look(t, v, "device:d:claim-next", "a", 125, ret); r == nil || r.At != 105 {
		t.Fatalf("the re-recorded a: %+v", r)
	}
	if n := v.DropExpiredSoft(1000, ret, 10); n != 2 || v.SoftCount() != 0 || v.soft.order != nil {
		t.Fatalf("dropped %d, %d left, order %v; want all gone", n, v.SoftCount(), v.soft.order)
	}
	if n := v.DropExpiredSoft(1<<40, 0, 10); n != 0 {
		t.Fatal("retention 0 collected records")
	}
}

// TestSoftRecordSetShrinks: after a burst is collected, the map and the
// order are rebuilt at the survivors' size (Go maps never shrink).
func TestSoftRecordSetShrinks(t *testing.T) {
	v := newIdemView()
	for i := range 5000 {
		put(t, v, softRec(strings.Repeat("k", 1+i%7)+string(rune(i)), int64(i)))
	}
	put(t, v, softRec("survivor", 10_000))
	if n := v.DropExpiredSoft(10_000, 100, 1<<20); n != 5000 {
		t.Fatalf("dropped %d", n)
	}
	if v.SoftCount() != 1 || v.soft.peak != 1 || cap(v.soft.order) > 1024 {
		t.Fatalf("after the collection: %d records, peak %d, order capacity %d", v.SoftCount(), v.soft.peak, cap(v.soft.order))
	}
}

// FuzzDecodeSoftRecord: any bytes under any key decode or are
// ErrCorrupt, and what decodes encodes back to a record that decodes
// equal.
func FuzzDecodeSoftRecord(f *testing.F) {
	for _, r := range []*IdemRecord{noTaskRecord(), quietHeartbeatRecord()} {
		raw, _ := EncodeSoftIdem(r)
		f.Add(SoftIdemPrefix+IdemID(r.Scope, r.Key), raw)
		old, _ := ledger.Marshal(r)
		f.Add(SoftIdemPrefix+IdemID(r.Scope, r.Key), old)
	}
	f.Add(softKey, []byte{softFormat})
	f.Fuzz(func(t *testing.T, key string, v []byte) {
		r, err := DecodeSoftIdem(key, v)
		if err != nil {
			if !errors.Is(err, ledger.ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if len(v) == 0 || v[0] != softFormat {
			return // a legacy msgpack record: its own codec's business
		}
		raw, err := EncodeSoftIdem(r)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		again, err := DecodeSoftIdem(key, raw)
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-decoded %+v, %v; want %+v", again, err, r)
		}
	})
}

// BenchmarkPollOnlySoftRecords records one "no task" outcome per
// operation, the clock moving 1 ms each, and collects every 100: whatever
// b.N, the records held stay at one retention's worth (10,000 here), and
// heap-bytes/record is what each costs in memory.
func BenchmarkPollOnlySoftRecords(b *testing.B) {
	const retention = 10_000
	v := newIdemView()
	fp := bytes.Repeat([]byte{1}, 32)
	most := 0
	b.ReportAllocs()
	for i := range b.N {
		at := int64(i)
		put(b, v, &IdemRecord{Scope: "device:" + strconv.Itoa(i%500) + ":claim-next", Key: strconv.Itoa(i),
			Fingerprint: fp, At: at, Outcome: OutcomeNoTask, DeviceID: strconv.Itoa(i % 500)})
		if i%100 == 0 {
			v.DropExpiredSoft(at, retention, 1<<20)
		}
		most = max(most, v.SoftCount())
	}
	b.StopTimer()
	if most > retention+100 {
		b.Fatalf("%d records held, retention holds %d", most, retention)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := v.SoftCount()
	v = newIdemView()
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportMetric(float64(most), "records-held-max")
	if held > 0 && after.HeapAlloc > before.HeapAlloc {
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(held), "heap-bytes/record")
	}
	runtime.KeepAlive(v)
}

// TestSoftLookupRefusesADamagedRecord: a held encoding that does not
// decode is an error for the command, never a fresh decision.
func TestSoftLookupRefusesADamagedRecord(t *testing.T) {
	v := newIdemView()
	r := softRec("k", 5)
	raw, _ := EncodeSoftIdem(r)
	v.PutSoft(r, raw[:len(raw)-1])
	if _, err := v.SoftLookup(r.Scope, r.Key, 6, 100); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("damaged record: %v, want ErrCorrupt", err)
	}
}

// softSource is a log with no events and the given soft records.
type softSource map[string][]byte

func (softSource) Range(uint64, func(*ledger.Event) error) error { return nil }
func (s softSource) SoftRecords(prefix string, fn func(string, []byte) error) error {
	for k, v := range s {
		if strings.HasPrefix(k, prefix) {
			if err := fn(k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestLoadSoftRecords: compact and msgpack records load, held compact and
// answered alike; a msgpack record holding what only events hold (a seq)
// is corrupt and refuses the load.
func TestLoadSoftRecords(t *testing.T) {
	a, b := noTaskRecord(), quietHeartbeatRecord()
	rawA, _ := EncodeSoftIdem(a)
	rawB, _ := ledger.Marshal(b)
	src := softSource{SoftIdemPrefix + IdemID(a.Scope, a.Key): rawA, SoftIdemPrefix + IdemID(b.Scope, b.Key): rawB}
	s, err := Rebuild(src, Config{IdempotencyRetentionMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*IdemRecord{a, b} {
		if got := look(t, s.Idem, want.Scope, want.Key, want.At, 1000); !reflect.DeepEqual(got, want) {
			t.Fatalf("loaded %+v, want %+v", got, want)
		}
	}
	if n := s.Idem.SoftCount(); n != 2 {
		t.Fatalf("%d records loaded", n)
	}
	bad := quietHeartbeatRecord()
	bad.Seq = 9
	rawBad, _ := ledger.Marshal(bad)
	src[SoftIdemPrefix+IdemID(bad.Scope, bad.Key)] = rawBad
	if _, err := Rebuild(src, Config{}); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("a soft record with a seq: %v, want ErrCorrupt", err)
	}
}

// TestSoftRecordKeysOrderedByTime: records are stored under keys ordered
// by their time (so a batch's land together in the bucket); a record a
// ledger stored by its id alone loads, and is named by that key until a
// new record of its id replaces it.
func TestSoftRecordKeysOrderedByTime(t *testing.T) {
	a, b := noTaskRecord(), quietHeartbeatRecord()
	if ka, kb := SoftIdemKey(IdemID("z", "z"), 9), SoftIdemKey(IdemID("a", "a"), 10); ka >= kb {
		t.Fatalf("%q sorts after %q", ka, kb)
	}
	rawA, _ := EncodeSoftIdem(a)
	rawB, _ := EncodeSoftIdem(b)
	idA, idB := IdemID(a.Scope, a.Key), IdemID(b.Scope, b.Key)
	src := softSource{SoftIdemPrefix + idA: rawA, SoftIdemKey(idB, b.At): rawB}
	s, err := Rebuild(src, Config{IdempotencyRetentionMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Idem.SoftCount(); n != 2 {
		t.Fatalf("%d records loaded from both key forms", n)
	}
	for id, want := range map[string]string{idA: SoftIdemPrefix + idA, idB: SoftIdemKey(idB, b.At)} {
		if k, ok := s.Idem.SoftKey(id); !ok || k != want {
			t.Fatalf("record %q stored under %q (%v), want %q", id, k, ok, want)
		}
	}
	again := *a
	again.At += 5000
	raw, _ := EncodeSoftIdem(&again)
	s.Idem.PutSoft(&again, raw)
	if k, _ := s.Idem.SoftKey(idA); k != SoftIdemKey(idA, again.At) {
		t.Fatalf("a record recorded again is named %q", k)
	}
	if _, ok := s.Idem.SoftKey("none"); ok {
		t.Fatal("a key for a record the view does not hold")
	}
}

// wholeSoftSource is a softSource whose every read reads all of it (a
// cluster's bucket), counting the reads.
type wholeSoftSource struct {
	softSource
	reads *int
}

func (wholeSoftSource) SoftReadsWhole() {}
func (w wholeSoftSource) SoftRecords(prefix string, fn func(string, []byte) error) error {
	*w.reads++
	return w.softSource.SoftRecords(prefix, fn)
}

// TestLoadSoftReadsAWholeStoreOnce: a source whose reads each read the
// whole store is read once, and loads what the same records load from a
// source read by prefix (presence, both key forms of soft records).
func TestLoadSoftReadsAWholeStoreOnce(t *testing.T) {
	a, b := noTaskRecord(), quietHeartbeatRecord()
	rawA, _ := EncodeSoftIdem(a)
	rawB, _ := EncodeSoftIdem(b)
	pres, _ := ledger.Marshal(&Presence{ReceivedAt: 5, AppVersion: "1.2"})
	src := softSource{SoftIdemPrefix + IdemID(a.Scope, a.Key): rawA, SoftIdemKey(IdemID(b.Scope, b.Key), b.At): rawB,
		softPresence + "dev-1": pres}
	cfg := Config{IdempotencyRetentionMs: 1000}
	byPrefix, err := Rebuild(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	whole, err := Rebuild(wholeSoftSource{src, &reads}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if reads != 1 {
		t.Fatalf("the whole store read %d times, want once", reads)
	}
	if whole.Idem.SoftCount() != 2 || whole.Presence["dev-1"] == nil || !whole.Presence["dev-1"].Restored {
		t.Fatalf("loaded %d soft records, presence %+v", whole.Idem.SoftCount(), whole.Presence["dev-1"])
	}
	for _, r := range []*IdemRecord{a, b} {
		id := IdemID(r.Scope, r.Key)
		kw, okw := whole.Idem.SoftKey(id)
		kp, okp := byPrefix.Idem.SoftKey(id)
		if kw != kp || okw != okp || !okw {
			t.Fatalf("record %q under %q (%v), by prefix %q (%v)", id, kw, okw, kp, okp)
		}
	}
	w, _ := whole.CanonicalWithSoft()
	p, _ := byPrefix.CanonicalWithSoft()
	if !bytes.Equal(w, p) {
		t.Fatal("the projections loaded from one read differ from those loaded by prefix")
	}
	bad := wholeSoftSource{softSource{softPresence + "dev-2": []byte{0xc1}}, &reads}
	if _, err := Rebuild(bad, cfg); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("a damaged presence record read once: %v, want ErrCorrupt", err)
	}
}
