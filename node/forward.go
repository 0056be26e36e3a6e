package node

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// Forwarding: a device or operator may talk to any node. On a follower,
// every command (an /api/ request that is not a GET or HEAD) is proxied,
// unchanged, to the sequencer's advertised URL and its answer relayed (the
// device client never follows redirects, so none is sent); reads are
// served from the follower's projections once they reach the stream's
// head (readBarrier). While no sequencer is known, or the sequencer cannot
// be reached, the answer is 503 with Retry-After (api.md: empty body) and
// the command was not acknowledged: a retry with the same idempotency key
// is decided once.

// ForwardedHeader marks a request a node forwarded: the receiver decides
// it or answers 503, never forwards it again (no loop between two nodes
// that each think the other sequences).
const ForwardedHeader = "Taskledger-Forwarded-By"

// forwarder holds one reverse proxy per sequencer URL.
type forwarder struct {
	logger    zerolog.Logger
	transport http.RoundTripper
	self      string
	mu        sync.Mutex
	proxies   map[string]*httputil.ReverseProxy
}

func newForwarder(t http.RoundTripper, self string, logger zerolog.Logger) (*forwarder, error) {
	if t == nil {
		t = http.DefaultTransport.(*http.Transport).Clone()
	}
	if _, err := url.Parse(self); err != nil {
		return nil, err
	}
	return &forwarder{logger: logger, transport: t, self: self, proxies: map[string]*httputil.ReverseProxy{}}, nil
}

func (f *forwarder) proxy(target string) (*httputil.ReverseProxy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.proxies[target]; p != nil {
		return p, nil
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(ForwardedHeader, f.self)
		},
		Transport: f.transport,
		// The sequencer died or is unreachable mid-request: the command
		// may or may not have committed, it is not acknowledged.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			f.logger.Debug().Err(err).Str("sequencer", target).Msg("503: forwarding failed")
			unavailable(w)
		},
	}
	f.proxies[target] = p
	return p, nil
}

func unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
}

// Handler is the node's HTTP handler: the API, behind the cluster's
// forwarding and read barrier on a cluster node.
func (n *Node) Handler() http.Handler {
	if n.cluster == nil {
		return n.API.Handler()
	}
	return n.cluster.handler(n.API.Handler())
}

func (c *clusterLink) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			if err := c.readBarrier(r.Context()); err != nil {
				c.logger.Debug().Err(err).Msg("503: the read barrier was not reached")
				unavailable(w)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if c.sequencing() {
			next.ServeHTTP(w, r)
			return
		}
		c.mu.Lock()
		target := c.leader.URL
		c.mu.Unlock()
		if target == "" || target == c.self.URL || r.Header.Get(ForwardedHeader) != "" {
			c.logger.Debug().Str("sequencer", target).Bool("forwarded", r.Header.Get(ForwardedHeader) != "").
				Msg("503: no sequencer to forward to")
			unavailable(w)
			return
		}
		p, err := c.fwd.proxy(target)
		if err != nil {
			unavailable(w)
			return
		}
		p.ServeHTTP(w, r)
	})
}
