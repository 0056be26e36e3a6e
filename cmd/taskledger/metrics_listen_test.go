package main_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// get answers the status and body of a plain GET.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// serve --metrics-listen serves /metrics on its own address (and nothing
// else there); the main listener then answers /metrics 404. Without it,
// /metrics stays on the main listener.
func TestServeMetricsOnTheirOwnListener(t *testing.T) {
	s := startServer(t, "", "--metrics-listen", "127.0.0.1:0")
	line, _ := s.Proc.WaitLine(t, 0, "metrics on http://")
	addr := strings.TrimSuffix(strings.TrimSpace(line[strings.Index(line, "http://"):]), "/metrics")
	s.NewTask(t, map[string]any{"k": 1})
	status, body := get(t, addr+"/metrics")
	if status != http.StatusOK || !strings.Contains(body, "taskledger_ready 1") || !strings.Contains(body, `taskledger_commands_total{outcome="ok",type="create-task"} 1`) {
		t.Fatalf("metrics listener /metrics: %d\n%.400s", status, body)
	}
	if status, _ := get(t, addr+"/api/v1/admin/tasks"); status != http.StatusNotFound {
		t.Fatalf("the metrics listener serves the API: %d", status)
	}
	if status, body := get(t, s.URL+"/metrics"); status != http.StatusNotFound || !strings.Contains(body, "not_found") {
		t.Fatalf("the main listener still serves /metrics: %d %s", status, body)
	}
	if status, _ := get(t, s.URL+"/readyz"); status != http.StatusOK {
		t.Fatalf("readyz on the main listener: %d", status)
	}

	// The default: on the main listener, as before.
	d := startServer(t, "")
	if status, body := get(t, d.URL+"/metrics"); status != http.StatusOK || !strings.Contains(body, "taskledger_cluster_role") {
		t.Fatalf("default /metrics: %d", status)
	}
}
