// Package faultproxy is a test HTTP proxy between the device client and a
// server that injects faults per request: the server commits but the
// answer is dropped, a truncated or schema-drifted body, a 503, a stall
// until the client times out, a redirect.
package faultproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
)

// Action is what the proxy does with one request.
type Action int

const (
	// Pass forwards and answers faithfully.
	Pass Action = iota
	// Drop forwards (the server commits) and closes the connection without
	// an answer.
	Drop
	// Truncate forwards and answers with half the body (Content-Length
	// of the whole).
	Truncate
	// Drift forwards and answers with an unknown field added to the body.
	Drift
	// Unavailable answers 503 with Retry-After without forwarding.
	Unavailable
	// Stall forwards and then answers nothing until the client gives up.
	Stall
	// Redirect answers 307 to the same URL without forwarding.
	Redirect
)

// Seen is one request as the proxy saw it.
type Seen struct {
	Method, Path, Key, ClaimToken string
	Action                        Action
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	URL    string
	srv    *httptest.Server
	target string
	plan   func(n int, r *http.Request) Action
	mu     sync.Mutex
	seen   []Seen
	hc     *http.Client
}

// New starts a proxy to target; plan decides per request (n counts from 0).
func New(target string, plan func(n int, r *http.Request) Action) *Proxy {
	p := &Proxy{target: target, plan: plan, hc: &http.Client{Transport: &http.Transport{Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	return p
}

// Close stops the proxy.
func (p *Proxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
	p.hc.CloseIdleConnections()
}

// Seen returns the requests so far.
func (p *Proxy) Seen() []Seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Seen(nil), p.seen...)
}

// SetPlan replaces the plan.
func (p *Proxy) SetPlan(plan func(n int, r *http.Request) Action) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan = plan
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	n := len(p.seen)
	a := Pass
	if p.plan != nil {
		a = p.plan(n, r)
	}
	p.seen = append(p.seen, Seen{Method: r.Method, Path: r.URL.Path, Key: r.Header.Get("Idempotency-Key"),
		ClaimToken: r.Header.Get("X-Claim-Token"), Action: a})
	p.mu.Unlock()
	switch a {
	case Unavailable:
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case Redirect:
		w.Header().Set("Location", p.target+r.URL.Path)
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.hc.Do(req)
	if err != nil {
		hijackClose(w)
		return
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch a {
	case Drop:
		hijackClose(w)
		return
	case Stall:
		<-r.Context().Done()
		return
	case Truncate:
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
			resp.StatusCode, http.StatusText(resp.StatusCode), resp.Header.Get("Content-Type"), len(data))
		buf.Write(data[:len(data)/2])
		buf.Flush()
		conn.Close()
		return
	case Drift:
		var m map[string]any
		if json.Unmarshal(data, &m) == nil {
			m["schema_drift"] = true
			data, _ = json.Marshal(m)
		}
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
}

func hijackClose(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		conn.Close()
	}
}
