package commands

import (
	"errors"
	"testing"

	"taskledger/events"
	"taskledger/wire"
)

// No token creates, revokes or replaces a token of a role above its own,
// whatever the route table lets through; an unknown role is refused; a
// role the caller holds or one below it is recorded on the event.
func TestAdminTokenRoleIsNeverRaisedByALesserRole(t *testing.T) {
	w := newWorld(t)
	as := func(r wire.Role) AdminReq { a := w.admin(); a.Role = r; return a }
	w.given(&CreateAdminToken{AdminReq: as(wire.RoleAdmin), Name: "boss", TokenHash: "h-boss", Role: wire.RoleAdmin})
	w.given(&CreateAdminToken{AdminReq: as(wire.RoleAdmin), Name: "ops", TokenHash: "h-ops", Role: wire.RoleOperator})

	for _, c := range []struct {
		name string
		cmd  Command
		want error
	}{
		{"operator creates an admin", &CreateAdminToken{AdminReq: as(wire.RoleOperator), Name: "x", TokenHash: "h-x", Role: wire.RoleAdmin}, ErrInsufficientRole},
		{"auditor creates an operator", &CreateAdminToken{AdminReq: as(wire.RoleAuditor), Name: "x", TokenHash: "h-x", Role: wire.RoleOperator}, ErrInsufficientRole},
		{"operator revokes an admin", &RevokeAdminToken{AdminReq: as(wire.RoleOperator), Name: "boss", Reason: "r"}, ErrInsufficientRole},
		{"operator revokes the initial token", &RevokeAdminToken{AdminReq: as(wire.RoleOperator), Name: "initial", Reason: "r"}, ErrInsufficientRole},
		{"auditor revokes an operator", &RevokeAdminToken{AdminReq: as(wire.RoleAuditor), Name: "ops", Reason: "r"}, ErrInsufficientRole},
		{"unknown role", &CreateAdminToken{AdminReq: as(wire.RoleAdmin), Name: "x", TokenHash: "h-x", Role: "root"}, ErrUnknownRole},
	} {
		if w.cfg.OutsideAdminTokens == nil {
			w.cfg.OutsideAdminTokens = map[string]string{"initial": "h-initial"}
		}
		before := w.head
		if _, err := w.decide(c.cmd); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if w.head.Seq != before.Seq {
			t.Errorf("%s: decided events", c.name)
		}
	}

	// An operator's token may act on its own rank; the role is on the event.
	w.given(&CreateAdminToken{AdminReq: as(wire.RoleOperator), Name: "aud", TokenHash: "h-aud", Role: wire.RoleAuditor})
	if a := w.s.AdminTokens["aud"]; a == nil || a.Role != wire.RoleAuditor {
		t.Fatalf("aud: %+v", a)
	}
	w.given(&RevokeAdminToken{AdminReq: as(wire.RoleOperator), Name: "aud", Reason: "r"})
	// No role given is admin, as is the offline CLI (no operator).
	w.given(&CreateAdminToken{AdminReq: AdminReq{Key: w.key(), Fingerprint: []byte("offline")}, Name: "cli", TokenHash: "h-cli"})
	if a := w.s.AdminTokens["cli"]; a.Role != wire.RoleAdmin {
		t.Fatalf("cli: role %q", a.Role)
	}
}

// A token created before roles existed (admin_token.created schema 1)
// reads as an admin token.
func TestAdminTokenCreatedSchema1ReadsAsAdmin(t *testing.T) {
	if got := events.CurrentSchema(events.EvAdminTokenCreated); got != 2 {
		t.Fatalf("admin_token.created is written with schema %d, want 2", got)
	}
	// Golden schema-1 body as the previous release wrote it:
	// {"name": "ops", "token_sha256": "ab"}.
	v1 := []byte{0x82, 0xa4, 'n', 'a', 'm', 'e', 0xa3, 'o', 'p', 's', 0xac, 't', 'o', 'k', 'e', 'n', '_', 's', 'h', 'a', '2', '5', '6', 0xa2, 'a', 'b'}
	b, err := events.DecodeBody(events.EvAdminTokenCreated, 1, v1)
	if err != nil {
		t.Fatal(err)
	}
	if a := b.(*events.AdminTokenCreated); a.Name != "ops" || a.TokenHash != "ab" || a.Role != string(wire.RoleAdmin) {
		t.Fatalf("upcast schema 1: %+v", a)
	}
}
