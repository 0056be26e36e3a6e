package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testDevice  = "0b9a2a8e-6a43-4a6c-9f1e-0d6f2b1c3a4d"
	testToken   = "tldev_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	testSession = "5f0c8a51-7d1b-4c1e-8f6a-2b3c4d5e6f70"
	testKey     = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	testTask    = "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
	testExec    = "2d3e4f5a-6b7c-4d8e-9f0a-1b2c3d4e5f60"
	testClaimTk = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCdE"
)

// stub answers every request with the given status, headers and body and
// records the last request.
type stub struct {
	status int
	header map[string]string
	body   string
	hits   atomic.Int32
	last   atomic.Pointer[http.Request]
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	s.last.Store(r.Clone(context.Background()))
	for k, v := range s.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(s.status)
	_, _ = w.Write([]byte(s.body))
}

func newStub(t *testing.T, st *stub) *Client {
	t.Helper()
	srv := httptest.NewServer(st)
	t.Cleanup(srv.Close)
	c, err := New(Config{BaseURL: srv.URL, DeviceID: testDevice, Token: testToken, ReadTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdle)
	return c
}

var jsonCT = map[string]string{"Content-Type": "application/json"}

const goodClaim = `{"task":{"id":"1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","payload":{"a":[1,{"b":"c"}]},"revision":1,"created_at":"2026-11-30T08:15:00.123Z"},` +
	`"claim":{"generation":3,"session_id":"5f0c8a51-7d1b-4c1e-8f6a-2b3c4d5e6f70","lease_expires_at":"2026-11-30T08:25:00.123Z","authorization_expires_at":"2026-11-30T09:15:00.000Z"},` +
	`"state":"CLAIMED","version":7,"claim_generation":3,"server_time":"2026-11-30T08:15:00.123Z","lease_expires_at":"2026-11-30T08:25:00.123Z"}`

func claimCall() ClaimCall {
	return ClaimCall{Key: testKey, SessionID: testSession, ClaimToken: testClaimTk}
}

func TestClaimSuccessAndHeaders(t *testing.T) {
	st := &stub{status: 200, header: jsonCT, body: goodClaim}
	c := newStub(t, st)
	res, err := c.Claim(context.Background(), claimCall())
	if err != nil {
		t.Fatal(err)
	}
	if res.Claim == nil || res.Claim.TaskID != testTask || res.Claim.Generation != 3 || res.Claim.Version != 7 ||
		string(res.Claim.Payload) != `{"a":[1,{"b":"c"}]}` {
		t.Fatalf("claim %+v", res.Claim)
	}
	r := st.last.Load()
	want := map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json",
		"Idempotency-Key": testKey, "X-Claim-Token": testClaimTk}
	for k, v := range want {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if r.URL.Path != "/api/v1/device/tasks/claim-next" || r.Method != http.MethodPost {
		t.Errorf("request %s %s", r.Method, r.URL.Path)
	}
}

func TestClaimNoTask(t *testing.T) {
	c := newStub(t, &stub{status: 204, header: map[string]string{"Retry-After": "3"}})
	res, err := c.Claim(context.Background(), claimCall())
	if err != nil || !res.NoTask || res.RetryAfter != 3*time.Second {
		t.Fatalf("%+v %v", res, err)
	}
	// A 204 with a body or a malformed Retry-After is not definitive.
	for _, st := range []*stub{
		{status: 204, header: map[string]string{"Retry-After": "soon"}},
	} {
		c := newStub(t, st)
		if _, err := c.Claim(context.Background(), claimCall()); !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("%v", err)
		}
	}
}

