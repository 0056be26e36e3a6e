package api_test

import (
	"net/http"
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

// jsonRoute is a JSON route with a valid body split as {first,rest}, so
// that generic mutations (duplicate and case-variant keys, unknown and
// server-owned fields, trailing data, missing field) can be built.
type jsonRoute struct {
	name    string
	path    string
	token   string
	headers map[string]string
	first   string   // first member of the valid body, e.g. `"device_id":"…"`
	variant string   // the same member under a key equal up to case
	rest    string   // the other members
	bad     []string // route-specific invalid bodies
	limit   int
	ok      int // status of the valid body
}

func (r jsonRoute) valid() string {
	if r.rest == "" {
		return "{" + r.first + "}"
	}
	return "{" + r.first + "," + r.rest + "}"
}

// invalid returns every generic invalid variant of the route's body.
func (r jsonRoute) invalid() map[string]string {
	v := r.valid()
	inner := strings.TrimSuffix(strings.TrimPrefix(v, "{"), "}")
	out := map[string]string{
		"unknown field":            `{"zzz_unknown":1,` + inner + `}`,
		"unknown field nested end": `{` + inner + `,"extra":{"a":1}}`,
		"duplicate key":            `{` + r.first + `,` + inner + `}`,
		"case-variant alongside":   `{` + r.variant + `,` + inner + `}`,
		"case-variant after":       `{` + inner + `,` + r.variant + `}`,
		"case-variant instead":     strings.Replace(v, r.first, r.variant, 1),
		"trailing object":          v + `{}`,
		"trailing garbage":         v + ` x`,
		"trailing comma":           v + `,`,
		"trailing bracket":         v + `]`,
		"trailing second doc":      v + "\n" + v,
		"missing first field":      "{" + r.rest + "}",
		"server-owned state":       `{"state":"PENDING",` + inner + `}`,
		"server-owned actor":       `{"actor":{"kind":"operator","id":"x"},` + inner + `}`,
		"server-owned seq":         `{"seq":1,` + inner + `}`,
		"server-owned lease":       `{"lease_expires_at":"2030-01-01T00:00:00.000Z",` + inner + `}`,
		"server-owned token":       `{"token":"` + strings.Repeat("a", 64) + `",` + inner + `}`,
		"not an object array":      `[` + v + `]`,
		"not an object null":       `null`,
		"not an object string":     `"x"`,
		"not an object number":     `1`,
		"empty body":               ``,
		"whitespace only":          "  \n",
		"unterminated":             strings.TrimSuffix(v, "}"),
		"single quotes":            strings.ReplaceAll(v, `"`, `'`),
		"comment":                  "/* c */" + v,
		"invalid utf-8 key":        "{\"k\xff\":1," + inner + "}",
		"bom":                      "\xef\xbb\xbf" + v,
	}
	if r.rest == "" {
		delete(out, "missing first field")
	}
	return out
}

// TestContractStrictJSON sends every invalid body to every JSON route of
// 400 invalid_request, nothing appended; then the valid body is
// accepted, which proves the refusals came from the invalid parts.
func TestContractStrictJSON(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	d2 := n.ReadyDevice(t)
	a := n.CreateTask(nil)
	_, tok, _ := d.MustClaim(t)
	n.CreateTask(nil)
	b, tok2, _ := d2.MustClaim(t)
	ex := d2.MustStart(t, b, tok2, 1, 2)
	unauthorized := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"u": 1}}, nil)
	nodetest.Must(t, unauthorized, http.StatusCreated)
	u := nodetest.Str(unauthorized.JSON(), "id")
	canceled := n.CreateTask(map[string]any{"c": 1})

	D, D2, S, E := d.ID, d2.ID, d.Session, ex
	upper := strings.ToUpper
	v1 := "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	badTimes := []string{`"2026-01-01T00:00:00.1234Z"`, `"2026-01-01T00:00:00+01:00"`, `"2026-01-01"`,
		`"2026-01-01T25:00:00Z"`, `"2026-02-30T00:00:00Z"`, `"2026-01-01T00:00:00"`, `"2026-01-01 00:00:00Z"`,
		`"1767225600000"`, `1767225600000`, `"2026-01-01T00:00:00.Z"`, `true`, `{}`}
	presenceRest := `"app_version":"1.4.2","os_version":"Android 14","target_app_version":"7.1.0","checks":{"accessibility_connected":true,"target_app_installed":true},"active_task_id":"` + a + `","client_time":"2026-01-01T00:00:00.123Z"`
	presenceBad := []string{
		`{"device_id":5,` + presenceRest + `}`,
		`{"device_id":"` + upper(D) + `",` + presenceRest + `}`,
		`{"device_id":"{` + D + `}",` + presenceRest + `}`,
		`{"device_id":"urn:uuid:` + D + `",` + presenceRest + `}`,
		`{"device_id":"` + strings.ReplaceAll(D, "-", "") + `",` + presenceRest + `}`,
		`{"device_id":null,` + presenceRest + `}`,
		`{"device_id":"` + D + `","app_version":"1.4\xff","os_version":"Android 14","target_app_version":"7.1.0","checks":{"a":true}}`,
		`{"device_id":"` + D + `","app_version":"1.4\xc0\xaf","os_version":"Android 14","target_app_version":"7.1.0","checks":{"a":true}}`,
		`{"device_id":"` + D + `","app_version":"1.4\xed\xa0\x80","os_version":"Android 14","target_app_version":"7.1.0","checks":{"a":true}}`,
		`{"device_id":"` + D + `","app_version":"","os_version":"Android 14","target_app_version":"7.1.0","checks":{"a":true}}`,
		`{"device_id":"` + D + `","app_version":"` + strings.Repeat("v", 65) + `","os_version":"x","target_app_version":"7.1.0","checks":{"a":true}}`,
		`{"device_id":"` + D + `","app_version":"é","os_version":"x","target_app_version":"7.1.0","checks":{"a":true}}`,
		`{"device_id":"` + D + `","app_version":1,"os_version":"x","target_app_version":"7.1.0","checks":{"a":true}}`,
		`{"device_id":"` + D + `","app_version":"1","os_version":"x","target_app_version":"7.1.0","checks":[]}`,
		`{"device_id":"` + D + `","app_version":"1","os_version":"x","target_app_version":"7.1.0","checks":{}}`,
		`{"device_id":"` + D + `","app_version":"1","os_version":"x","target_app_version":"7.1.0","checks":{"a":"true"}}`,
		`{"device_id":"` + D + `","app_version":"1","os_version":"x","target_app_version":"7.1.0","checks":{"A":true}}`,
		`{"device_id":"` + D + `","app_version":"1","os_version":"x","target_app_version":"7.1.0","checks":{"a":true,"a":true}}`,
		`{"device_id":"` + D + `","app_version":"1","os_version":"x","target_app_version":"7.1.0","checks":{"` + strings.Repeat("c", 33) + `":true}}`,
		`{"device_id":"` + D + `","app_version":"1","os_version":"x","target_app_version":"7.1.0","checks":` + manyChecks(17) + `}`,
		`{"device_id":"` + D + `","app_version":"1","os_version":"x","target_app_version":"7.1.0","checks":{"a":true},"active_task_id":"` + upper(a) + `"}`,
		`{"device_id":"` + D + `","app_version":"1","os_version":"x","target_app_version":"7.1.0","checks":{"a":true},"active_task_id":5}`,
	}
	for _, bt := range badTimes {
		presenceBad = append(presenceBad, `{"device_id":"`+D+`","app_version":"1","os_version":"x","target_app_version":"7.1.0","checks":{"a":true},"client_time":`+bt+`}`)
	}
	claimBad := []string{
		`{"device_id":"` + D + `","session_id":"` + upper(S) + `"}`,
		`{"device_id":"` + D + `","session_id":"` + v1 + `"}`,
		`{"device_id":"` + D + `","session_id":null}`,
		`{"device_id":"` + D + `","session_id":5}`,
		`{"device_id":"` + D + `","session_id":""}`,
		`{"device_id":"` + D + `","session_id":["` + S + `"]}`,
		`{"device_id":"` + upper(D) + `","session_id":"` + S + `"}`,
		`{"device_id":"` + D + `","session_id":"` + S + "\xff" + `"}`,
		`{"device_id":"` + D + `"}`,
	}
	startRest := `"claim_generation":1,"expected_version":2`
	startBad := []string{}
	for _, num := range []string{`0`, `-1`, `1.5`, `1e0`, `1.0`, `"1"`, `9007199254740992`, `99999999999999999999`, `null`, `true`, `[1]`} {
		startBad = append(startBad, `{"device_id":"`+D+`","claim_generation":`+num+`,"expected_version":2}`,
			`{"device_id":"`+D+`","claim_generation":1,"expected_version":`+num+`}`)
	}
	startBad = append(startBad,
		`{"device_id":"`+D+`","claim_generation":1,"expected_version":2,"execution_id":"`+E+`"}`,
		`{"device_id":"`+D+`","claim_generation":1,"expected_version":2,"version":2}`,
		`{"device_id":"`+D+`","claim_generation":1}`,
		`{"device_id":"`+D+`","expected_version":2}`)
	hbRest := `"claim_generation":1,"execution_id":"` + E + `","step":"tap login","client_time":"2026-01-01T00:00:00Z"`
	hbBad := []string{
		`{"device_id":"` + D2 + `","claim_generation":1,"execution_id":"` + upper(E) + `","step":"s"}`,
		`{"device_id":"` + D2 + `","claim_generation":1,"execution_id":"` + E + `","step":""}`,
		`{"device_id":"` + D2 + `","claim_generation":1,"execution_id":"` + E + `","step":"` + strings.Repeat("s", 65) + `"}`,
		`{"device_id":"` + D2 + `","claim_generation":1,"execution_id":"` + E + `","step":"a\nb"}`,
		`{"device_id":"` + D2 + `","claim_generation":1,"execution_id":"` + E + `","step":"\u00e9"}`,
		`{"device_id":"` + D2 + `","claim_generation":1,"execution_id":"` + E + `","step":5}`,
		`{"device_id":"` + D2 + `","claim_generation":1,"execution_id":"` + E + `"}`,
		`{"device_id":"` + D2 + `","claim_generation":1,"step":"s"}`,
		`{"device_id":"` + D2 + `","claim_generation":1,"execution_id":"` + E + `","step":"s","expected_version":3}`,
		`{"device_id":"` + D2 + `","claim_generation":0,"execution_id":"` + E + `","step":"s"}`,
	}
	for _, bt := range badTimes {
		hbBad = append(hbBad, `{"device_id":"`+D2+`","claim_generation":1,"execution_id":"`+E+`","step":"s","client_time":`+bt+`}`)
	}
	createRest := `"authorize":{"ttl_seconds":3600}`
	createBad := []string{
		`{"payload":"x"}`, `{"payload":[1]}`, `{"payload":null}`, `{"payload":1}`, `{}`,
		`{"authorize":{"ttl_seconds":3600}}`,
		`{"payload":{"a":"\xff"}}`,
		`{"payload":{"a":1,"a":2}}`,
		`{"payload":{"a":{"b":1,"B":2}}}`,
		`{"payload":{"a":1e400}}`,
		`{"payload":{"a":1},"authorize":"yes"}`,
		`{"payload":{"a":1},"authorize":{"ttl_seconds":"3600"}}`,
		`{"payload":{"a":1},"authorize":{"ttl_seconds":3600.5}}`,
		`{"payload":{"a":1},"authorize":{"ttl_seconds":3600,"x":1}}`,
		`{"payload":{"a":1},"authorize":{"ttl_seconds":3600,"expires_at":"2030-01-01T00:00:00Z"}}`,
		`{"payload":{"a":1},"authorize":{}}`,
		`{"payload":{"a":1},"id":"` + nodetest.NewID() + `"}`,
		`{"payload":{"a":1},"version":1}`,
		`{"payload":{"big":"` + strings.Repeat("p", 16<<10) + `"}}`,
	}
	regRest := `"name":"phone 7","required_checks":["accessibility_connected"]`
	regBad := []string{
		`{"owner_id":"` + upper(D) + `","name":"x"}`,
		`{"owner_id":"` + v1 + `","name":"x"}`,
		`{"owner_id":5,"name":"x"}`,
		`{"owner_id":"` + D + `","name":""}`,
		`{"owner_id":"` + D + `","name":5}`,
		`{"owner_id":"` + D + `","name":"x\xff"}`,
		`{"owner_id":"` + D + `","name":"x","required_checks":"a"}`,
		`{"owner_id":"` + D + `","name":"x","required_checks":[1]}`,
		`{"owner_id":"` + D + `","name":"x","required_checks":["Bad"]}`,
		`{"owner_id":"` + D + `","name":"x","required_checks":["a","a"]}`,
		`{"owner_id":"` + D + `","name":"x","required_checks":` + manyNames(17) + `}`,
		`{"owner_id":"` + D + `","name":"x","required_checks":null}`,
		`{"owner_id":"` + D + `","name":"x","token":"tldev_` + strings.Repeat("A", 43) + `"}`,
		`{"owner_id":"` + D + `","name":"x","device_id":"` + D + `"}`,
		`{"owner_id":"` + D + `","name":"x","status":"ACTIVE"}`,
	}
	authBad := []string{
		`{"expected_revision":0,"ttl_seconds":3600}`,
		`{"expected_revision":"1","ttl_seconds":3600}`,
		`{"expected_revision":1,"ttl_seconds":"3600"}`,
		`{"expected_revision":1,"ttl_seconds":3600.5}`,
		`{"expected_revision":1,"ttl_seconds":1e3}`,
		`{"expected_revision":1,"ttl_seconds":null}`,
		`{"expected_revision":1}`,
		`{"ttl_seconds":3600}`,
		`{"expected_revision":1,"ttl_seconds":99999999999999999999}`,
	}
	cancelBad := []string{
		`{"reason":5}`, `{"reason":null}`, `{}`, `{"reason":"` + strings.Repeat("r", 257) + `"}`,
		`{"reason":"x","expected_version":0}`, `{"reason":"x","expected_version":"1"}`,
		`{"reason":"x","expected_version":-1}`, `{"reason":"x\xff"}`,
	}
	advanceBad := []string{`{"seconds":0}`, `{"seconds":86401}`, `{"seconds":"60"}`, `{"seconds":1.5}`, `{"seconds":-5}`, `{}`}

	routes := []jsonRoute{
		{name: "presence", path: nodetest.Presence, token: d.Token, first: `"device_id":"` + D + `"`, variant: `"Device_ID":"` + D + `"`,
			rest: presenceRest, bad: presenceBad, limit: 4096, ok: 200},
		{name: "claim-next", path: nodetest.ClaimNext, token: d.Token, headers: map[string]string{"X-Claim-Token": tok},
			first: `"device_id":"` + D + `"`, variant: `"DEVICE_ID":"` + D + `"`, rest: `"session_id":"` + S + `"`, bad: claimBad, limit: 4096, ok: 200},
		{name: "start", path: nodetest.DevicePath + "/tasks/" + a + "/start", token: d.Token, headers: map[string]string{"X-Claim-Token": tok},
			first: `"device_id":"` + D + `"`, variant: `"Device_Id":"` + D + `"`, rest: startRest, bad: startBad, limit: 4096, ok: 200},
		{name: "heartbeat", path: nodetest.DevicePath + "/tasks/" + b + "/heartbeat", token: d2.Token, headers: map[string]string{"X-Claim-Token": tok2},
			first: `"device_id":"` + D2 + `"`, variant: `"device_ID":"` + D2 + `"`, rest: hbRest, bad: hbBad, limit: 4096, ok: 200},
		{name: "create task", path: nodetest.AdminPath + "/tasks", token: n.AdminToken,
			first: `"payload":{"a":1}`, variant: `"Payload":{"a":1}`, rest: createRest, bad: createBad, limit: 64 << 10, ok: 201},
		{name: "register device", path: nodetest.AdminPath + "/devices", token: n.AdminToken,
			first: `"owner_id":"` + D + `"`, variant: `"Owner_ID":"` + D + `"`, rest: regRest, bad: regBad, limit: 64 << 10, ok: 201},
		{name: "authorize", path: nodetest.AdminPath + "/tasks/" + u + "/authorize", token: n.AdminToken,
			first: `"expected_revision":1`, variant: `"Expected_Revision":1`, rest: `"ttl_seconds":3600`, bad: authBad, limit: 64 << 10, ok: 200},
		{name: "cancel", path: nodetest.AdminPath + "/tasks/" + canceled + "/cancel", token: n.AdminToken,
			first: `"reason":"stop"`, variant: `"REASON":"stop"`, rest: `"expected_version":1`, bad: cancelBad, limit: 64 << 10, ok: 200},
		{name: "advance", path: nodetest.AdminPath + "/test-clock/advance", token: n.AdminToken,
			first: `"seconds":1`, variant: `"Seconds":1`, bad: advanceBad, limit: 64 << 10, ok: 200},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			before := n.Head()
			send := func(body string) *nodetest.Resp {
				return n.Raw(t, "POST", rt.path, rt.token, []byte(body), false, nodetest.JSONHeaders(rt.headers))
			}
			for name, body := range rt.invalid() {
				r := send(body)
				if r.Status != 400 || r.Code() != "invalid_request" {
					t.Errorf("%s: %q: want 400 invalid_request, got %d %s", name, body, r.Status, r.Body)
				}
			}
			for _, body := range rt.bad {
				r := send(body)
				if r.Status != 400 || r.Code() != "invalid_request" {
					t.Errorf("%q: want 400 invalid_request, got %d %s", body, r.Status, r.Body)
				}
			}
			n.MustUnchanged(t, before)
			// The valid body (with trailing whitespace, allowed) is accepted.
			r := send(rt.valid() + " \r\n\t")
			nodetest.Must(t, r, rt.ok)
		})
	}
}

