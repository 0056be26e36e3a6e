package api_test

import (
	"net/http"
	"testing"

	"taskledger/node/nodetest"
)

// Every answer carries X-Content-Type-Options: nosniff — 2xx JSON, error
// bodies, Echo's 404 and 405, 401, the operational routes, and the 503s of
// the middleware during shutdown — so no browser renders a JSON answer as
// HTML.
func TestEveryAnswerCarriesNosniff(t *testing.T) {
	n := nodetest.Start(t)
	id := n.CreateTask(nil)
	admin := nodetest.AdminPath
	for _, tc := range []struct {
		method, path, token string
		body                any
		status              int
	}{
		{"GET", "/healthz", "", nil, http.StatusOK},
		{"GET", "/readyz", "", nil, http.StatusOK},
		{"GET", "/metrics", "", nil, http.StatusOK},
		{"GET", "/api/v1/openapi.json", "", nil, http.StatusOK},
		{"GET", admin + "/tasks/" + id, n.AdminToken, nil, http.StatusOK},
		{"POST", admin + "/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"n": 1}}, http.StatusCreated},
		{"POST", admin + "/tasks", n.AdminToken, []byte(`{"payload":`), http.StatusBadRequest},
		{"GET", admin + "/tasks/" + nodetest.NewID(), n.AdminToken, nil, http.StatusNotFound},
		{"GET", admin + "/tasks", "", nil, http.StatusUnauthorized},
		{"GET", "/api/v1/no-such-route", "", nil, http.StatusNotFound},
		{"DELETE", "/healthz", "", nil, http.StatusMethodNotAllowed},
		{"GET", "/console/", "", nil, http.StatusOK},
	} {
		r := n.Do(tc.method, tc.path, tc.token, tc.body, nil)
		if r.Status != tc.status {
			t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, r.Status, r.Body, tc.status)
		}
		if got := r.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q, want nosniff", tc.method, tc.path, r.Status, got)
		}
	}
	n.API.Stopping()
	for _, path := range []string{admin + "/tasks/" + id, "/readyz"} {
		r := n.Do("GET", path, n.AdminToken, nil, nil)
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s while stopping: %d, X-Content-Type-Options %q, want 503 with nosniff",
				path, r.Status, r.Header.Get("X-Content-Type-Options"))
		}
	}
}
