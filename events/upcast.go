package events

import (
	"fmt"

	"taskledger/ledger"
	"taskledger/wire"
)

// Event body schemas that changed, and the upcasters that turn every older
// schema into the current body type while reading. A schema, once written
// to a log, never changes meaning; the structs below are frozen copies of
// the older schemas and must never be edited.

// taskHeartbeatV1 is task.heartbeat schema 1 (logs written before
// previous_lease_expires_at existed; see testdata/v1).
type taskHeartbeatV1 struct {
	TaskID         string `msgpack:"task_id"`
	DeviceID       string `msgpack:"device_id"`
	Generation     uint64 `msgpack:"claim_generation"`
	ExecutionID    string `msgpack:"execution_id"`
	LeaseExpiresAt int64  `msgpack:"lease_expires_at"`
	Step           string `msgpack:"step"`
	ClientTime     *int64 `msgpack:"client_time"`
}

func upcastHeartbeatV1(raw []byte) (any, error) {
	var v taskHeartbeatV1
	if err := ledger.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%w: %s schema 1 body: %v", ledger.ErrCorrupt, EvTaskHeartbeat, err)
	}
	return &TaskHeartbeat{TaskID: v.TaskID, DeviceID: v.DeviceID, Generation: v.Generation, ExecutionID: v.ExecutionID,
		LeaseExpiresAt: v.LeaseExpiresAt, Step: v.Step, ClientTime: v.ClientTime}, nil
}

// adminTokenCreatedV1 is admin_token.created schema 1 (logs written before
// roles existed).
type adminTokenCreatedV1 struct {
	Name      string `msgpack:"name"`
	TokenHash string `msgpack:"token_sha256"`
}

// upcastAdminTokenCreatedV1 reads a token created before roles as an
// admin token: it could do everything, and still can.
func upcastAdminTokenCreatedV1(raw []byte) (any, error) {
	var v adminTokenCreatedV1
	if err := ledger.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%w: %s schema 1 body: %v", ledger.ErrCorrupt, EvAdminTokenCreated, err)
	}
	return &AdminTokenCreated{Name: v.Name, TokenHash: v.TokenHash, Role: string(wire.RoleAdmin)}, nil
}

// registerUpcasters installs the current schema of every changed event
// type and the upcasters of its older schemas.
func registerUpcasters() {
	hb := codecs[EvTaskHeartbeat]
	hb.current = 2
	hb.upcast[1] = upcastHeartbeatV1
	codecs[EvTaskHeartbeat] = hb

	added := func(typ Type, current int) {
		c := codecs[typ]
		for old := 1; old < current; old++ {
			c.upcast[old] = upcastAddedFields(typ, old, c.new)
		}
		c.current = current
		codecs[typ] = c
	}
	added(EvTaskAuthorized, 2) // 2: takeover
	added(EvTaskCreated, 2)    // 2: takeover (of the authorization created with the task)
	added(EvTaskClaimed, 2)    // 2: secret_check (of a server-issued token)
	// 2: lease_expires_at, the running lease the decision was judged
	// against (quiet heartbeats, decision D100); 0 in schema 1.
	// 2: role; schema 1 reads as admin (upcastAdminTokenCreatedV1).
	at := codecs[EvAdminTokenCreated]
	at.current = 2
	at.upcast[1] = upcastAdminTokenCreatedV1
	codecs[EvAdminTokenCreated] = at
	for _, typ := range []Type{EvTaskAwaitingConfirmation, EvTaskResumed, EvTaskCompleted, EvTaskFailed,
		EvTaskLateReport, EvTaskCanceled, EvTaskRecovered, EvTaskEvidenceAttached} {
		added(typ, 2)
	}
}

// upcastAddedFields decodes a body of an older schema that differs from
// the current one only by fields added since (absent → zero value). newBody
// returns the current body type.
func upcastAddedFields(typ Type, schema int, newBody func() any) func(raw []byte) (any, error) {
	return func(raw []byte) (any, error) {
		v := newBody()
		if err := ledger.Unmarshal(raw, v); err != nil {
			return nil, fmt.Errorf("%w: %s schema %d body: %v", ledger.ErrCorrupt, typ, schema, err)
		}
		return v, nil
	}
}