// Every schema drift of a 2xx is an unknown outcome, never a success.
func TestClaimInvalid2xxIsUnknownOutcome(t *testing.T) {
	r := strings.NewReplacer
	cases := map[string]struct {
		body string
		hdr  map[string]string
	}{
		"unknown field":          {body: strings.Replace(goodClaim, `"state"`, `"extra":1,"state"`, 1)},
		"unknown nested field":   {body: strings.Replace(goodClaim, `"revision"`, `"x":1,"revision"`, 1)},
		"missing field":          {body: strings.Replace(goodClaim, `"version":7,`, ``, 1)},
		"duplicate key":          {body: strings.Replace(goodClaim, `"version":7,`, `"version":7,"version":7,`, 1)},
		"duplicate key by case":  {body: strings.Replace(goodClaim, `"version":7,`, `"version":7,"Version":7,`, 1)},
		"duplicate in payload":   {body: strings.Replace(goodClaim, `{"b":"c"}`, `{"b":"c","b":"d"}`, 1)},
		"uppercase uuid":         {body: strings.Replace(goodClaim, "1c2d3e4f-5a6b", "1C2D3E4F-5A6B", 1)},
		"not v4 uuid":            {body: strings.Replace(goodClaim, "1c2d3e4f-5a6b-4c7d", "1c2d3e4f-5a6b-1c7d", 1)},
		"time without ms":        {body: strings.Replace(goodClaim, `"created_at":"2026-11-30T08:15:00.123Z"`, `"created_at":"2026-11-30T08:15:00Z"`, 1)},
		"time with offset":       {body: strings.Replace(goodClaim, `"created_at":"2026-11-30T08:15:00.123Z"`, `"created_at":"2026-11-30T08:15:00.123+00:00"`, 1)},
		"invalid date":           {body: strings.Replace(goodClaim, `"created_at":"2026-11-30`, `"created_at":"2026-13-30`, 1)},
		"float integer":          {body: strings.Replace(goodClaim, `"version":7`, `"version":7.0`, 1)},
		"exponent integer":       {body: strings.Replace(goodClaim, `"version":7`, `"version":7e0`, 1)},
		"negative integer":       {body: strings.Replace(goodClaim, `"version":7`, `"version":-7`, 1)},
		"string integer":         {body: strings.Replace(goodClaim, `"version":7`, `"version":"7"`, 1)},
		"huge integer":           {body: strings.Replace(goodClaim, `"version":7`, `"version":99999999999999999999`, 1)},
		"wrong state":            {body: strings.Replace(goodClaim, `"state":"CLAIMED"`, `"state":"RUNNING"`, 1)},
		"generation differs":     {body: strings.Replace(goodClaim, `"claim_generation":3`, `"claim_generation":4`, 1)},
		"other session":          {body: r("5f0c8a51-7d1b", "6f0c8a51-7d1b").Replace(goodClaim)},
		"server token too":       {body: strings.Replace(goodClaim, `"generation":3,`, `"generation":3,"token":"`+strings.Repeat("ab", 32)+`",`, 1)},
		"payload not object":     {body: strings.Replace(goodClaim, `{"a":[1,{"b":"c"}]}`, `[1]`, 1)},
		"trailing data":          {body: goodClaim + `{}`},
		"truncated":              {body: goodClaim[:len(goodClaim)/2]},
		"not json":               {body: "<html>ok</html>"},
		"invalid utf-8":          {body: strings.Replace(goodClaim, `"b":"c"`, "\"b\":\"\xff\"", 1)},
		"empty":                  {body: ""},
		"wrong content type":     {body: goodClaim, hdr: map[string]string{"Content-Type": "text/plain"}},
		"wrong charset":          {body: goodClaim, hdr: map[string]string{"Content-Type": "application/json; charset=latin1"}},
		"no content type":        {body: goodClaim, hdr: map[string]string{"Content-Type": ""}},
		"image url for other id": {body: strings.Replace(goodClaim, `"revision":1`, `"reference_image_url":"/api/v1/device/tasks/x/reference-image","revision":1`, 1)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hdr := tc.hdr
			if hdr == nil {
				hdr = jsonCT
			}
			c := newStub(t, &stub{status: 200, header: hdr, body: tc.body})
			res, err := c.Claim(context.Background(), claimCall())
			if !errors.Is(err, ErrUnknownOutcome) || res.Claim != nil {
				t.Fatalf("got %+v, %v; want unknown outcome", res, err)
			}
			if strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), testClaimTk) {
				t.Fatalf("token in error: %v", err)
			}
		})
	}
}

func TestErrorAnswers(t *testing.T) {
	cases := []struct {
		name  string
		st    *stub
		check func(error) bool
	}{
		{"401", &stub{status: 401}, func(err error) bool { return errors.Is(err, ErrUnauthorized) }},
		{"503", &stub{status: 503, header: map[string]string{"Retry-After": "5"}}, func(err error) bool {
			var u *UnknownOutcomeError
			return errors.As(err, &u) && u.RetryAfter == 5*time.Second && u.Status == 503
		}},
		{"500", &stub{status: 500, header: jsonCT, body: `{"code":"internal","message":"x"}`}, func(err error) bool { return errors.Is(err, ErrUnknownOutcome) }},
		{"302", &stub{status: 302, header: map[string]string{"Location": "http://127.0.0.1:1/"}}, func(err error) bool { return errors.Is(err, ErrUnknownOutcome) }},
		{"418 unlisted", &stub{status: 418, header: jsonCT, body: `{"code":"teapot","message":"x"}`}, func(err error) bool { return errors.Is(err, ErrUnknownOutcome) }},
		{"409 definitive", &stub{status: 409, header: jsonCT, body: `{"code":"claim_requires_manual","message":"held"}`}, func(err error) bool {
			return IsCode(err, CodeClaimRequiresManual) && !errors.Is(err, ErrUnknownOutcome)
		}},
		{"409 malformed", &stub{status: 409, header: jsonCT, body: `{"code":"claim_requires_manual"}`}, func(err error) bool { return errors.Is(err, ErrUnknownOutcome) }},
		{"409 extra field", &stub{status: 409, header: jsonCT, body: `{"code":"device_not_ready","message":"x","x":1}`}, func(err error) bool { return errors.Is(err, ErrUnknownOutcome) }},
		{"code with wrong status", &stub{status: 400, header: jsonCT, body: `{"code":"lease_expired","message":"x"}`}, func(err error) bool { return errors.Is(err, ErrUnknownOutcome) }},
		{"unknown code, listed status", &stub{status: 403, header: jsonCT, body: `{"code":"new_thing","message":"x"}`}, func(err error) bool { return IsCode(err, "new_thing") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newStub(t, tc.st)
			_, err := c.Claim(context.Background(), claimCall())
			if err == nil || !tc.check(err) {
				t.Fatalf("got %v", err)
			}
			if strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), testClaimTk) {
				t.Fatalf("token in error: %v", err)
			}
		})
	}
}