func manyChecks(k int) string {
	parts := []string{}
	for i := 0; i < k; i++ {
		parts = append(parts, `"c`+string(rune('a'+i))+`":true`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func manyNames(k int) string {
	parts := []string{}
	for i := 0; i < k; i++ {
		parts = append(parts, `"c`+string(rune('a'+i))+`"`)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// padBody pads a JSON object with spaces before its closing brace to
// exactly size bytes.
func padBody(t *testing.T, body string, size int) []byte {
	t.Helper()
	if len(body) > size {
		t.Fatalf("body longer than %d", size)
	}
	return []byte(body[:len(body)-1] + strings.Repeat(" ", size-len(body)) + "}")
}

// Content-Type must be application/json (parameter charset=utf-8 only),
// else 415 unsupported_media_type, on device and admin routes; nothing
// appended. Media type validation comes before any state check.
func TestContractContentType(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	n.CreateTask(nil)
	id, tok, _ := d.MustClaim(t)
	presence := `{"device_id":"` + d.ID + `","app_version":"1","os_version":"1","target_app_version":"1","checks":{"accessibility_connected":true,"target_app_installed":true}}`
	type route struct{ path, token, body string }
	routes := []route{
		{nodetest.Presence, d.Token, presence},
		{nodetest.ClaimNext, d.Token, `{"device_id":"` + d.ID + `","session_id":"` + d.Session + `"}`},
		{nodetest.DevicePath + "/tasks/" + id + "/release", d.Token, `{"device_id":"` + d.ID + `","claim_generation":1,"expected_version":2}`},
		{nodetest.DevicePath + "/tasks/" + nodetest.NewID() + "/start", d.Token, `{"device_id":"` + d.ID + `","claim_generation":1,"expected_version":2}`},
		{nodetest.AdminPath + "/tasks", n.AdminToken, `{"payload":{"a":1}}`},
		{nodetest.AdminPath + "/devices", n.AdminToken, `{"owner_id":"` + nodetest.NewID() + `","name":"x"}`},
		{nodetest.AdminPath + "/tasks/" + id + "/cancel", n.AdminToken, `{"reason":"x"}`},
		{nodetest.AdminPath + "/tasks/" + nodetest.NewID() + "/authorize", n.AdminToken, `{"expected_revision":1,"ttl_seconds":3600}`},
	}
	bad := []string{"", "text/plain", "application/xml", "application/json-patch+json", "application/jsonx",
		"application/json; charset=latin1", "application/json; charset=utf-16", "application/json; foo=bar",
		"application/json; charset=utf-8; foo=bar", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded",
		"text/json", "image/png"}
	before := n.Head()
	for _, rt := range routes {
		for _, ct := range bad {
			h := map[string]string{"Idempotency-Key": nodetest.NewKey(), "X-Claim-Token": tok}
			if ct != "" {
				h["Content-Type"] = ct
			}
			r := n.Raw(t, "POST", rt.path, rt.token, []byte(rt.body), false, h)
			if r.Status != 415 || r.Code() != "unsupported_media_type" {
				t.Errorf("%s with Content-Type %q: want 415 unsupported_media_type, got %d %s", rt.path, ct, r.Status, r.Body)
			}
		}
	}
	n.MustUnchanged(t, before)
	// charset=utf-8 (any case, with or without spaces) is allowed.
	for _, ct := range []string{"application/json; charset=utf-8", "application/json;charset=UTF-8", "Application/JSON", `application/json; charset="utf-8"`} {
		r := n.Raw(t, "POST", nodetest.Presence, d.Token, []byte(presence), false, map[string]string{"Content-Type": ct})
		nodetest.Must(t, r, http.StatusOK)
		r = n.Raw(t, "POST", nodetest.AdminPath+"/tasks", n.AdminToken, []byte(`{"payload":{"a":1}}`), false, nodetest.JSONHeaders(map[string]string{"Content-Type": ct}))
		nodetest.Must(t, r, http.StatusCreated)
	}
	r := n.Raw(t, "POST", nodetest.DevicePath+"/tasks/"+id+"/release", d.Token, []byte(routes[2].body), false,
		nodetest.JSONHeaders(map[string]string{"Content-Type": "application/json; charset=utf-8", "X-Claim-Token": tok}))

	nodetest.Must(t, r, http.StatusOK)
}

// Bodies over 4096 bytes (device) and 64 KiB (admin) answer 413
// body_too_large, whether declared by Content-Length (refused before
// anything else: media type, key and body are not looked at) or sent
// chunked; bodies of exactly the limit are accepted.
func TestContractBodyTooLarge(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	n.CreateTask(nil)
	id, tok, _ := d.MustClaim(t)
	presence := `{"device_id":"` + d.ID + `","app_version":"1","os_version":"1","target_app_version":"1","checks":{"accessibility_connected":true,"target_app_installed":true}}`
	claim := `{"device_id":"` + d.ID + `","session_id":"` + d.Session + `"}`
	start := `{"device_id":"` + d.ID + `","claim_generation":1,"expected_version":2}`
	create := `{"payload":{"a":1}}`
	register := `{"owner_id":"` + nodetest.NewID() + `","name":"x"}`
	cancel := `{"reason":"x"}`
	type route struct {
		path, token, body string
		limit             int
	}
	const dl, al = 4096, 64 << 10
	routes := []route{
		{nodetest.Presence, d.Token, presence, dl},
		{nodetest.ClaimNext, d.Token, claim, dl},
		{nodetest.DevicePath + "/tasks/" + id + "/start", d.Token, start, dl},
		{nodetest.DevicePath + "/tasks/" + id + "/release", d.Token, start, dl},
		{nodetest.AdminPath + "/tasks", n.AdminToken, create, al},
		{nodetest.AdminPath + "/devices", n.AdminToken, register, al},
		{nodetest.AdminPath + "/tasks/" + id + "/cancel", n.AdminToken, cancel, al},
	}
	before := n.Head()
	for _, rt := range routes {
		over := padBody(t, rt.body, rt.limit+1)
		// Declared length over the limit, everything else wrong too.
		r := n.Raw(t, "POST", rt.path, rt.token, over, false, map[string]string{"Content-Type": "text/plain", "Idempotency-Key": "bad", "X-Claim-Token": "bad"})
		nodetest.MustError(t, r, http.StatusRequestEntityTooLarge, "body_too_large")
		r = n.Raw(t, "POST", rt.path, rt.token, over, false, nodetest.JSONHeaders(map[string]string{"X-Claim-Token": tok}))
		nodetest.MustError(t, r, http.StatusRequestEntityTooLarge, "body_too_large")
		r = n.Raw(t, "POST", rt.path, rt.token, []byte(strings.Repeat("x", 3*rt.limit)), false, nodetest.JSONHeaders(map[string]string{"X-Claim-Token": tok}))
		nodetest.MustError(t, r, http.StatusRequestEntityTooLarge, "body_too_large")
		// Chunked: the length is only known while reading.
		r = n.Raw(t, "POST", rt.path, rt.token, over, true, nodetest.JSONHeaders(map[string]string{"X-Claim-Token": tok}))
		nodetest.MustError(t, r, http.StatusRequestEntityTooLarge, "body_too_large")
		r = n.Raw(t, "POST", rt.path, rt.token, []byte(strings.Repeat("y", 2*rt.limit)), true, nodetest.JSONHeaders(map[string]string{"X-Claim-Token": tok}))
		nodetest.MustError(t, r, http.StatusRequestEntityTooLarge, "body_too_large")
	}
	n.MustUnchanged(t, before)
	// A device body of exactly 4096 bytes, plain and chunked, is accepted.
	nodetest.Must(t, n.Raw(t, "POST", nodetest.Presence, d.Token, padBody(t, presence, dl), false, nodetest.JSONHeaders(nil)), http.StatusOK)
	nodetest.Must(t, n.Raw(t, "POST", nodetest.Presence, d.Token, padBody(t, presence, dl), true, nodetest.JSONHeaders(nil)), http.StatusOK)
	r := n.Raw(t, "POST", nodetest.DevicePath+"/tasks/"+id+"/release", d.Token, padBody(t, start, dl), true, nodetest.JSONHeaders(map[string]string{"X-Claim-Token": tok}))
	nodetest.Must(t, r, http.StatusOK)
	// An admin body of exactly 64 KiB is accepted (whitespace is not payload).
	nodetest.Must(t, n.Raw(t, "POST", nodetest.AdminPath+"/tasks", n.AdminToken, padBody(t, create, al), false, nodetest.JSONHeaders(nil)), http.StatusCreated)
	nodetest.Must(t, n.Raw(t, "POST", nodetest.AdminPath+"/tasks", n.AdminToken, padBody(t, create, al), true, nodetest.JSONHeaders(nil)), http.StatusCreated)
}
