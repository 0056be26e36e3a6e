package events

import (
	"fmt"
	"reflect"
	"sync"

	"taskledger/ledger"
)

// bodyCodec knows how to decode one event type: the current schema
// directly, older schemas through an upcaster.
type bodyCodec struct {
	current int
	new     func() any
	// upcast decodes an older schema's raw body into the current type.
	upcast map[int]func(raw []byte) (any, error)
}

var codecs = map[Type]bodyCodec{}

func register(typ Type, newBody func() any) {
	codecs[typ] = bodyCodec{current: 1, new: newBody, upcast: map[int]func([]byte) (any, error){}}
}

func init() {
	register(EvTaskCreated, func() any { return new(TaskCreated) })
	register(EvTaskAmended, func() any { return new(TaskAmended) })
	register(EvTaskReferenceImageSet, func() any { return new(TaskReferenceImageSet) })
	register(EvTaskAuthorized, func() any { return new(TaskAuthorized) })
	register(EvTaskAuthorizationRevoked, func() any { return new(TaskAuthorizationRevoked) })
	register(EvTaskClaimed, func() any { return new(TaskClaimed) })
	register(EvTaskClaimResumed, func() any { return new(TaskClaimResumed) })
	register(EvTaskClaimRenewed, func() any { return new(TaskClaimRenewed) })
	register(EvTaskReleased, func() any { return new(TaskReleased) })
	register(EvTaskStarted, func() any { return new(TaskStarted) })
	register(EvTaskHeartbeat, func() any { return new(TaskHeartbeat) })
	register(EvTaskAwaitingConfirmation, func() any { return new(TaskExecStep) })
	register(EvTaskResumed, func() any { return new(TaskExecStep) })
	register(EvTaskCompleted, func() any { return new(TaskCompleted) })
	register(EvTaskFailed, func() any { return new(TaskFailed) })
	register(EvTaskLateReport, func() any { return new(TaskLateReport) })
	register(EvTaskCancelRequested, func() any { return new(TaskCancelRequested) })
	register(EvTaskCanceled, func() any { return new(TaskCanceled) })
	register(EvTaskRecovered, func() any { return new(TaskRecovered) })
	register(EvTaskEvidenceAttached, func() any { return new(TaskEvidenceAttached) })
	register(EvDeviceRegistered, func() any { return new(DeviceRegistered) })
	register(EvDeviceRevoked, func() any { return new(DeviceRevoked) })
	register(EvDeviceClaimRequiresManual, func() any { return new(DeviceClaimRequiresManual) })
	register(EvAdminTokenCreated, func() any { return new(AdminTokenCreated) })
	register(EvAdminTokenRevoked, func() any { return new(AdminTokenRevoked) })
	registerUpcasters()
}

// CurrentSchema is the schema version new events of typ are written with.
func CurrentSchema(typ Type) int { return codecs[typ].current }

// DecodeBody decodes an event body of the given type and schema into the
// current body type, upcasting older schemas.
func DecodeBody(typ Type, schema int, raw []byte) (any, error) {
	return DecodeBodyShared(typ, schema, raw, nil)
}

// DecodeBodyShared is DecodeBody with the short strings of a body of the
// current schema shared through strs (nil: as DecodeBody).
func DecodeBodyShared(typ Type, schema int, raw []byte, strs *Strings) (any, error) {
	c, ok := codecs[typ]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownEvent, typ)
	}
	if schema == c.current {
		v := c.new()
		if decodeBodyFast(raw, v, strs) {
			return v, nil
		}
		v = c.new()
		if err := ledger.Unmarshal(raw, v); err != nil {
			return nil, fmt.Errorf("%w: %s body: %v", ledger.ErrCorrupt, typ, err)
		}
		return v, nil
	}
	up, ok := c.upcast[schema]
	if !ok {
		return nil, fmt.Errorf("%w: %s schema %d", ErrUnknownEvent, typ, schema)
	}
	return up(raw)
}

// EncodeBody encodes a body for an event of typ at its current schema.
func EncodeBody(body any) ([]byte, error) { return ledger.Marshal(body) }

// bodyTypes maps every event type to the Go type DecodeBody returns for
// its current schema.
var bodyTypes = sync.OnceValue(func() map[Type]reflect.Type {
	m := make(map[Type]reflect.Type, len(codecs))
	for typ, c := range codecs {
		m[typ] = reflect.TypeOf(c.new())
	}
	return m
})

// BodyType is the Go type DecodeBody returns for typ at its current
// schema; ok is false for an unknown type.
func BodyType(typ Type) (t reflect.Type, ok bool) {
	t, ok = bodyTypes()[typ]
	return t, ok
}
