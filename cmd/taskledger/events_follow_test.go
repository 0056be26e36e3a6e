package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// lockedBuffer is a buffer the follower writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.b.String()), "\n")
}

// events --follow tails the server's event stream: events committed after
// it started arrive as NDJSON lines in seq order, the same documents as
// GET /admin/events, and it ends when its context does.
func TestEventsFollowTailsTheStream(t *testing.T) {
	n := nodetest.Start(t)
	n.CreateTask(nil)
	head := n.Head()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(n.AdminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	r := remoteFlags{server: n.URL, tokenFile: tok}
	cl, err := r.client()
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- followStream(ctx, cl, head, 50*time.Millisecond, bufio.NewWriter(&out)) }()
	a, b := n.CreateTask(nil), n.CreateTask(nil)
	deadline := time.After(20 * time.Second) // a hang guard, not a timing assertion
	for len(out.lines()) < 2 || out.lines()[0] == "" {
		select {
		case <-deadline:
			t.Fatalf("followed: %q", out.lines())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("follow ended with %v", err)
	}
	for i, want := range []string{a, b} {
		var ev struct {
			Seq    uint64 `json:"seq"`
			Stream string `json:"stream"`
			Type   string `json:"type"`
		}
		if err := json.Unmarshal([]byte(out.lines()[i]), &ev); err != nil || ev.Seq != head+uint64(i)+1 ||
			ev.Stream != "task/"+want || ev.Type != "task.created" {
			t.Fatalf("line %d: %q (%v)", i, out.lines()[i], err)
		}
	}
}

// A refused token ends the follower at once with the API's answer.
func TestEventsFollowRefusedToken(t *testing.T) {
	n := nodetest.Start(t)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tladm_wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := remoteFlags{server: n.URL, tokenFile: tok}
	cl, err := r.client()
	if err != nil {
		t.Fatal(err)
	}
	err = followStream(context.Background(), cl, 0, time.Millisecond, bufio.NewWriter(&bytes.Buffer{}))
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("got %v, want a 401 apiError", err)
	}
}
