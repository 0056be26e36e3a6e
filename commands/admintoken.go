package commands

import (
	"errors"

	"taskledger/events"
	"taskledger/projections"
	"taskledger/wire"
)

// Admin token operations (idempotency operation names).
const (
	OpCreateAdminToken = "create-admin-token"
	OpRevokeAdminToken = "revoke-admin-token"
)

// Admin token refusals.
var (
	ErrAdminTokenExists   = errors.New("commands: an admin token of that name exists")
	ErrAdminTokenNotFound = errors.New("commands: no admin token of that name")
	ErrLastAdminToken     = errors.New("commands: the last active admin token cannot be revoked")
	// ErrUnknownRole: a role that is not admin, operator or auditor.
	ErrUnknownRole = errors.New("commands: unknown admin token role")
	// ErrInsufficientRole: the caller's role may not do this (the api
	// refuses most such requests before they reach a command; this is
	// the rule of the commands themselves: no token creates, revokes or
	// replaces a token of a higher role than its own).
	ErrInsufficientRole = errors.New("commands: the admin token's role does not allow this")
)

// callerRole is the role of the token a request came with: the offline
// CLI at the data directory ("" operator) acts as admin.
func (a *AdminReq) callerRole() wire.Role {
	if a.Operator == "" || a.Role == "" {
		return wire.RoleAdmin
	}
	return a.Role
}

// tokenRole is the role of the active admin token name (admin for one held
// outside the log).
func tokenRole(x *Ctx, name string) wire.Role {
	if a := x.State.AdminTokens[name]; a != nil && a.Role != "" {
		return a.Role
	}
	return wire.RoleAdmin
}

// adminTokenActive reports whether name is an active admin token: the
// log's, or one held outside it (the ledger's initial token) that the log
// never spoke of.
func adminTokenActive(x *Ctx, name string) bool {
	if a := x.State.AdminTokens[name]; a != nil {
		return a.Status == projections.AdminTokenActive
	}
	_, outside := x.Cfg.OutsideAdminTokens[name]
	return outside
}

// CreateAdminToken creates an admin token; the api generated it and
// passes only its hash.
type CreateAdminToken struct {
	AdminReq
	Name      string
	TokenHash string
	Role      wire.Role // "": admin
}

// Decide creates the admin token unless the name is taken, the role is
// unknown, or the role is above the caller's.
func (c *CreateAdminToken) Decide(x *Ctx) (*Decision, error) {
	scope, dec, err := c.begin(x, OpCreateAdminToken)
	if dec != nil || err != nil {
		return dec, err
	}
	role, ok := wire.ParseRole(string(c.Role))
	if !ok {
		return nil, ErrUnknownRole
	}
	if role.Rank() > c.callerRole().Rank() {
		return nil, ErrInsufficientRole
	}
	if adminTokenActive(x, c.Name) {
		return nil, ErrAdminTokenExists
	}
	return c.decision(scope, events.AdminTokenStream(c.Name), events.EvAdminTokenCreated,
		&events.AdminTokenCreated{Name: c.Name, TokenHash: c.TokenHash, Role: string(role)}), nil
}

// RevokeAdminToken revokes an admin token; the server stops honouring it
// as soon as the revocation is answered.
type RevokeAdminToken struct {
	AdminReq
	Name   string
	Reason string
}

// Decide revokes the admin token unless it is the last active one or its
// role is above the caller's.
func (c *RevokeAdminToken) Decide(x *Ctx) (*Decision, error) {
	scope, dec, err := c.begin(x, OpRevokeAdminToken)
	if dec != nil || err != nil {
		return dec, err
	}
	if !adminTokenActive(x, c.Name) {
		return nil, ErrAdminTokenNotFound
	}
	if tokenRole(x, c.Name).Rank() > c.callerRole().Rank() {
		return nil, ErrInsufficientRole
	}
	if ActiveAdminTokens(x.State, x.Cfg) == 1 {
		return nil, ErrLastAdminToken
	}
	return c.decision(scope, events.AdminTokenStream(c.Name), events.EvAdminTokenRevoked,
		&events.AdminTokenRevoked{Name: c.Name, Reason: c.Reason}), nil
}

// ActiveAdminTokens counts the active admin tokens.
func ActiveAdminTokens(s *projections.State, cfg *Config) int {
	n := 0
	for _, a := range s.AdminTokens {
		if a.Status == projections.AdminTokenActive {
			n++
		}
	}
	for name := range cfg.OutsideAdminTokens {
		if s.AdminTokens[name] == nil {
			n++
		}
	}
	return n
}
