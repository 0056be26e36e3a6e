package main_test

// verify names the seq of the first violation: a good log is
// tampered with through bbolt directly — a flipped byte, a deleted event,
// two swapped events — and `taskledger verify` must exit 1 naming the
// right seq.

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/node/nodetest"
	"taskledger/node/nodetest/proc"
)

// goodLedger writes a small but varied log and returns its data directory.
func goodLedger(t *testing.T) (dir string, events uint64) {
	t.Helper()
	n := nodetest.Start(t)
	devs := []*nodetest.Device{n.RegisterDevice(), n.RegisterDevice()}
	for _, d := range devs {
		nodetest.Must(t, d.Ready(), 200)
	}
	for i := range 4 {
		n.CreateTask(map[string]any{"i": i})
	}
	type run struct {
		d       *nodetest.Device
		id, tok string
		gen     uint64
		start   *nodetest.Resp
	}
	for round := range 3 {
		var runs []run
		for _, d := range devs {
			r, tok := d.Claim()
			nodetest.Must(t, r, 200)
			m := r.JSON()
			id := nodetest.Str(m["task"].(map[string]any), "id")
			gen, ver := nodetest.Num(m, "claim_generation"), nodetest.Num(m, "version")
			if round != 1 {
				nodetest.Must(t, d.Call(id, "release", tok, map[string]any{"claim_generation": gen, "expected_version": ver}, ""), 200)
				continue
			}
			s := d.Call(id, "start", tok, map[string]any{"claim_generation": gen, "expected_version": ver}, "")
			nodetest.Must(t, s, 200)
			runs = append(runs, run{d, id, tok, gen, s})
		}
		// Both devices run at once: the second claimed while the first ran.
		for _, r := range runs {
			ex := nodetest.Str(r.start.JSON(), "execution_id")
			nodetest.Must(t, r.d.Call(r.id, "heartbeat", r.tok, map[string]any{"claim_generation": r.gen, "execution_id": ex, "step": "a"}, ""), 200)
			nodetest.Must(t, r.d.Call(r.id, "complete", r.tok, map[string]any{"claim_generation": r.gen, "execution_id": ex,
				"expected_version": nodetest.Num(r.start.JSON(), "version"), "result": map[string]any{"ok": true}}, ""), 200)
		}
	}
	events = n.Head()
	n.Close()
	return n.Dir, events
}

