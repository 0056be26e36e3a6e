package api

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"taskledger/wire"
)

// The roles of admin tokens, enforced by the auth middleware
// (authenticate) from one table: every admin route, by method and Echo
// path, and the roles allowed on it. A route missing from the table is
// refused to every role (TestEveryAdminRouteHasRoles keeps the table
// complete; TestRoleMatrix walks every admin operation of the OpenAPI
// document with every role). A refusal is 403 insufficient_role, answered
// before the body is read, and changes nothing.
//
//	admin     everything
//	operator  tasks and devices (and the test clock), not admin tokens
//	auditor   reads: tasks, devices, history, events, the raw log,
//	          proofs, provenance and audit bundles

var (
	everyRole   = []wire.Role{wire.RoleAdmin, wire.RoleOperator, wire.RoleAuditor}
	taskWriters = []wire.Role{wire.RoleAdmin, wire.RoleOperator}
	adminOnly   = []wire.Role{wire.RoleAdmin}
)

// routeRoles maps "METHOD path" of every admin route to the roles allowed.
var routeRoles = map[string][]wire.Role{
	// Who the caller is.
	"GET /api/v1/admin/whoami": everyRole,

	// Devices.
	"POST /api/v1/admin/devices":            taskWriters,
	"GET /api/v1/admin/devices":             everyRole,
	"GET /api/v1/admin/devices/:id":         everyRole,
	"POST /api/v1/admin/devices/:id/revoke": taskWriters,

	// Tasks.
	"POST /api/v1/admin/tasks":                          taskWriters,
	"GET /api/v1/admin/tasks":                           everyRole,
	"GET /api/v1/admin/tasks/:id":                       everyRole,
	"GET /api/v1/admin/tasks/:id/events":                everyRole,
	"PUT /api/v1/admin/tasks/:id/reference-image":       taskWriters,
	"GET /api/v1/admin/tasks/:id/reference-image":       everyRole,
	"POST /api/v1/admin/tasks/:id/amend":                taskWriters,
	"POST /api/v1/admin/tasks/:id/authorize":            taskWriters,
	"POST /api/v1/admin/tasks/:id/authorization/revoke": taskWriters,
	"POST /api/v1/admin/tasks/:id/cancel":               taskWriters,
	"POST /api/v1/admin/tasks/:id/recover":              taskWriters,
	"GET /api/v1/admin/tasks/:id/evidence/:eid":         everyRole,
	"POST /api/v1/admin/test-clock/advance":             taskWriters,

	// History, export and proof.
	"GET /api/v1/admin/events":                 everyRole,
	"GET /api/v1/admin/events/stream":          everyRole,
	"GET /api/v1/admin/log":                    everyRole,
	"GET /api/v1/admin/proofs/inclusion":       everyRole,
	"GET /api/v1/admin/proofs/consistency":     everyRole,
	"GET /api/v1/admin/tasks/:id/provenance":   everyRole,
	"GET /api/v1/admin/tasks/:id/audit-bundle": everyRole,

	// Admin tokens.
	"POST /api/v1/admin/admin-tokens":              adminOnly,
	"GET /api/v1/admin/admin-tokens":               adminOnly,
	"GET /api/v1/admin/admin-tokens/:name":         adminOnly,
	"POST /api/v1/admin/admin-tokens/:name/revoke": adminOnly,
	// The backup archive holds the checkpoint signing key: admin only.
	"GET /api/v1/admin/backup": adminOnly,
}

// errInsufficientRole refuses a route the token's role does not allow.
var errInsufficientRole = newErr(http.StatusForbidden, "insufficient_role", "this admin token's role does not allow this route")

// RoleAllows reports whether role may call the admin route of method and
// Echo path (false for a route the table does not name).
func RoleAllows(role wire.Role, method, path string) bool {
	for _, r := range routeRoles[method+" "+path] {
		if r == role {
			return true
		}
	}
	return false
}

// noRoute reports a request that matched no admin route: the group's
// catch-all (404 not_found) or a route's path with another method (405).
// Those are answered as for any token; every other route missing from the
// table is refused.
func noRoute(method, path string) bool {
	if _, known := routeRoles[method+" "+path]; known {
		return false
	}
	if strings.HasSuffix(path, "/*") || path == "" {
		return true
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
		if _, ok := routeRoles[m+" "+path]; ok && m != method {
			return true
		}
	}
	return false
}

// RouteRoles returns a copy of the role table ("METHOD path" → roles).
func RouteRoles() map[string][]wire.Role {
	out := make(map[string][]wire.Role, len(routeRoles))
	for k, v := range routeRoles {
		out[k] = append([]wire.Role(nil), v...)
	}
	return out
}

// whoami: GET /admin/whoami — the name and role of the calling token, so
// a client (the console) can offer only what the role allows.
func (s *Server) whoami(c echo.Context) error {
	if len(c.QueryParams()) > 0 {
		return invalid("this route takes no query parameter")
	}
	return c.JSON(http.StatusOK, map[string]string{"name": string(operator(c)), "role": string(role(c))})
}
