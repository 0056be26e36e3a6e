package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"taskledger/commands"
	"taskledger/events"
	"taskledger/projections"
)

// The answers written by jsonw are, byte for byte, what c.JSON writes for
// the same answer as its wire type (the oracle: taskReplyDoc, claimDoc,
// presenceDoc, evidenceDoc, errorDoc), with and without ?pretty.
func TestAnswersAreWhatEncodingJSONWrites(t *testing.T) {
	strs := []string{"", "RUNNING", "a<b>&c", "<", ">", "&", `quote " and \ backslash`, "tab\tnew\nline\x01", "é ü 日本", "\u2028\u2029",
		"bad \xff utf-8", "3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69"}
	payloads := []string{`{"action":"bench","n":1}`, `{"a":"<script>&"}`, `{"a": 1, "b" :[1, 2]}`, `{"u":"é"}`, `[]`, `"x"`,
		`{"a":"\u2028"}`}
	times := []int64{0, 1, 1700000000123, 253402300799999}
	nums := []uint64{0, 1, 1 << 53, 1<<64 - 1}
	secret := bytes.Repeat([]byte{7}, 32)
	type doc struct {
		name   string
		oracle any
		w      func() *jsonw
	}
	var docs []doc
	for i, s := range strs {
		tm, n := times[i%len(times)], nums[i%len(nums)]
		r := &projections.Reply{TaskID: s, State: strs[(i+1)%len(strs)], Version: n, Generation: nums[(i+1)%len(nums)],
			ExecutionID: strs[(i+2)%len(strs)], ServerTime: tm, LeaseExpiresAt: times[(i+1)%len(times)],
			CancelRequested: i%2 == 0, Step: strs[(i+3)%len(strs)], SessionID: strs[(i+4)%len(strs)],
			AuthorizationExpiresAt: times[(i+2)%len(times)], TokenOrigin: []string{events.TokenClient, events.TokenServer}[i%2],
			AuthorizationID: s, Nonce: "n"}
		docs = append(docs, doc{"reply " + s, taskReplyDoc(r), func() *jsonw { return writeTaskReply(newJSONW(), r) }})
		for j, p := range payloads {
			ct := &commands.ClaimedTask{Payload: p, Revision: nums[j%len(nums)], CreatedAt: times[j%len(times)], HasImage: j%2 == 1,
				Takeover: []string{projections.TakeoverReclaim, projections.TakeoverManual, ""}[j%3]}
			rec := &projections.IdemRecord{DeviceID: strs[j%len(strs)], Reply: r}
			docs = append(docs, doc{"claim " + s + " " + p, claimDoc(rec, ct, secret),
				func() *jsonw { return writeClaim(newJSONW(), rec, ct, secret) }})
		}
		for _, missing := range [][]string{nil, {}, {s, "camera_ok"}} {
			pr := commands.PresenceReply{Claimable: i%2 == 1, MissingChecks: missing, PresenceExpiresAt: tm,
				ActiveTaskID: strs[(i+5)%len(strs)], ActiveTaskMismatch: i%3 == 0}
			docs = append(docs, doc{"presence " + s, presenceDoc(pr, times[(i+3)%len(times)]),
				func() *jsonw { return writePresence(newJSONW(), pr, times[(i+3)%len(times)]) }})
		}
		ev := projections.Evidence{ID: s, SHA256: strs[(i+1)%len(strs)], Size: int64(n >> 1), Kind: "screenshot", CapturedAt: tm}
		docs = append(docs, doc{"evidence " + s, evidenceDoc(ev), func() *jsonw { return writeEvidence(newJSONW(), ev) }})
		ae := newErr(http.StatusConflict, s, strs[(i+1)%len(strs)])
		docs = append(docs, doc{"error " + s, errorDoc(ae),
			func() *jsonw {
				return newJSONW().open().key("code").str(ae.Code).key("message").str(ae.Message).close()
			}})
	}
	e := echo.New()
	for _, query := range []string{"", "?pretty", "?x=1"} {
		for _, d := range docs {
			want, got := httptest.NewRecorder(), httptest.NewRecorder()
			if err := e.NewContext(httptest.NewRequest("GET", "/"+query, nil), want).JSON(201, d.oracle); err != nil {
				t.Fatalf("%s: the oracle does not encode: %v", d.name, err)
			}
			if err := d.w().send(e.NewContext(httptest.NewRequest("GET", "/"+query, nil), got), 201); err != nil {
				t.Fatalf("%s: %v", d.name, err)
			}
			if got.Body.String() != want.Body.String() || got.Code != want.Code ||
				got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
				t.Errorf("%s%s:\n got %d %s %q\nwant %d %s %q", d.name, query, got.Code, got.Header().Get("Content-Type"), got.Body,
					want.Code, want.Header().Get("Content-Type"), want.Body)
			}
		}
	}
}

