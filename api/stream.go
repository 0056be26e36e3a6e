package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"taskledger/commands"
	"taskledger/ledger"
)

// Stream limits.
const (
	// streamChunk bounds the events one read of the log sends before the
	// stream looks for new commits again (and its memory per client).
	streamChunk = 256
	// streamChunkBytes also ends a chunk: 256 events with large payloads
	// stay about 1 MiB per client.
	streamChunkBytes = 1 << 20
	// StreamHeartbeat is how often an idle stream sends a comment, so
	// proxies and clients see a live connection.
	StreamHeartbeat = 15 * time.Second
	// streamWriteTimeout cuts off a client that does not read: a slow
	// consumer is disconnected, it never holds the log or the sequencer.
	streamWriteTimeout = 30 * time.Second
)

// Notifier wakes event streams after a commit. Notify never blocks: it
// closes the channel the waiters hold and makes a new one.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewNotifier returns a notifier.
func NewNotifier() *Notifier { return &Notifier{ch: make(chan struct{})} }

// Notify wakes every stream waiting for a commit.
func (n *Notifier) Notify() {
	n.mu.Lock()
	close(n.ch)
	n.ch = make(chan struct{})
	n.mu.Unlock()
}

// wait returns a channel closed by the next Notify.
// Wait returns a channel closed at the next Notify.
func (n *Notifier) Wait() <-chan struct{} { return n.wait() }

func (n *Notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

// eventStream: GET /admin/events/stream?after=SEQ — Server-Sent Events of
// committed events, each `id: <seq>`, `event: <type>`, `data: <the same
// document as one item of GET /admin/events>`. A Last-Event-ID header
// (a reconnecting EventSource) resumes after that seq and wins over
// `after`. Idle streams get a comment every StreamHeartbeat. The stream
// reads the log itself (committed events only) after being woken by a
// commit, so no buffer grows per client and a client that stops reading
// is disconnected after streamWriteTimeout.
func (s *Server) eventStream(c echo.Context) error {
	q := c.QueryParams()
	for k := range q {
		if k != "after" {
			return invalid("unknown query parameter %q", k)
		}
	}
	after, err := queryInt(q.Get("after"), 0, 0, 1<<62)
	if err != nil {
		return invalid("after must be a non-negative integer")
	}
	if h := c.Request().Header.Values("Last-Event-ID"); len(h) > 0 && !(len(h) == 1 && h[0] == "") { // empty: none
		v, err := strconv.ParseUint(h[0], 10, 62)
		if len(h) > 1 || err != nil {
			return invalid("Last-Event-ID must be one seq this stream sent")
		}
		after = int64(v)
	}
	if s.notify == nil {
		return commands.ErrUnavailable
	}
	w := c.Response()
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w.Writer)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) // tl:wallclock (a network deadline, not ledger time)
		if _, err := w.Write(b); err != nil {
			return false
		}
		w.Flush()
		return true
	}
	if !write([]byte(": taskledger event stream\nretry: 2000\n\n")) {
		return nil
	}
	ctx := c.Request().Context()
	cursor := uint64(after)
	var buf bytes.Buffer
	for {
		woken := s.notify.wait() // taken before reading: a commit after the read wakes us
		for {
			buf.Reset()
			n := 0
			err := s.events.Range(cursor, func(e *ledger.Event) error {
				doc, err := eventDoc(e, true)
				if err != nil {
					return err
				}
				data, err := json.Marshal(doc)
				if err != nil {
					return err
				}
				buf.WriteString("id: " + strconv.FormatUint(e.Seq, 10) + "\nevent: " + string(e.Type) + "\ndata: ")
				buf.Write(data)
				buf.WriteString("\n\n")
				cursor = e.Seq
				n++
				if n == streamChunk || buf.Len() >= streamChunkBytes {
					return ledger.ErrStop
				}
				return nil
			})
			if err != nil {
				s.log.Warn().Err(err).Msg("event stream: reading the log failed")
				return nil
			}
			if n > 0 && !write(buf.Bytes()) {
				return nil
			}
			if n < streamChunk && buf.Len() < streamChunkBytes {
				break
			}
		}
		timer := time.NewTimer(StreamHeartbeat) // tl:wallclock (keep-alive comments only)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-s.done:
			timer.Stop()
			return nil
		case <-woken:
			timer.Stop()
		case <-timer.C:
			if !write([]byte(": keep-alive\n\n")) {
				return nil
			}
		}
	}
}
