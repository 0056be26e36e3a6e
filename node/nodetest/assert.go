package nodetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
)

// MustError fails the test unless r is an error answer with exactly the
// status and code and the body {code, message}.
func MustError(t testing.TB, r *Resp, status int, code string) {
	t.Helper()
	Must(t, r, status, code)
	if m := r.JSON(); len(m) != 2 || Str(m, "message") == "" {
		t.Fatalf("error body must be {code, message}: %s", r.Body)
	}
}

// MustUnchanged fails the test if the head moved since before (something
// was appended).
func (n *Node) MustUnchanged(t testing.TB, before uint64) {
	t.Helper()
	if h := n.Head(); h != before {
		t.Fatalf("head moved from %d to %d: something was appended", before, h)
	}
}

// MustRefuse fails the test unless r is an error answer with the status
// and code and the head did not move since before.
func (n *Node) MustRefuse(t testing.TB, before uint64, r *Resp, status int, code string) {
	t.Helper()
	MustError(t, r, status, code)
	n.MustUnchanged(t, before)
}

// MustUnauthorized fails the test unless r is the 401 answer: empty body
// and WWW-Authenticate: Bearer.
func MustUnauthorized(t testing.TB, r *Resp) {
	t.Helper()
	if r.Status != http.StatusUnauthorized || len(r.Body) != 0 || r.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("want 401 with empty body and WWW-Authenticate: Bearer, got %d %q (WWW-Authenticate %q)",
			r.Status, r.Body, r.Header.Get("WWW-Authenticate"))
	}
}

// MustReplay fails the test unless again replays first: the original
// status and body, with the Idempotent-Replayed header (absent on first).
func MustReplay(t testing.TB, first, again *Resp) {
	t.Helper()
	if again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay lacks Idempotent-Replayed: true (status %d %s)", again.Status, again.Body)
	}
	if first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first answer carries Idempotent-Replayed")
	}
	if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay differs:\nfirst  %d %s\nreplay %d %s", first.Status, first.Body, again.Status, again.Body)
	}
}

// MustHoldNoSecret fails the test if doc contains any of the secrets or
// their SHA-256 in hex (case-insensitive).
func MustHoldNoSecret(t testing.TB, what string, doc []byte, secrets ...string) {
	t.Helper()
	s := strings.ToLower(string(doc))
	for _, sec := range secrets {
		sum := sha256.Sum256([]byte(sec))
		for _, needle := range []string{sec, hex.EncodeToString(sum[:])} {
			if strings.Contains(s, strings.ToLower(needle)) {
				t.Fatalf("%s contains a secret (%s…): %s", what, needle[:min(8, len(needle))], doc)
			}
		}
	}
}
