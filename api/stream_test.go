package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// sseEvent is one event of the stream.
type sseEvent struct {
	ID, Type string
	Doc      map[string]any
}

// sseClient reads an admin event stream; events arrive on a channel, and a
// guard ends the test instead of hanging when an event never comes.
type sseClient struct {
	t      *testing.T
	res    *http.Response
	events chan sseEvent
	cancel context.CancelFunc
}

func openStream(t *testing.T, n *nodetest.Node, query string, headers map[string]string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", n.URL+nodetest.AdminPath+"/events/stream"+query, nil)
	req.Header.Set("Authorization", "Bearer "+n.AdminToken)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := n.HTTP.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("stream: %v", err)
	}
	c := &sseClient{t: t, res: res, events: make(chan sseEvent, 64), cancel: cancel}
	t.Cleanup(c.close)
	if res.StatusCode != http.StatusOK {
		return c
	}
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.ID != "" {
					c.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Type = line[7:]
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[6:]), &ev.Doc)
			}
		}
	}()
	return c
}

func (c *sseClient) close() {
	c.cancel()
	c.res.Body.Close()
}

// next returns the next event, failing the test if none comes within a
// generous guard (a hang guard, not a timing assertion).
func (c *sseClient) next() sseEvent {
	c.t.Helper()
	select {
	case ev, ok := <-c.events:
		if !ok {
			c.t.Fatal("stream ended")
		}
		return ev
	case <-time.After(20 * time.Second):
		c.t.Fatal("no event on the stream")
	}
	return sseEvent{}
}

// The stream sends every committed event in order, each as the document
// of GET /admin/events with id = seq, and then each new commit as it
// happens.
func TestEventStreamSendsCommittedEventsInOrder(t *testing.T) {
	n := nodetest.Start(t)
	a := n.CreateTask(nil)
	head := n.Head()
	s := openStream(t, n, "?after=0", nil)
	if s.res.StatusCode != http.StatusOK || !strings.HasPrefix(s.res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream answered %d %q", s.res.StatusCode, s.res.Header.Get("Content-Type"))
	}
	page := n.Do("GET", nodetest.AdminPath+"/events?after=0&limit=1000", n.AdminToken, nil, nil).JSON()["events"].([]any)
	for i := uint64(1); i <= head; i++ {
		ev := s.next()
		want := page[i-1].(map[string]any)
		if ev.ID != strconv.FormatUint(i, 10) || ev.Type != want["type"] || nodetest.Num(ev.Doc, "seq") != i ||
			ev.Doc["stream"] != want["stream"] {
			t.Fatalf("event %d: %+v, want %v", i, ev, want)
		}
	}
	// A new commit reaches the open stream.
	d := n.ReadyDevice(t) // device.registered
	ev := s.next()
	if ev.Type != "device.registered" || ev.ID != strconv.FormatUint(head+1, 10) {
		t.Fatalf("live event: %+v", ev)
	}
	nodetest.Must(t, n.Cancel(a), http.StatusOK)
	if ev := s.next(); ev.Type != "task.canceled" || ev.Doc["stream"] != "task/"+a {
		t.Fatalf("live cancel: %+v", ev)
	}
	_ = d
}

// Last-Event-ID resumes after the seq it names (and wins over after=).
func TestEventStreamResumesFromLastEventID(t *testing.T) {
	n := nodetest.Start(t)
	n.CreateTask(nil)
	n.CreateTask(nil)
	head := n.Head()
	s := openStream(t, n, "?after=0", map[string]string{"Last-Event-ID": strconv.FormatUint(head-1, 10)})
	if ev := s.next(); ev.ID != strconv.FormatUint(head, 10) {
		t.Fatalf("resumed at %s, want %d", ev.ID, head)
	}
}

// Bad requests are refused before the stream starts; the stream needs an
// admin token.
func TestEventStreamRefusals(t *testing.T) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	nodetest.MustUnauthorized(t, n.Do("GET", nodetest.AdminPath+"/events/stream", "", nil, nil))
	for _, tc := range []struct {
		name, query, token string
		headers            map[string]string
		status             int
		code               string
	}{
		{"device token", "", d.Token, nil, http.StatusForbidden, "wrong_credential_kind"},
		{"bad after", "?after=x", n.AdminToken, nil, http.StatusBadRequest, "invalid_request"},
		{"negative after", "?after=-1", n.AdminToken, nil, http.StatusBadRequest, "invalid_request"},
		{"unknown parameter", "?since=1", n.AdminToken, nil, http.StatusBadRequest, "invalid_request"},
		{"bad Last-Event-ID", "", n.AdminToken, map[string]string{"Last-Event-ID": "abc"}, http.StatusBadRequest, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := n.Do("GET", nodetest.AdminPath+"/events/stream"+tc.query, tc.token, nil, tc.headers)
			nodetest.MustError(t, r, tc.status, tc.code)
		})
	}
}

// Shutting down ends every open stream (the server's graceful shutdown
// does not wait on them), and an empty Last-Event-ID is no resume point.
func TestEventStreamEndsAtShutdown(t *testing.T) {
	n := nodetest.Start(t)
	n.CreateTask(nil)
	s := openStream(t, n, "", map[string]string{"Last-Event-ID": ""})
	if s.res.StatusCode != http.StatusOK {
		t.Fatalf("stream answered %d", s.res.StatusCode)
	}
	if ev := s.next(); ev.ID != "1" {
		t.Fatalf("first event %+v", ev)
	}
	n.API.Stopping()
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the stream did not end at shutdown")
		}
	}
}
