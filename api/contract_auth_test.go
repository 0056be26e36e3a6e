package api_test

import (
	"net/http"
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

// ctRoute is one route with a body that would be valid for it.
type ctRoute struct {
	method, path string
	body         []byte
}

// ctAuthRoutes returns device and admin routes with plausible
// bodies (the bodies never matter: authentication answers first).
func ctAuthRoutes(deviceID, taskID string) (device, admin []ctRoute) {
	dev := []byte(`{"device_id":"` + deviceID + `","session_id":"` + ctNewID() + `"}`)
	call := []byte(`{"device_id":"` + deviceID + `","claim_generation":1,"expected_version":2}`)
	device = []ctRoute{
		{"POST", ctPresence, []byte(`{"device_id":"` + deviceID + `","app_version":"1","os_version":"1","target_app_version":"1","checks":{"a":true}}`)},
		{"POST", ctClaimNext, dev},
		{"POST", ctDevicePath + "/tasks/" + taskID + "/start", call},
		{"POST", ctDevicePath + "/tasks/" + taskID + "/release", call},
		{"POST", ctDevicePath + "/tasks/" + taskID + "/heartbeat", call},
		{"POST", ctDevicePath + "/tasks/" + taskID + "/cancel-ack", call},
		{"GET", ctDevicePath + "/tasks/" + taskID + "/reference-image", nil},
	}
	admin = []ctRoute{
		{"POST", ctAdminPath + "/devices", []byte(`{"owner_id":"` + ctNewID() + `","name":"x"}`)},
		{"GET", ctAdminPath + "/devices/" + deviceID, nil},
		{"POST", ctAdminPath + "/tasks", []byte(`{"payload":{"a":1}}`)},
		{"GET", ctAdminPath + "/tasks/" + taskID, nil},
		{"GET", ctAdminPath + "/tasks/" + taskID + "/events", nil},
		{"POST", ctAdminPath + "/tasks/" + taskID + "/authorize", []byte(`{"expected_revision":1,"ttl_seconds":3600}`)},
		{"POST", ctAdminPath + "/tasks/" + taskID + "/cancel", []byte(`{"reason":"x"}`)},
		{"GET", ctAdminPath + "/events", nil},
		{"POST", ctAdminPath + "/test-clock/advance", []byte(`{"seconds":60}`)},
	}
	return device, admin
}

// Missing, unknown, malformed and revoked bearer tokens answer 401 with an
// empty body and WWW-Authenticate: Bearer on every route, and append
// nothing.
func TestContractAuthUnauthenticated(t *testing.T) {
	n := nodetest.Start(t)
	d := ctReadyDevice(t, n)
	n.CreateTask(nil)
	id, _, _ := ctClaim(t, d)
	gone := n.RegisterDevice()
	r := n.Do("POST", ctAdminPath+"/devices/"+gone.ID+"/revoke", n.AdminToken, map[string]any{"reason": "lost"}, nil)
	nodetest.Must(t, r, http.StatusOK)

	device, admin := ctAuthRoutes(d.ID, id)
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
		for _, rt := range append(append([]ctRoute{}, device...), admin...) {
			h := ctJSONHeaders(nil)
			if auth != "" {
				h["Authorization"] = auth
			}
			r := ctRaw(t, n, rt.method, rt.path, "", rt.body, false, h)
			if r.Status != http.StatusUnauthorized {
				t.Errorf("%s %s %s: want 401, got %d %s", name, rt.method, rt.path, r.Status, r.Body)
				continue
			}
			ctUnauthorized(t, r)
		}
	}
	ctSame(t, n, before)
}