// tampered copies the log of src into a new directory and edits its events
// bucket with bbolt directly.
func tampered(t *testing.T, src string, edit func(tx *bolt.Tx, b *bolt.Bucket) error) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(src, "taskledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "taskledger.db")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("events"))
		if b == nil {
			return fmt.Errorf("no events bucket")
		}
		return edit(tx, b)
	})
	if err != nil {
		t.Fatalf("tamper: %v", err)
	}
	return dir
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func TestE2EVerifyNamesFirstViolation(t *testing.T) {
	src, events := goodLedger(t)
	if events < 20 {
		t.Fatalf("only %d events", events)
	}
	if res := proc.CLI(t, "verify", "--data", src); res.Code != 0 {
		t.Fatalf("verify of the untouched log: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	forgedSeq, forge := forgeDoubleOwner(t, src)
	get := func(b *bolt.Bucket, seq uint64) []byte {
		v := b.Get(seqKey(seq))
		if v == nil {
			t.Errorf("no event %d", seq)
		}
		return append([]byte(nil), v...)
	}
	cases := []struct {
		name string
		seq  uint64 // the seq verify must name
		edit func(tx *bolt.Tx, b *bolt.Bucket) error
	}{
		{"flipped byte in the middle of an event", 9, func(_ *bolt.Tx, b *bolt.Bucket) error {
			v := get(b, 9)
			v[len(v)/2] ^= 0x01
			return b.Put(seqKey(9), v)
		}},
		{"flipped byte in the last byte of an event (its hash)", 14, func(_ *bolt.Tx, b *bolt.Bucket) error {
			v := get(b, 14)
			v[len(v)-1] ^= 0x80
			return b.Put(seqKey(14), v)
		}},
		{"deleted event", 12, func(_ *bolt.Tx, b *bolt.Bucket) error { return b.Delete(seqKey(12)) }},
		{"swapped events", 7, func(_ *bolt.Tx, b *bolt.Bucket) error {
			v7, v15 := get(b, 7), get(b, 15)
			if err := b.Put(seqKey(7), v15); err != nil {
				return err
			}
			return b.Put(seqKey(15), v7)
		}},
		{"swapped neighbours", 17, func(_ *bolt.Tx, b *bolt.Bucket) error {
			v17, v18 := get(b, 17), get(b, 18)
			if err := b.Put(seqKey(17), v18); err != nil {
				return err
			}
			return b.Put(seqKey(18), v17)
		}},
		// A forgery with a valid hash chain: a claim rewritten to take a task
		// another device is running, every later hash and the head recomputed.
		{"re-chained claim of a running task", forgedSeq, forge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tampered(t, src, tc.edit)
			res := proc.CLI(t, "verify", "--data", dir)
			if res.Code != 1 {
				t.Fatalf("verify exit %d, want 1\nstdout: %s\nstderr: %s", res.Code, res.Stdout, res.Stderr)
			}
			want := regexp.MustCompile(fmt.Sprintf(`\bseq %d\b`, tc.seq))
			if !want.MatchString(res.Stderr) {
				t.Fatalf("verify does not name seq %d:\n%s", tc.seq, res.Stderr)
			}
			if regexp.MustCompile(`^ok`).MatchString(res.Stdout) {
				t.Fatalf("verify printed ok: %s", res.Stdout)
			}
		})
	}
}

// forgeDoubleOwner finds, in the log of src, the first claim made while
// another device runs a task, and returns its seq and an edit that rewrites
// that claim to take the running task instead — with the stream, the hash
// chain of every later event and the head record recomputed, so that only
// the state machine (no task has two owners) can catch it.
func forgeDoubleOwner(t *testing.T, src string) (uint64, func(tx *bolt.Tx, b *bolt.Bucket) error) {
	t.Helper()
	store, err := ledger.Open(src, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var running, runner string
	var target uint64
	streamLen := map[string]uint64{}
	var targetStreamVersion uint64
	err = store.Range(0, func(e *ledger.Event) error {
		body, err := events.DecodeBody(e.Type, e.Schema, e.Body)
		if err != nil {
			return err
		}
		switch b := body.(type) {
		case *events.TaskStarted:
			if running == "" {
				running, runner = b.TaskID, b.DeviceID
			}
		case *events.TaskCompleted:
			if b.TaskID == running && target == 0 {
				running, runner = "", ""
			}
		case *events.TaskClaimed:
			if running != "" && target == 0 && b.DeviceID != runner {
				target = e.Seq
				targetStreamVersion = streamLen[events.TaskStream(running)] + 1
			}
		}
		streamLen[e.Stream]++
		return nil
	})
	if err != nil || target == 0 {
		t.Fatalf("no claim made while another device runs a task (%v)", err)
	}
	return target, func(tx *bolt.Tx, b *bolt.Bucket) error {
		var prev []byte
		var head ledger.Head
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			seq := binary.BigEndian.Uint64(k)
			e, err := ledger.DecodeEvent(v)
			if err != nil {
				return err
			}
			if seq == target {
				body, err := events.DecodeBody(e.Type, e.Schema, e.Body)
				if err != nil {
					return err
				}
				cl := body.(*events.TaskClaimed)
				cl.TaskID = running
				if e.Body, err = events.EncodeBody(cl); err != nil {
					return err
				}
				e.Stream, e.StreamVersion = events.TaskStream(running), targetStreamVersion
			}
			if seq >= target {
				e.PrevHash = prev
				if e.Hash, err = ledger.ComputeHash(&e); err != nil {
					return err
				}
				raw, err := ledger.Marshal(&e)
				if err != nil {
					return err
				}
				if err := b.Put(k, raw); err != nil {
					return err
				}
			}
			prev = e.Hash
			head = ledger.Head{Seq: seq, Hash: e.Hash, At: e.At}
		}
		hb, err := ledger.Marshal(&head)
		if err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Put([]byte("head"), hb)
	}
}
