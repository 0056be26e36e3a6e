package wire

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// Check enforces each constraint of the tags, accepting the bounds and
// refusing one step past them, with the field's name in the message.
func TestCheckEnforcesTheTags(t *testing.T) {
	const id = "3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69"
	okPresence := PresenceRequest{DeviceID: id, AppVersion: "1", OSVersion: strings.Repeat("x", 64), TargetAppVersion: "~ !",
		Checks: map[string]bool{"a": true, strings.Repeat("z", 32): false}, ActiveTaskID: ptr(id), ClientTime: ptr("2026-01-01T00:00:00.123+00:00")}
	if err := Check(okPresence); err != nil {
		t.Fatalf("a valid body refused: %v", err)
	}
	many := map[string]bool{}
	for i := range 17 {
		many[strings.Repeat("c", i+1)] = true
	}
	for _, c := range []struct {
		field string
		edit  func(p *PresenceRequest)
	}{
		{"device_id", func(p *PresenceRequest) { p.DeviceID = strings.ToUpper(id) }},
		{"app_version", func(p *PresenceRequest) { p.AppVersion = "" }},
		{"os_version", func(p *PresenceRequest) { p.OSVersion = strings.Repeat("x", 65) }},
		{"target_app_version", func(p *PresenceRequest) { p.TargetAppVersion = "é" }},
		{"checks", func(p *PresenceRequest) { p.Checks = map[string]bool{} }},
		{"checks", func(p *PresenceRequest) { p.Checks = many }},
		{"checks", func(p *PresenceRequest) { p.Checks = map[string]bool{"A": true} }},
		{"active_task_id", func(p *PresenceRequest) { p.ActiveTaskID = ptr("x") }},
		{"client_time", func(p *PresenceRequest) { p.ClientTime = ptr("2026-01-01T00:00:00.1234Z") }},
		{"client_time", func(p *PresenceRequest) { p.ClientTime = ptr("2026-02-30T00:00:00Z") }},
	} {
		p := okPresence
		c.edit(&p)
		err := Check(p)
		ce, ok := err.(*CheckError)
		if !ok || ce.Field != c.field || !strings.HasPrefix(ce.Msg, `field "`+c.field+`" must `) {
			t.Errorf("%s: %v", c.field, err)
		}
	}
	for _, c := range []struct {
		body  any
		field string // "" valid
	}{
		{ClaimVersionRequest{DeviceID: id, ClaimGeneration: 1, ExpectedVersion: MaxSafeInt}, ""},
		{ClaimVersionRequest{DeviceID: id, ClaimGeneration: 0, ExpectedVersion: 1}, "claim_generation"},
		{ClaimVersionRequest{DeviceID: id, ClaimGeneration: 1, ExpectedVersion: MaxSafeInt + 1}, "expected_version"},
		{FailRequest{DeviceID: id, ClaimGeneration: 1, ExecutionID: id, ExpectedVersion: 1, ReasonCode: "a_1", Detail: strings.Repeat("d", 256)}, ""},
		{FailRequest{DeviceID: id, ClaimGeneration: 1, ExecutionID: id, ExpectedVersion: 1, ReasonCode: "A", Detail: ""}, "reason_code"},
		{FailRequest{DeviceID: id, ClaimGeneration: 1, ExecutionID: id, ExpectedVersion: 1, ReasonCode: "a", Detail: strings.Repeat("d", 257)}, "detail"},
		{RegisterDeviceRequest{OwnerID: id, Name: "n", RequiredChecks: []string{"a", "b"}}, ""},
		{RegisterDeviceRequest{OwnerID: id, Name: "n", RequiredChecks: []string{"a", "a"}}, "required_checks"},
		{RegisterDeviceRequest{OwnerID: id, Name: strings.Repeat("n", 129)}, "name"},
		{RecoverRequest{Decision: "requeue", ExpectedVersion: 1}, ""},
		{AdvanceClockRequest{Seconds: 86401}, "seconds"},
		{CreateTaskRequest{Payload: json.RawMessage(`{}`), Authorize: &AuthorizeOptions{TTLSeconds: 0}}, "ttl_seconds"},
		{CreateAdminTokenRequest{Name: "ok.name", Role: ptr(RoleAuditor)}, ""},
		{CreateAdminTokenRequest{Name: "-bad"}, "name"},
		{CreateAdminTokenRequest{Name: "ok", Role: ptr(Role("root"))}, "role"},
	} {
		err := Check(c.body)
		if c.field == "" {
			if err != nil {
				t.Errorf("%T: a valid body refused: %v", c.body, err)
			}
			continue
		}
		if ce, ok := err.(*CheckError); !ok || ce.Field != c.field {
			t.Errorf("%T: want a refusal of %s, got %v", c.body, c.field, err)
		}
	}
	// Only the named fields are checked.
	if err := Check(HeartbeatRequest{Step: "s"}, "step"); err != nil {
		t.Errorf("named check: %v", err)
	}
	if err := Check(HeartbeatRequest{Step: ""}, "step"); err == nil {
		t.Error("an empty step passed")
	}
}