// The bearer token is checked before the body is read or its Content-Type
// parsed: an unknown token with a wrong media type, an oversize
// Content-Length, a bad Idempotency-Key or a broken body still answers 401;
// a token of the wrong kind answers 403 wrong_credential_kind likewise.
func TestContractAuthBeforeBody(t *testing.T) {
	n := nodetest.Start(t)
	d := ctReadyDevice(t, n)
	unknown := "tldev_" + strings.Repeat("B", 43)
	bad := map[string]string{"Content-Type": "text/plain", "Idempotency-Key": "nope", "X-Claim-Token": "short"}
	big := []byte(strings.Repeat("x", 70000))
	before := n.Head()
	for _, path := range []string{ctPresence, ctClaimNext, ctDevicePath + "/tasks/" + ctNewID() + "/start",
		ctAdminPath + "/tasks", ctAdminPath + "/devices", ctAdminPath + "/tasks/" + ctNewID() + "/cancel"} {
		ctUnauthorized(t, ctRaw(t, n, "POST", path, unknown, []byte("{{{\xff"), false, bad))
		ctUnauthorized(t, ctRaw(t, n, "POST", path, unknown, big, false, bad))
		ctUnauthorized(t, ctRaw(t, n, "POST", path, "", big, true, bad))
	}
	for _, path := range []string{ctAdminPath + "/tasks", ctAdminPath + "/devices"} {
		ctErr(t, ctRaw(t, n, "POST", path, d.Token, []byte("{{{"), false, bad), http.StatusForbidden, "wrong_credential_kind")
		ctErr(t, ctRaw(t, n, "POST", path, d.Token, big, false, bad), http.StatusForbidden, "wrong_credential_kind")
	}
	for _, path := range []string{ctPresence, ctClaimNext, ctDevicePath + "/tasks/" + ctNewID() + "/release"} {
		ctErr(t, ctRaw(t, n, "POST", path, n.AdminToken, []byte("{{{"), false, bad), http.StatusForbidden, "wrong_credential_kind")
		ctErr(t, ctRaw(t, n, "POST", path, n.AdminToken, big, true, bad), http.StatusForbidden, "wrong_credential_kind")
	}
	ctSame(t, n, before)
}

// Device tokens never reach /admin routes and admin tokens never reach
// /device routes: 403 wrong_credential_kind, nothing appended.
func TestContractAuthWrongCredentialKind(t *testing.T) {
	n := nodetest.Start(t)
	d := ctReadyDevice(t, n)
	id := n.CreateTask(nil)
	device, admin := ctAuthRoutes(d.ID, id)
	before := n.Head()
	for _, rt := range admin {
		r := ctRaw(t, n, rt.method, rt.path, d.Token, rt.body, false, ctJSONHeaders(nil))
		ctErr(t, r, http.StatusForbidden, "wrong_credential_kind")
	}
	for _, rt := range device {
		r := ctRaw(t, n, rt.method, rt.path, n.AdminToken, rt.body, false, ctJSONHeaders(map[string]string{"X-Claim-Token": nodetest.NewClaimToken()}))
		ctErr(t, r, http.StatusForbidden, "wrong_credential_kind")
	}
	ctSame(t, n, before)
	// The right kinds still work with the same tokens.
	nodetest.Must(t, d.Ready(), http.StatusOK)
	nodetest.Must(t, n.Do("GET", ctAdminPath+"/tasks/"+id, n.AdminToken, nil, nil), http.StatusOK)
}

// A revoked device's token is unknown from then on, and its earlier
// valid requests do not help: 401 everywhere on the device routes.
func TestContractAuthRevokedToken(t *testing.T) {
	n := nodetest.Start(t)
	d := ctReadyDevice(t, n)
	nodetest.Must(t, n.Do("POST", ctAdminPath+"/devices/"+d.ID+"/revoke", n.AdminToken, map[string]any{"reason": "stolen"}, nil), http.StatusOK)
	before := n.Head()
	ctUnauthorized(t, d.Ready())
	r, _ := d.Claim()
	ctUnauthorized(t, r)
	ctUnauthorized(t, d.Call(ctNewID(), "start", nodetest.NewClaimToken(), map[string]any{"claim_generation": 1, "expected_version": 2}, ""))
	ctSame(t, n, before)
}
