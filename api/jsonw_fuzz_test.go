package api

import (
	"bytes"
	"encoding/json"
	"testing"

	"taskledger/commands"
	"taskledger/events"
	"taskledger/projections"
)

// typedJSON is what c.JSON writes for v without ?pretty.
func typedJSON(t *testing.T, v any) []byte {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// FuzzHotWriters holds every hand writer to the typed encoding of the same
// answer for any strings, numbers, times and JSON texts: a task command's
// answer, a claim, a presence answer, an evidence item, an error and the
// task detail.
func FuzzHotWriters(f *testing.F) {
	f.Add("3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69", "RUNNING", `{"a":1}`, uint64(3), int64(1700000000123), true)
	f.Add("a<b>&\"c\u2028", "é\xff", `{"a": "<&>", "b" :[1, 2.50]}`, uint64(1<<63), int64(0), false)
	f.Add("", "", `{}`, uint64(0), int64(253402300799999), true)
	f.Fuzz(func(t *testing.T, s1, s2, payload string, n uint64, tm int64, flag bool) {
		if tm < 0 || tm > 253402300799999 || !json.Valid([]byte(payload)) || !bytes.HasPrefix(bytes.TrimSpace([]byte(payload)), []byte("{")) {
			return
		}
		secret := bytes.Repeat([]byte{7}, 32)
		origin := events.TokenClient
		if flag {
			origin = events.TokenServer
		}
		r := &projections.Reply{TaskID: s1, State: s2, Version: n, Generation: n / 3, ExecutionID: s2, ServerTime: tm,
			LeaseExpiresAt: tm / 2, CancelRequested: flag, Step: s1, SessionID: s2, AuthorizationExpiresAt: tm / 3,
			TokenOrigin: origin, AuthorizationID: s1, Nonce: s2}
		ct := &commands.ClaimedTask{Payload: payload, Revision: n, CreatedAt: tm, HasImage: flag, Takeover: s2}
		rec := &projections.IdemRecord{DeviceID: s2, Reply: r}
		pr := commands.PresenceReply{Claimable: flag, MissingChecks: []string{s1, s2}, PresenceExpiresAt: tm, ActiveTaskID: s1}
		ev := projections.Evidence{ID: s1, SHA256: s2, Size: int64(n >> 1), Kind: s2, CapturedAt: tm}
		ae := newErr(409, s1, s2)
		res := payload
		tk := &projections.Task{ID: s1, State: projections.StateRunning, Version: n, Revision: n / 2, Payload: payload,
			CreatedAt: tm, UpdatedAt: tm, CancelRequested: flag, Result: &res,
			Failure:     &projections.Failure{ReasonCode: s2, Detail: s1},
			Evidence:    []projections.Evidence{ev},
			LateReports: []projections.LateReport{{At: tm, DeviceID: s1, Generation: n, ExecutionID: s2, Outcome: commands.OpFail, ReasonCode: s1, Detail: s2}},
			Exec:        &projections.Execution{ID: s2, StartedAt: tm, LeaseExpiresAt: tm, Step: s1, LastSeenAt: tm}}
		st := projections.New(projections.Config{})
		for _, c := range []struct {
			name string
			w    *jsonw
			doc  any
		}{
			{"task reply", writeTaskReply(newJSONW(), r), taskReplyDoc(r)},
			{"claim", writeClaim(newJSONW(), rec, ct, secret), claimDoc(rec, ct, secret)},
			{"presence", writePresence(newJSONW(), pr, tm), presenceDoc(pr, tm)},
			{"evidence", writeEvidence(newJSONW(), ev), evidenceDoc(ev)},
			{"error", newJSONW().open().key("code").str(ae.Code).key("message").str(ae.Message).close(), errorDoc(ae)},
			{"task detail", writeTask(newJSONW(), st, tk, tm), taskDetail(st, tk, tm)},
		} {
			if c.w.err != nil {
				t.Fatalf("%s: %v", c.name, c.w.err)
			}
			if want := typedJSON(t, c.doc); !bytes.Equal(c.w.b, want) {
				t.Errorf("%s:\n got %s\nwant %s", c.name, c.w.b, want)
			}
		}
	})
}

// BenchmarkAnswerEncoding measures why the hot answers keep a hand writer:
// the claim answer and the task detail, by hand and through encoding/json.
func BenchmarkAnswerEncoding(b *testing.B) {
	r := &projections.Reply{TaskID: "3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69", State: "CLAIMED", Version: 3, Generation: 1,
		ServerTime: 1700000000123, LeaseExpiresAt: 1700000030123, SessionID: "3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a6a",
		AuthorizationExpiresAt: 1700000300000, TokenOrigin: events.TokenClient}
	ct := &commands.ClaimedTask{Payload: taskPayloadExample, Revision: 1, CreatedAt: 1700000000000}
	rec := &projections.IdemRecord{DeviceID: "d", Reply: r}
	st := projections.New(projections.Config{})
	tk := &projections.Task{ID: r.TaskID, State: projections.StateClaimed, Version: 3, Revision: 1, Payload: taskPayloadExample,
		CreatedAt: 1700000000000, UpdatedAt: 1700000000123,
		Claim: &projections.Claim{Generation: 1, DeviceID: "d", SessionID: "s", LeaseExpiresAt: 1700000030123, TokenOrigin: events.TokenClient}}
	b.Run("claim/hand", func(b *testing.B) {
		for range b.N {
			w := writeClaim(newJSONW(), rec, ct, nil)
			jsonPool.Put(w)
		}
	})
	b.Run("claim/typed", func(b *testing.B) {
		for range b.N {
			if _, err := json.Marshal(claimDoc(rec, ct, nil)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("task/hand", func(b *testing.B) {
		for range b.N {
			w := writeTask(newJSONW(), st, tk, 1700000000500)
			jsonPool.Put(w)
		}
	})
	b.Run("task/typed", func(b *testing.B) {
		for range b.N {
			if _, err := json.Marshal(taskDetail(st, tk, 1700000000500)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
