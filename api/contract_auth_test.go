package api_test

import (
	"net/http"
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

// authRoute is one route with a body that would be valid for it.
type authRoute struct {
	method, path string
	body         []byte
}

// authRoutes returns device and admin routes with plausible
// bodies (the bodies never matter: authentication answers first).
func authRoutes(deviceID, taskID string) (device, admin []authRoute) {
	dev := []byte(`{"device_id":"` + deviceID + `","session_id":"` + nodetest.NewID() + `"}`)
	call := []byte(`{"device_id":"` + deviceID + `","claim_generation":1,"expected_version":2}`)
	device = []authRoute{
		{"POST", nodetest.Presence, []byte(`{"device_id":"` + deviceID + `","app_version":"1","os_version":"1","target_app_version":"1","checks":{"a":true}}`)},
		{"POST", nodetest.ClaimNext, dev},
		{"POST", nodetest.DevicePath + "/tasks/" + taskID + "/start", call},
		{"POST", nodetest.DevicePath + "/tasks/" + taskID + "/release", call},
		{"POST", nodetest.DevicePath + "/tasks/" + taskID + "/heartbeat", call},
		{"POST", nodetest.DevicePath + "/tasks/" + taskID + "/cancel-ack", call},
		{"GET", nodetest.DevicePath + "/tasks/" + taskID + "/reference-image", nil},
	}
	admin = []authRoute{
		{"POST", nodetest.AdminPath + "/devices", []byte(`{"owner_id":"` + nodetest.NewID() + `","name":"x"}`)},
		{"GET", nodetest.AdminPath + "/devices/" + deviceID, nil},
		{"POST", nodetest.AdminPath + "/tasks", []byte(`{"payload":{"a":1}}`)},
		{"GET", nodetest.AdminPath + "/tasks/" + taskID, nil},
		{"GET", nodetest.AdminPath + "/tasks/" + taskID + "/events", nil},
		{"POST", nodetest.AdminPath + "/tasks/" + taskID + "/authorize", []byte(`{"expected_revision":1,"ttl_seconds":3600}`)},
		{"POST", nodetest.AdminPath + "/tasks/" + taskID + "/cancel", []byte(`{"reason":"x"}`)},
		{"GET", nodetest.AdminPath + "/events", nil},
		{"POST", nodetest.AdminPath + "/test-clock/advance", []byte(`{"seconds":60}`)},
	}
	return device, admin
}

// Missing, unknown, malformed and revoked bearer tokens answer 401 with an
// empty body and WWW-Authenticate: Bearer on every route, and append
// nothing.
func TestContractAuthUnauthenticated(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	n.CreateTask(nil)
	id, _, _ := d.MustClaim(t)
	gone := n.RegisterDevice()
	r := n.Do("POST", nodetest.AdminPath+"/devices/"+gone.ID+"/revoke", n.AdminToken, map[string]any{"reason": "lost"}, nil)
	nodetest.Must(t, r, http.StatusOK)

	device, admin := authRoutes(d.ID, id)
	creds := map[string]string{
		"none":            "",
		"unknown device":  "Bearer tldev_" + strings.Repeat("A", 43),
		"unknown admin":   "Bearer tladm_" + strings.Repeat("A", 43),
		"garbage":         "Bearer x",
		"empty bearer":    "Bearer ",
		"basic scheme":    "Basic " + d.Token,
		"token no scheme": d.Token,
		"revoked device":  "Bearer " + gone.Token,
	}
	before := n.Head()
	for name, auth := range creds {
		for _, rt := range append(append([]authRoute{}, device...), admin...) {
			h := nodetest.JSONHeaders(nil)
			if auth != "" {
				h["Authorization"] = auth
			}
			r := n.Raw(t, rt.method, rt.path, "", rt.body, false, h)
			if r.Status != http.StatusUnauthorized {
				t.Errorf("%s %s %s: want 401, got %d %s", name, rt.method, rt.path, r.Status, r.Body)
				continue
			}
			nodetest.MustUnauthorized(t, r)
		}
	}
	n.MustUnchanged(t, before)
}

// The bearer token is checked before the body is read or its Content-Type
// parsed: an unknown token with a wrong media type, an oversize
// Content-Length, a bad Idempotency-Key or a broken body still answers 401;
// a token of the wrong kind answers 403 wrong_credential_kind likewise.
func TestContractAuthBeforeBody(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	unknown := "tldev_" + strings.Repeat("B", 43)
	bad := map[string]string{"Content-Type": "text/plain", "Idempotency-Key": "nope", "X-Claim-Token": "short"}
	big := []byte(strings.Repeat("x", 70000))
	before := n.Head()
	for _, path := range []string{nodetest.Presence, nodetest.ClaimNext, nodetest.DevicePath + "/tasks/" + nodetest.NewID() + "/start",
		nodetest.AdminPath + "/tasks", nodetest.AdminPath + "/devices", nodetest.AdminPath + "/tasks/" + nodetest.NewID() + "/cancel"} {
		nodetest.MustUnauthorized(t, n.Raw(t, "POST", path, unknown, []byte("{{{\xff"), false, bad))
		nodetest.MustUnauthorized(t, n.Raw(t, "POST", path, unknown, big, false, bad))
		nodetest.MustUnauthorized(t, n.Raw(t, "POST", path, "", big, true, bad))
	}
	for _, path := range []string{nodetest.AdminPath + "/tasks", nodetest.AdminPath + "/devices"} {
		nodetest.MustError(t, n.Raw(t, "POST", path, d.Token, []byte("{{{"), false, bad), http.StatusForbidden, "wrong_credential_kind")
		nodetest.MustError(t, n.Raw(t, "POST", path, d.Token, big, false, bad), http.StatusForbidden, "wrong_credential_kind")
	}
	for _, path := range []string{nodetest.Presence, nodetest.ClaimNext, nodetest.DevicePath + "/tasks/" + nodetest.NewID() + "/release"} {
		nodetest.MustError(t, n.Raw(t, "POST", path, n.AdminToken, []byte("{{{"), false, bad), http.StatusForbidden, "wrong_credential_kind")
		nodetest.MustError(t, n.Raw(t, "POST", path, n.AdminToken, big, true, bad), http.StatusForbidden, "wrong_credential_kind")
	}
	n.MustUnchanged(t, before)
}

// Device tokens never reach /admin routes and admin tokens never reach
// /device routes: 403 wrong_credential_kind, nothing appended.
func TestContractAuthWrongCredentialKind(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	device, admin := authRoutes(d.ID, id)
	before := n.Head()
	for _, rt := range admin {
		r := n.Raw(t, rt.method, rt.path, d.Token, rt.body, false, nodetest.JSONHeaders(nil))
		nodetest.MustError(t, r, http.StatusForbidden, "wrong_credential_kind")
	}
	for _, rt := range device {
		r := n.Raw(t, rt.method, rt.path, n.AdminToken, rt.body, false, nodetest.JSONHeaders(map[string]string{"X-Claim-Token": nodetest.NewClaimToken()}))
		nodetest.MustError(t, r, http.StatusForbidden, "wrong_credential_kind")
	}
	n.MustUnchanged(t, before)
	// The right kinds still work with the same tokens.
	nodetest.Must(t, d.Ready(), http.StatusOK)
	nodetest.Must(t, n.Do("GET", nodetest.AdminPath+"/tasks/"+id, n.AdminToken, nil, nil), http.StatusOK)
}

// A revoked device's token is unknown from then on, and its earlier
// valid requests do not help: 401 everywhere on the device routes.
func TestContractAuthRevokedToken(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/devices/"+d.ID+"/revoke", n.AdminToken, map[string]any{"reason": "stolen"}, nil), http.StatusOK)
	before := n.Head()
	nodetest.MustUnauthorized(t, d.Ready())
	r, _ := d.Claim()
	nodetest.MustUnauthorized(t, r)
	nodetest.MustUnauthorized(t, d.Call(nodetest.NewID(), "start", nodetest.NewClaimToken(), map[string]any{"claim_generation": 1, "expected_version": 2}, ""))
	n.MustUnchanged(t, before)
}
