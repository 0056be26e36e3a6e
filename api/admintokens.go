package api

import (
	"maps"
	"net/http"
	"regexp"
	"slices"

	"github.com/labstack/echo/v4"

	"taskledger/commands"
	"taskledger/projections"
	"taskledger/wire"
)

// The admin tokens of a running server, created and revoked as events:
//
//	POST /admin/admin-tokens              {"name", "role"?} → 201, the token once
//	GET  /admin/admin-tokens                         → every name, never a token
//	GET  /admin/admin-tokens/{name}
//	POST /admin/admin-tokens/{name}/revoke {"reason"} → 200
//
// A token created is honoured, and one revoked refused, by the next
// request after the answer (commands.Engine.AuthenticateAdmin).

// AdminTokenName is an admin token's name (the operator's id on events).
var AdminTokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Admin token origins in answers.
const (
	originLog     = "log"      // created through the log
	originDataDir = "data_dir" // the initial token, kept beside the log
)

func (s *Server) adminTokenRoutes(adm *echo.Group) {
	adm.POST("/admin-tokens", s.createAdminToken)
	adm.GET("/admin-tokens", s.listAdminTokens)
	adm.GET("/admin-tokens/:name", s.getAdminToken)
	adm.POST("/admin-tokens/:name/revoke", s.revokeAdminToken)
}

// adminTokenDoc is the document of name, or nil when there is none.
func adminTokenDoc(st *projections.State, cfg *commands.Config, name string) *wire.AdminToken {
	a := st.AdminTokens[name]
	if a == nil {
		if _, ok := cfg.OutsideAdminTokens[name]; !ok {
			return nil
		}
		return &wire.AdminToken{Name: name, Status: projections.AdminTokenActive, Role: wire.RoleAdmin, Origin: originDataDir}
	}
	role := wire.Role(a.Role)
	if role == "" {
		role = wire.RoleAdmin
	}
	doc := &wire.AdminToken{Name: a.Name, Status: a.Status, Role: role, Origin: originLog}
	if a.CreatedAt == 0 {
		doc.Origin = originDataDir
	} else {
		by := a.CreatedBy
		doc.CreatedAt, doc.CreatedBy = formatTime(a.CreatedAt), &by
	}
	if a.Status == projections.AdminTokenRevoked {
		by, reason := a.RevokedBy, a.RevokeReason
		doc.RevokedAt, doc.RevokedBy, doc.RevokeReason = formatTime(a.RevokedAt), &by, &reason
	}
	return doc
}

func (s *Server) answerAdminToken(c echo.Context, status int, replayed bool, name, token string) error {
	if replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	var doc *wire.AdminToken
	s.eng.Read(func(st *projections.State) { doc = adminTokenDoc(st, s.eng.Config(), name) })
	if doc == nil {
		return commands.ErrAdminTokenNotFound
	}
	doc.Token = token
	return c.JSON(status, doc)
}

// createAdminToken: POST /admin/admin-tokens.
func (s *Server) createAdminToken(c echo.Context) error {
	f, key, canon, err := adminJSON(c)
	if err != nil {
		return err
	}
	name := f.str("name", true)
	roleName := f.optStr("role")
	if err := f.done(); err != nil {
		return err
	}
	if !AdminTokenName.MatchString(name) {
		return invalid("field \"name\" must be 1 to 64 characters of [A-Za-z0-9._-], starting with a letter or digit")
	}
	newRole := wire.RoleAdmin
	if roleName != nil {
		r, ok := wire.ParseRole(*roleName)
		if !ok || *roleName == "" {
			return commands.ErrUnknownRole
		}
		newRole = r
	}
	token, err := NewAdminToken()
	if err != nil {
		return err
	}
	cmd := &commands.CreateAdminToken{AdminReq: s.adminReq(c, commands.OpCreateAdminToken, key, canon),
		Name: name, TokenHash: commands.HashToken(token), Role: newRole}
	res, err := s.do(c, cmd)
	if err != nil {
		return err
	}
	if res.Replayed {
		token = ""
	}
	return s.answerAdminToken(c, http.StatusCreated, res.Replayed, name, token)
}

// revokeAdminToken: POST /admin/admin-tokens/{name}/revoke.
func (s *Server) revokeAdminToken(c echo.Context) error {
	reason, key, canon, err := revocationJSON(c)
	if err != nil {
		return err
	}
	name := c.Param("name")
	if !AdminTokenName.MatchString(name) {
		return commands.ErrAdminTokenNotFound
	}
	res, err := s.do(c, &commands.RevokeAdminToken{AdminReq: s.adminReq(c, commands.OpRevokeAdminToken, key, name, canon),
		Name: name, Reason: reason})
	if err != nil {
		return err
	}
	return s.answerAdminToken(c, http.StatusOK, res.Replayed, name, "")
}

// listAdminTokens: GET /admin/admin-tokens — every name the server knows,
// active or revoked, by name; never a token or its hash.
func (s *Server) listAdminTokens(c echo.Context) error {
	if len(c.QueryParams()) > 0 {
		return invalid("this route takes no query parameter")
	}
	var out []wire.AdminToken
	s.eng.Read(func(st *projections.State) { out = AdminTokenDocs(st, s.eng.Config()) })
	return c.JSON(http.StatusOK, wire.AdminTokenList{AdminTokens: out})
}

// AdminTokenDocs are the documents of every admin token name, by name.
func AdminTokenDocs(st *projections.State, cfg *commands.Config) []wire.AdminToken {
	names := slices.Collect(maps.Keys(cfg.OutsideAdminTokens))
	for n := range st.AdminTokens {
		if _, outside := cfg.OutsideAdminTokens[n]; !outside {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := make([]wire.AdminToken, 0, len(names))
	for _, n := range names {
		out = append(out, *adminTokenDoc(st, cfg, n))
	}
	return out
}

// getAdminToken: GET /admin/admin-tokens/{name}.
func (s *Server) getAdminToken(c echo.Context) error {
	if len(c.QueryParams()) > 0 {
		return invalid("this route takes no query parameter")
	}
	return s.answerAdminToken(c, http.StatusOK, false, c.Param("name"), "")
}
