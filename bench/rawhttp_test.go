package bench

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// countedServer starts h and counts the connections it accepts.
func countedServer(h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	return srv, &conns
}

func rawFor(t *testing.T, srv *httptest.Server) *rawClient {
	t.Helper()
	h := NewHTTP(srv.URL, "", 1)
	if h.raw == nil {
		t.Fatalf("no raw client for %s", srv.URL)
	}
	t.Cleanup(h.Close)
	return h.raw
}

// The raw client reads answers with a length, chunked or empty, sends the
// headers and body given, and keeps one connection for a run of requests.
func TestRawClientReadsEveryAnswerShape(t *testing.T) {
	srv, conns := countedServer(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/api/v1/echo":
			w.Header().Set("X-Got", r.Header.Get("Idempotency-Key")+"|"+r.Header.Get("Content-Type"))
			w.WriteHeader(201)
			w.Write(b)
		case "/api/v1/chunked":
			w.Write([]byte("part one, "))
			w.(http.Flusher).Flush()
			w.Write([]byte(strings.Repeat("x", 5000)))
		case "/api/v1/empty":
			w.WriteHeader(http.StatusNoContent)
		}
	})
	defer srv.Close()
	rc := rawFor(t, srv)
	var buf bytes.Buffer
	for range 3 {
		status, err := rc.post("/api/v1/echo", []string{"Idempotency-Key", "k1", "Content-Type", "application/json"}, []byte(`{"a":1}`), &buf)
		if err != nil || status != 201 || buf.String() != `{"a":1}` {
			t.Fatalf("echo: %d %q %v", status, buf.String(), err)
		}
		status, err = rc.post("/api/v1/chunked", nil, nil, &buf)
		if err != nil || status != 200 || buf.String() != "part one, "+strings.Repeat("x", 5000) {
			t.Fatalf("chunked: %d %d bytes %v", status, buf.Len(), err)
		}
		status, err = rc.post("/api/v1/empty", nil, nil, &buf)
		if err != nil || status != 204 || buf.Len() != 0 {
			t.Fatalf("empty: %d %q %v", status, buf.String(), err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 9 requests in a row, want 1", n)
	}
}

// A connection the server closes (Connection: close, or closed while
// idle) is not used again; a request sent on a stale one goes again once
// on a new connection.
func TestRawClientLeavesClosedConnections(t *testing.T) {
	srv, conns := countedServer(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/close" {
			w.Header().Set("Connection", "close")
		}
		w.Write([]byte("ok"))
	})
	defer srv.Close()
	rc := rawFor(t, srv)
	var buf bytes.Buffer
	post := func(path string) {
		t.Helper()
		if status, err := rc.post(path, nil, nil, &buf); err != nil || status != 200 || buf.String() != "ok" {
			t.Fatalf("%s: %d %q %v", path, status, buf.String(), err)
		}
	}
	post("/api/v1/close")
	post("/api/v1/x")
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections after a Connection: close answer, want 2", n)
	}
	srv.CloseClientConnections() // the idle connection goes stale
	post("/api/v1/x")
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections after the stale one, want 3", n)
	}
}

// An answer that is not HTTP is an error, and its connection is dropped.
func TestRawClientRefusesMalformedAnswers(t *testing.T) {
	for _, answer := range []string{"garbage\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b := make([]byte, 4096)
			c.Read(b)
			c.Write([]byte(answer))
			c.Close()
		}()
		rc := &rawClient{addr: ln.Addr().String(), host: "h"}
		var buf bytes.Buffer
		_, err = rc.post("/", nil, nil, &buf)
		if err == nil || !(errors.Is(err, errAnswer) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			t.Errorf("%q: %v", answer, err)
		}
		if len(rc.idle) != 0 {
			t.Errorf("%q: the connection was kept", answer)
		}
		ln.Close()
	}
}