// An invalid raw text is an error, as encoding/json's is.
func TestRawInvalidJSONIsAnError(t *testing.T) {
	for _, text := range []string{"", "{", `{"a":}`, "{\"a\": \xff}"} {
		w := newJSONW().open().key("payload").raw(text).close()
		rec := httptest.NewRecorder()
		err := w.send(echo.New().NewContext(httptest.NewRequest("GET", "/", nil), rec), 200)
		_, jerr := json.Marshal(map[string]any{"payload": json.RawMessage(text)})
		if err == nil || jerr == nil || rec.Body.Len() != 0 {
			t.Errorf("%q: err %v (encoding/json: %v), body %q", text, err, jerr, rec.Body)
		}
	}
	if !strings.Contains(string(newJSONW().str("<").b), `\u003c`) {
		t.Error("< not escaped")
	}
}

// writeTask writes, byte for byte, what c.JSON writes for taskDetail (the
// typed document the lists use) for tasks in every shape.
func TestTaskAnswerIsTheTaskDocument(t *testing.T) {
	st := projections.New(projections.Config{})
	st.Devices["d-revoked"] = &projections.Device{ID: "d-revoked", Status: projections.DeviceStatusRevoked}
	res := `{"ok":true,"n":[1,2]}`
	odd := `{"a": "<b>&", "c": 1}`
	var tasks []*projections.Task
	for i := range 48 {
		tk := &projections.Task{ID: []string{"3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69", "a<b>&\"c"}[i%2], CreatedAt: int64(i) * 1000,
			UpdatedAt: 1700000000123, State: projections.AllStates()[i%7], Version: uint64(i), Revision: uint64(i % 3),
			Payload: []string{taskPayloadExample, odd}[i%2], CancelRequested: i%3 == 0}
		if i%2 == 0 {
			tk.Image = &projections.Blob{SHA256: "ab", Size: int64(i)}
		}
		if i%3 != 2 {
			tk.Auth = &projections.Authorization{AuthBody: events.AuthBody{ID: "auth", Revision: uint64(i % 3), ExpiresAt: 1700000000000 + int64(i%2)*1e9},
				Status: []string{projections.AuthActive, "REVOKED"}[i%2], Takeover: []string{"", projections.TakeoverManual, projections.TakeoverReclaim}[i%3]}
		}
		if i%4 != 0 {
			tk.State = projections.StateClaimed
			tk.Claim = &projections.Claim{Generation: uint64(i), DeviceID: []string{"d1", "d-revoked"}[i%2], SessionID: "s",
				LeaseExpiresAt: 1700000000500 + int64(i%3)*1e6, TokenOrigin: events.TokenClient}
		}
		if i%5 == 1 {
			tk.Exec = &projections.Execution{ID: "x", StartedAt: 5, LeaseExpiresAt: 9, Step: []string{"", "working"}[i%2], LastSeenAt: 7,
				SoftLeaseExpiresAt: int64(i % 2 * 20), SoftSeenAt: int64(i % 2 * 8)}
		}
		if i%6 == 2 {
			tk.Result = &res
		}
		if i%7 == 3 {
			tk.Failure = &projections.Failure{ReasonCode: "r", Detail: "d<"}
		}
		if i%4 == 1 {
			tk.LateReports = []projections.LateReport{{At: 1, DeviceID: "d", Generation: 2, ExecutionID: "x", Outcome: commands.OpComplete, Result: res},
				{At: 2, DeviceID: "d", Generation: 3, ExecutionID: "y", Outcome: commands.OpFail, ReasonCode: "rc", Detail: "de"}}
		}
		if i%3 == 1 {
			tk.Evidence = []projections.Evidence{{ID: "e1", SHA256: "s", Size: 3, Kind: "screenshot", CapturedAt: 4}, {ID: "e2", Kind: "k"}}
		}
		if i%8 == 5 {
			tk.Recovery = &projections.Recovery{Decision: "requeue", Reason: "why", At: 11}
		}
		tasks = append(tasks, tk)
	}
	e := echo.New()
	for i, tk := range tasks {
		for _, now := range []int64{1700000000000, 1700000000600, 1800000000000} {
			want, got := httptest.NewRecorder(), httptest.NewRecorder()
			if err := e.NewContext(httptest.NewRequest("GET", "/", nil), want).JSON(200, taskDetail(st, tk, now)); err != nil {
				t.Fatal(err)
			}
			if err := writeTask(newJSONW(), st, tk, now).send(e.NewContext(httptest.NewRequest("GET", "/", nil), got), 200); err != nil {
				t.Fatal(err)
			}
			if got.Body.String() != want.Body.String() {
				t.Errorf("task %d at %d:\n got %s\nwant %s", i, now, got.Body, want.Body)
			}
		}
	}
}

const taskPayloadExample = `{"action":"open","url":"https://example.com/?a=1&b=2"}`