const goodTask = `{"task_id":"1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","state":"RUNNING","version":8,"claim_generation":3,` +
	`"execution_id":"2d3e4f5a-6b7c-4d8e-9f0a-1b2c3d4e5f60","server_time":"2026-11-30T08:15:00.123Z","lease_expires_at":"2026-11-30T08:16:30.123Z","cancel_requested":false}`

func TestTaskAnswers(t *testing.T) {
	call := func(op Op) TaskCall {
		return TaskCall{Op: op, TaskID: testTask, Key: testKey, ClaimToken: testClaimTk, Generation: 3, Body: []byte(`{}`)}
	}
	c := newStub(t, &stub{status: 200, header: jsonCT, body: goodTask})
	res, err := c.Task(context.Background(), call(OpStart))
	if err != nil || res.ExecutionID != testExec || res.Version != 8 {
		t.Fatalf("%+v %v", res, err)
	}
	bad := map[string]struct {
		op   Op
		body string
	}{
		"start answer in another state":  {OpComplete, goodTask},
		"other task":                     {OpStart, strings.Replace(goodTask, "1c2d3e4f-5a6b", "1c2d3e4f-5a6c", 1)},
		"other generation":               {OpStart, strings.Replace(goodTask, `"claim_generation":3`, `"claim_generation":2`, 1)},
		"null lease on open task":        {OpStart, strings.Replace(goodTask, `"lease_expires_at":"2026-11-30T08:16:30.123Z"`, `"lease_expires_at":null`, 1)},
		"cancel_requested not bool":      {OpStart, strings.Replace(goodTask, `"cancel_requested":false`, `"cancel_requested":0`, 1)},
		"heartbeat without step":         {OpHeartbeat, goodTask},
		"start answer without execution": {OpStart, strings.Replace(goodTask, `"execution_id":"2d3e4f5a-6b7c-4d8e-9f0a-1b2c3d4e5f60",`, ``, 1)},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			c := newStub(t, &stub{status: 200, header: jsonCT, body: tc.body})
			if _, err := c.Task(context.Background(), call(tc.op)); !errors.Is(err, ErrUnknownOutcome) {
				t.Fatalf("want unknown outcome, got %v", err)
			}
		})
	}
	// A finished task may show a null lease.
	done := strings.NewReplacer(`"state":"RUNNING"`, `"state":"SUCCEEDED"`, `"lease_expires_at":"2026-11-30T08:16:30.123Z"`, `"lease_expires_at":null`).Replace(goodTask)
	c = newStub(t, &stub{status: 200, header: jsonCT, body: done})
	if res, err := c.Task(context.Background(), call(OpComplete)); err != nil || !res.LeaseExpiresAt.IsZero() {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestLimitsAndTimeouts(t *testing.T) {
	// An oversized request body is refused before anything is sent.
	st := &stub{status: 200, header: jsonCT, body: goodTask}
	c := newStub(t, st)
	big := TaskCall{Op: OpComplete, TaskID: testTask, Key: testKey, ClaimToken: testClaimTk, Generation: 3,
		Body: []byte(`{"x":"` + strings.Repeat("a", MaxJSONRequest) + `"}`)}
	if _, err := c.Task(context.Background(), big); !errors.Is(err, ErrInvalidCall) || st.hits.Load() != 0 {
		t.Fatalf("%v, hits %d", err, st.hits.Load())
	}
	// An oversized answer is an unknown outcome.
	c = newStub(t, &stub{status: 200, header: jsonCT, body: `{"x":"` + strings.Repeat("a", MaxJSONResponse) + `"}`})
	if _, err := c.Claim(context.Background(), claimCall()); !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("%v", err)
	}
	// A server that never answers: the read timeout gives an unknown outcome.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c2, err := New(Config{BaseURL: srv.URL, DeviceID: testDevice, Token: testToken, ReadTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.CloseIdle()
	if _, err := c2.Claim(context.Background(), claimCall()); !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("%v", err)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	target := &stub{status: 200, header: jsonCT, body: goodClaim}
	tsrv := httptest.NewServer(target)
	defer tsrv.Close()
	c := newStub(t, &stub{status: 307, header: map[string]string{"Location": tsrv.URL + "/api/v1/device/tasks/claim-next"}})
	_, err := c.Claim(context.Background(), claimCall())
	if !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("%v", err)
	}
	if target.hits.Load() != 0 {
		t.Fatal("redirect was followed")
	}
}
