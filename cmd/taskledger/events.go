package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"taskledger/api"
)

// `taskledger events`, and the --server forms of `history` and `export`:
// the log read through the API.

// eventsPage is one answer of GET /admin/events.
type eventsPage struct {
	Events    []json.RawMessage `json:"events"`
	NextAfter uint64            `json:"next_after"`
}

// pageEvents calls fn for every event after `after`, page by page, and
// returns the last seq seen.
func pageEvents(c *client, after uint64, fn func(json.RawMessage) error) (uint64, error) {
	for {
		var p eventsPage
		if err := c.getJSON("/admin/events?after="+strconv.FormatUint(after, 10)+"&limit=1000", &p); err != nil {
			return after, err
		}
		for _, e := range p.Events {
			if err := fn(e); err != nil {
				return after, err
			}
		}
		if len(p.Events) == 0 {
			return after, nil
		}
		after = p.NextAfter
	}
}

func writeNDJSON(w *bufio.Writer) func(json.RawMessage) error {
	return func(e json.RawMessage) error {
		var buf []byte
		buf = append(buf, e...)
		if _, err := w.Write(compactJSON(buf)); err != nil {
			return err
		}
		return w.WriteByte('\n')
	}
}

func compactJSON(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

func newEventsCmd(stdout, _ io.Writer) *cobra.Command {
	var r remoteFlags
	var after uint64
	var follow bool
	var poll time.Duration
	c := &cobra.Command{Use: "events [--after SEQ] [--follow]", Short: "the log as NDJSON through the API",
		Long: "Print the committed events after --after as NDJSON (one event a line, seq ascending), read through a running server. --follow then tails the server's event stream (GET /api/v1/admin/events/stream, Server-Sent Events), resuming after the last seq printed when the connection drops, until interrupted.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := r.client()
			if err != nil {
				return err
			}
			w := bufio.NewWriter(stdout)
			defer w.Flush()
			last, err := pageEvents(cl, after, writeNDJSON(w))
			if err != nil {
				return err
			}
			if err := w.Flush(); err != nil || !follow {
				return err
			}
			return followStream(cmd.Context(), cl, last, poll, w)
		}}
	r.register(c.Flags())
	c.Flags().Uint64Var(&after, "after", 0, "start after this seq")
	c.Flags().BoolVar(&follow, "follow", false, "keep printing new events as they are committed")
	c.Flags().DurationVar(&poll, "poll", time.Second, "with --follow: how long to wait before reconnecting a stream that ended")
	return c
}

// remoteExport is `export --server`: the log as NDJSON through the API.
func remoteExport(c *client, after uint64, stdout, stderr io.Writer) int {
	w := bufio.NewWriterSize(stdout, 1<<16)
	if _, err := pageEvents(c, after, writeNDJSON(w)); err != nil {
		w.Flush()
		return fail(stderr, "%v", err)
	}
	if err := w.Flush(); err != nil {
		return fail(stderr, "%v", err)
	}
	return 0
}

// remoteHistory prints GET /admin/tasks/{id}/events like the offline
// history.
func remoteHistory(c *client, id string, asJSON bool, stdout io.Writer) error {
	_, raw, err := c.do("GET", "/admin/tasks/"+url.PathEscape(id)+"/events", nil, "")
	if err != nil {
		return err
	}
	var doc struct {
		Events []*api.EventJSON `json:"events"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"task_id": id, "events": doc.Events})
	}
	fmt.Fprintf(w, "task %s: %d events\n", id, len(doc.Events))
	for _, e := range doc.Events {
		fmt.Fprintf(w, "seq %-8d %s  %-28s %-40s %s\n", e.Seq, e.At, e.Type+schemaSuffix(e.Schema), actorText(e.Actor), bodyText(e.Body))
	}
	return nil
}

// followStream prints the events of the server's event stream after seq
// as NDJSON until ctx ends, reconnecting (Last-Event-ID) after a dropped
// connection; a refusal (4xx) ends it with the API's error.
func followStream(ctx context.Context, cl *client, seq uint64, wait time.Duration, w *bufio.Writer) error {
	out := writeNDJSON(w)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cl.base+"/api/v1/admin/events/stream", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+cl.token)
		req.Header.Set("Last-Event-ID", strconv.FormatUint(seq, 10))
		stream := &http.Client{Transport: cl.http.Transport} // no timeout: the stream lasts
		res, err := stream.Do(req)
		if err == nil && res.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
			res.Body.Close()
			ae := &apiError{Status: res.StatusCode}
			_ = json.Unmarshal(b, ae)
			if res.StatusCode < 500 {
				return ae
			}
			err = ae
		}
		if err == nil {
			sc := bufio.NewScanner(res.Body)
			sc.Buffer(make([]byte, 64<<10), 8<<20)
			var id uint64
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "id: "):
					id, _ = strconv.ParseUint(line[4:], 10, 64)
				case strings.HasPrefix(line, "data: "):
					if err := out(json.RawMessage(line[6:])); err != nil {
						res.Body.Close()
						return err
					}
					if err := w.Flush(); err != nil {
						res.Body.Close()
						return err
					}
					seq = id
				}
			}
			res.Body.Close()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}
