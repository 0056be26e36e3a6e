package agent

import (
	"strings"
	"testing"
	"time"

	"taskledger/client"
)

// The running heartbeat comes at a third of the lease the answer shows,
// or sooner when --heartbeat says so, never later.
func TestHeartbeatInterval(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	res := client.TaskResult{ServerTime: now, LeaseExpiresAt: now.Add(90 * time.Second)}
	cases := []struct {
		flag, want time.Duration
	}{
		{0, 30 * time.Second},
		{5 * time.Second, 5 * time.Second},
		{time.Minute, 30 * time.Second},
	}
	for _, c := range cases {
		r := &runner{heartbeat: c.flag}
		if got := r.interval(res); got != c.want {
			t.Errorf("--heartbeat %v: %v, want %v", c.flag, got, c.want)
		}
	}
}

func TestResultJSON(t *testing.T) {
	good := map[string]string{`{"a": 1}` + "\n": `{"a":1}`, ` { } `: `{}`}
	for in, want := range good {
		got, err := resultJSON([]byte(in), false)
		if err != nil || string(got) != want {
			t.Errorf("%q: %s %v", in, got, err)
		}
	}
	for _, in := range []string{"", "[1]", "1", `{"a":`, "not json", `{"a":"` + strings.Repeat("a", 3000) + `"}`} {
		if _, err := resultJSON([]byte(in), false); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	if _, err := resultJSON([]byte(`{}`), true); err == nil {
		t.Error("overflow accepted")
	}
}