func BenchmarkCheckPresence(b *testing.B) {
	p := PresenceRequest{AppVersion: "1.4.2", OSVersion: "Android 14", TargetAppVersion: "7.1.0",
		Checks: map[string]bool{"accessibility_connected": true, "target_app_installed": true, "agent_running": true}}
	for range b.N {
		if err := Check(&p, "app_version", "checks", "os_version", "target_app_version"); err != nil {
			b.Fatal(err)
		}
	}
}

// The byte-table matcher accepts exactly what its pattern's regexp does.
func TestMatcherIsItsPattern(t *testing.T) {
	for _, pattern := range []string{`^[a-z0-9_]{1,32}$`, `^[a-z0-9_]{1,64}$`, `^[0-9a-f]{64}$`} {
		m := newMatcher(pattern)
		if m.re != nil {
			t.Fatalf("%s: not a byte table", pattern)
		}
		re := regexp.MustCompile(pattern)
		for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 65} {
			for _, c := range []string{"a", "z", "0", "9", "_", "-", "A", "f", "g", " ", "é", "\x00", "\xff"} {
				for _, s := range []string{strings.Repeat(c, n), strings.Repeat("a", max(n-1, 0)) + c} {
					if m.MatchString(s) != re.MatchString(s) {
						t.Errorf("%s: %q", pattern, s)
					}
				}
			}
		}
	}
}

// Decode refuses what the type does not say: an unknown member, a missing
// or null required one, a wrong type, a value its tag refuses, a duplicate
// key; and reads a valid answer.
func TestDecodeIsStrict(t *testing.T) {
	const good = `{"active_task_id":null,"active_task_mismatch":false,"claimable":true,"missing_checks":[],` +
		`"presence_expires_at":"2026-01-01T00:00:30.000Z","server_time":"2026-01-01T00:00:00.000Z"}`
	var p PresenceAnswer
	if err := (Strict{}).Decode([]byte(good), &p); err != nil || !p.Claimable || p.ActiveTaskID != nil {
		t.Fatalf("a valid answer: %+v, %v", p, err)
	}
	for name, body := range map[string]string{
		"unknown member": strings.Replace(good, `"claimable":true`, `"claimable":true,"x":1`, 1),
		"missing":        strings.Replace(good, `"claimable":true,`, ``, 1),
		"null":           strings.Replace(good, `"claimable":true`, `"claimable":null`, 1),
		"wrong type":     strings.Replace(good, `"claimable":true`, `"claimable":"true"`, 1),
		"tag refuses":    strings.Replace(good, `"active_task_id":null`, `"active_task_id":"x"`, 1),
		"bad time":       strings.Replace(good, `00:00:30.000Z`, `00:00:30.0000Z`, 1),
		"duplicate key":  strings.Replace(good, `"claimable":true`, `"claimable":true,"claimable":true`, 1),
		"bad check name": strings.Replace(good, `"missing_checks":[]`, `"missing_checks":["A"]`, 1),
	} {
		var p PresenceAnswer
		if err := (Strict{}).Decode([]byte(body), &p); err == nil {
			t.Errorf("%s: accepted %s", name, body)
		}
	}
	// Nested objects are held to their types too.
	claim := `{"claim":{"authorization_expires_at":"2026-01-01T00:05:00.000Z","generation":1,"lease_expires_at":"2026-01-01T00:00:30.000Z",` +
		`"session_id":"3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69"},"claim_generation":1,"lease_expires_at":"2026-01-01T00:00:30.000Z",` +
		`"server_time":"2026-01-01T00:00:00.000Z","state":"CLAIMED","task":{"created_at":"2026-01-01T00:00:00.000Z",` +
		`"id":"3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69","payload":{"a":1},"revision":1},"version":2}`
	var c ClaimAnswer
	if err := (Strict{}).Decode([]byte(claim), &c); err != nil || c.Task.Revision != 1 {
		t.Fatalf("a valid claim: %v", err)
	}
	if err := (Strict{}).Decode([]byte(strings.Replace(claim, `"revision":1}`, `"revision":1,"x":2}`, 1)), &c); err == nil {
		t.Error("an unknown nested member was accepted")
	}
}
