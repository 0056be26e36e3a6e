package api_test

import (
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

// The console page is served at /console/ without data in it; its API
// calls carry the operator's admin token like any other client.
func TestConsoleServesPageWithoutData(t *testing.T) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	id := n.CreateTask(map[string]any{"secret_marker": "x"})
	r := n.Do("GET", "/console/", "", nil, nil)
	nodetest.Must(t, r, 200)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("content type %q", ct)
	}
	body := string(r.Body)
	for _, leak := range []string{id, d.ID, d.Token, n.AdminToken, "secret_marker"} {
		if strings.Contains(body, leak) {
			t.Fatalf("console page contains %q", leak)
		}
	}
	if !strings.Contains(body, "/api/v1/admin") || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatal("console page does not call the admin API or is cacheable")
	}
}
