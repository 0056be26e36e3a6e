package main

import (
	"net/http"
	"sync/atomic"
)

// startingHandler is what a cluster node's listener answers while the node
// waits for its ledger (the NATS servers, the stream and buckets): /healthz
// 200 (the process lives), /readyz and every other route 503 with
// Retry-After: 1 (nothing can be read or acknowledged yet). Once the node
// is open, every request goes to its handler.
type startingHandler struct {
	node atomic.Pointer[http.Handler]
}

// open hands every later request to h.
func (s *startingHandler) open(h http.Handler) { s.node.Store(&h) }

func (s *startingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.node.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("{\"status\":\"ok\"}\n"))
		return
	}
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
}
