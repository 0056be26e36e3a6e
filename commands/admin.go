package commands

import (
	"time"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
	"taskledger/wire"
)

// Operator is an authenticated admin token's name.
type Operator string

// Actor is the operator as stamped on events.
func (o Operator) Actor() ledger.Actor {
	return ledger.Actor{Kind: ledger.ActorOperator, ID: string(o)}
}

// Admin operations (idempotency operation names).
const (
	OpRegisterDevice      = "register-device"
	OpRevokeDevice        = "revoke-device"
	OpCreateTask          = "create-task"
	OpAmend               = "amend"
	OpSetReferenceImage   = "reference-image"
	OpAuthorize           = "authorize"
	OpRevokeAuthorization = "revoke-authorization"
	OpCancel              = "cancel"
	OpRecover             = "recover"
)

// AdminReq is the part every admin mutation shares.
type AdminReq struct {
	Operator    Operator  // "": the offline CLI at the data directory, stamped as the system
	Role        wire.Role // the role of the operator's token ("": admin)
	Key         string
	Fingerprint []byte
}

// SystemActor is how events of the offline CLI are stamped.
var SystemActor = ledger.Actor{Kind: ledger.ActorSystem, ID: "taskledger"}

func (a *AdminReq) actor() ledger.Actor {
	if a.Operator == "" {
		return SystemActor
	}
	return a.Operator.Actor()
}

// begin applies the idempotency rules of an admin command. Admin replays
// answer the current document of what the command changed.
func (a *AdminReq) begin(x *Ctx, op string) (string, *Decision, error) {
	scope := Scope(a.actor(), op)
	dec, err := lookupIdem(x, scope, a.Key, a.Fingerprint, nil)
	return scope, dec, err
}

func (a *AdminReq) decision(scope, stream string, typ events.Type, body any) *Decision {
	return &Decision{
		Events: []Draft{{Stream: stream, Type: typ, Actor: a.actor(), Idem: idem(scope, a.Key, a.Fingerprint), Body: body}},
		Answer: recorded(scope, a.Key),
	}
}

// RegisterDevice registers a device; the api generated its token and
// passes only the hash.
type RegisterDevice struct {
	AdminReq
	OwnerID        string
	Name           string
	HasChecks      bool
	RequiredChecks []string
	TokenHash      string
}

// Decide registers the device.
func (c *RegisterDevice) Decide(x *Ctx) (*Decision, error) {
	scope, dec, err := c.begin(x, OpRegisterDevice)
	if dec != nil || err != nil {
		return dec, err
	}
	id := x.newID()
	return c.decision(scope, events.DeviceStream(id), events.EvDeviceRegistered, &events.DeviceRegistered{
		DeviceID: id, OwnerID: c.OwnerID, Name: c.Name, HasChecks: c.HasChecks,
		RequiredChecks: c.RequiredChecks, TokenHash: c.TokenHash}), nil
}

// RevokeDevice revokes a device. Its open task stays until recovered.
type RevokeDevice struct {
	AdminReq
	DeviceID string
	Reason   string
}

// Decide revokes the device.
func (c *RevokeDevice) Decide(x *Ctx) (*Decision, error) {
	scope, dec, err := c.begin(x, OpRevokeDevice)
	if dec != nil || err != nil {
		return dec, err
	}
	d := x.State.Devices[c.DeviceID]
	if d == nil {
		return nil, ErrDeviceNotFound
	}
	if d.Status != projections.DeviceStatusActive {
		return nil, ErrInvalidState
	}
	return c.decision(scope, events.DeviceStream(d.ID), events.EvDeviceRevoked,
		&events.DeviceRevoked{DeviceID: d.ID, Reason: c.Reason}), nil
}

// CreateTask creates a task, optionally authorized in the same command.
type CreateTask struct {
	AdminReq
	Payload       string // canonical JSON
	PayloadSHA256 string
	AuthorizeTTL  time.Duration // 0: no authorization
	// Takeover is the authorization's policy: projections.TakeoverReclaim,
	// TakeoverManual, or "" for the server's default (Config.DefaultTakeover).
	Takeover string
}

// Decide creates the task.
func (c *CreateTask) Decide(x *Ctx) (*Decision, error) {
	scope, dec, err := c.begin(x, OpCreateTask)
	if dec != nil || err != nil {
		return dec, err
	}
	id := x.newID()
	body := &events.TaskCreated{TaskID: id, Payload: c.Payload, PayloadSHA256: c.PayloadSHA256}
	if c.AuthorizeTTL > 0 {
		body.Authorization = &events.AuthBody{ID: x.newID(), Revision: 1, PayloadSHA256: c.PayloadSHA256,
			ExpiresAt: x.Now + c.AuthorizeTTL.Milliseconds()}
		body.Takeover = takeoverOf(c.Takeover, x.Cfg)
	}
	return c.decision(scope, events.TaskStream(id), events.EvTaskCreated, body), nil
}

// amendable returns the task if an operator may amend/authorize it: PENDING,
// or CLAIMED with an expired claim lease (the stale claim is closed).
func amendable(x *Ctx, id string) (*projections.Task, *events.ClosedClaim, uint64, error) {
	t, err := x.State.Task(id) // a settled task is read from the read model: not amendable
	if err != nil {
		return nil, nil, 0, err
	}
	if t == nil {
		return nil, nil, 0, ErrTaskNotFound
	}
	switch {
	case t.State == projections.StatePending:
		return t, nil, t.Version, nil
	case t.State == projections.StateClaimed && t.Claim != nil && x.Now >= t.Claim.LeaseExpiresAt:
		return t, &events.ClosedClaim{DeviceID: t.Claim.DeviceID, Generation: t.Claim.Generation}, t.Version + 1, nil
	}
	return nil, nil, 0, ErrInvalidState
}

// beginAmendable is begin followed by amendable: the idempotency rules,
// then the task an operator may amend, authorize or revoke.
func (a *AdminReq) beginAmendable(x *Ctx, op, taskID string) (string, *projections.Task, *events.ClosedClaim, uint64, *Decision, error) {
	scope, dec, err := a.begin(x, op)
	if dec != nil || err != nil {
		return scope, nil, nil, 0, dec, err
	}
	t, closed, v, err := amendable(x, taskID)
	return scope, t, closed, v, nil, err
}

// Amend replaces a task's payload.
type Amend struct {
	AdminReq
	TaskID           string
	ExpectedRevision uint64
	Payload          string
	PayloadSHA256    string
}

// Decide amends the task.
func (c *Amend) Decide(x *Ctx) (*Decision, error) {
	scope, t, closed, v, dec, err := c.beginAmendable(x, OpAmend, c.TaskID)
	if dec != nil || err != nil {
		return dec, err
	}
	if t.Revision != c.ExpectedRevision {
		return nil, ErrRevisionMismatch
	}
	return c.decision(scope, events.TaskStream(t.ID), events.EvTaskAmended, &events.TaskAmended{
		TaskID: t.ID, Revision: t.Revision + 1, Payload: c.Payload, PayloadSHA256: c.PayloadSHA256,
		Version: v, Closed: closed}), nil
}

// SetReferenceImage sets a task's reference image (the blob is already
// stored and fsynced).
type SetReferenceImage struct {
	AdminReq
	TaskID string
	SHA256 string
	Size   int64
}

// Decide sets the image: an amendment.
func (c *SetReferenceImage) Decide(x *Ctx) (*Decision, error) {
	scope, t, closed, v, dec, err := c.beginAmendable(x, OpSetReferenceImage, c.TaskID)
	if dec != nil || err != nil {
		return dec, err
	}
	return c.decision(scope, events.TaskStream(t.ID), events.EvTaskReferenceImageSet, &events.TaskReferenceImageSet{
		TaskID: t.ID, Revision: t.Revision + 1, SHA256: c.SHA256, Size: c.Size, Version: v, Closed: closed}), nil
}

// Authorize authorizes a task's current revision.
type Authorize struct {
	AdminReq
	TaskID           string
	ExpectedRevision uint64
	TTL              time.Duration
	// Takeover is projections.TakeoverReclaim, TakeoverManual, or "" for
	// the server's default (Config.DefaultTakeover).
	Takeover string
}

// Decide authorizes the task.
func (c *Authorize) Decide(x *Ctx) (*Decision, error) {
	scope, t, closed, v, dec, err := c.beginAmendable(x, OpAuthorize, c.TaskID)
	if dec != nil || err != nil {
		return dec, err
	}
	if t.Revision != c.ExpectedRevision {
		return nil, ErrRevisionMismatch
	}
	img := ""
	if t.Image != nil {
		img = t.Image.SHA256
	}
	return c.decision(scope, events.TaskStream(t.ID), events.EvTaskAuthorized, &events.TaskAuthorized{
		TaskID: t.ID, Version: v, Closed: closed, Authorization: events.AuthBody{ID: x.newID(), Revision: t.Revision,
			PayloadSHA256: t.PayloadSHA256, ImageSHA256: img, ExpiresAt: x.Now + c.TTL.Milliseconds()},
		Takeover: takeoverOf(c.Takeover, x.Cfg)}), nil
}

// RevokeAuthorization makes a task's authorization ineligible.
type RevokeAuthorization struct {
	AdminReq
	TaskID string
	Reason string
}

// Decide revokes the authorization.
func (c *RevokeAuthorization) Decide(x *Ctx) (*Decision, error) {
	scope, t, closed, v, dec, err := c.beginAmendable(x, OpRevokeAuthorization, c.TaskID)
	if dec != nil || err != nil {
		return dec, err
	}
	if t.Auth == nil || t.Auth.Status != projections.AuthActive {
		return nil, ErrInvalidState
	}
	return c.decision(scope, events.TaskStream(t.ID), events.EvTaskAuthorizationRevoked, &events.TaskAuthorizationRevoked{
		TaskID: t.ID, AuthorizationID: t.Auth.ID, Reason: c.Reason, Version: v, Closed: closed}), nil
}

// Cancel cancels a task: at once when PENDING or CLAIMED, by request when
// it is executing.
type Cancel struct {
	AdminReq
	TaskID          string
	Reason          string
	ExpectedVersion *uint64
}

// Decide cancels the task.
func (c *Cancel) Decide(x *Ctx) (*Decision, error) {
	scope, dec, err := c.begin(x, OpCancel)
	if dec != nil || err != nil {
		return dec, err
	}
	t, err := x.State.Task(c.TaskID) // a settled task is read from the read model
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, ErrTaskNotFound
	}
	if t.Terminal() {
		return nil, ErrInvalidState
	}
	if c.ExpectedVersion != nil && *c.ExpectedVersion != t.Version {
		return nil, ErrVersionMismatch
	}
	stream := events.TaskStream(t.ID)
	if t.Started() {
		return c.decision(scope, stream, events.EvTaskCancelRequested,
			&events.TaskCancelRequested{TaskID: t.ID, Reason: c.Reason}), nil
	}
	return c.decision(scope, stream, events.EvTaskCanceled, &events.TaskCanceled{
		TaskID: t.ID, By: "operator", Reason: c.Reason, Version: t.Version + 1}), nil
}

// Recover is an operator's decision about a task whose device went silent
// or was revoked.
type Recover struct {
	AdminReq
	TaskID          string
	Decision        string // events.RecoverFail or RecoverRequeue
	Reason          string
	ExpectedVersion uint64
}

// Decide recovers the task.
func (c *Recover) Decide(x *Ctx) (*Decision, error) {
	scope, dec, err := c.begin(x, OpRecover)
	if dec != nil || err != nil {
		return dec, err
	}
	t, err := x.State.Task(c.TaskID) // a settled task is read from the read model
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, ErrTaskNotFound
	}
	if !t.Open() || t.Claim == nil {
		return nil, ErrInvalidState
	}
	if c.ExpectedVersion != t.Version {
		return nil, ErrVersionMismatch
	}
	d := x.State.Devices[t.Claim.DeviceID]
	revoked := d != nil && d.Status == projections.DeviceStatusRevoked
	if !revoked && !t.Started() && x.Now >= t.Claim.LeaseExpiresAt && !x.State.NeedsOperator(t, x.Now) {
		// A stale claim of an active device that another device may still
		// take over is not recovered: an operator command (amend,
		// authorize, cancel) or the next claim closes it.
		return nil, ErrInvalidState
	}
	if !revoked && !x.State.NeedsOperator(t, x.Now) && (!t.Started() || x.Now < t.Exec.Lease()) {
		return nil, ErrLeaseNotExpired
	}
	exec, lease := "", int64(0)
	if t.Started() {
		exec, lease = t.Exec.ID, t.Exec.Lease()
	}
	dec = c.decision(scope, events.TaskStream(t.ID), events.EvTaskRecovered, &events.TaskRecovered{
		TaskID: t.ID, Decision: c.Decision, Reason: c.Reason, DeviceID: t.Claim.DeviceID,
		Generation: t.Claim.Generation, ExecutionID: exec, Version: t.Version + 1, LeaseExpiresAt: lease})
	if exec != "" {
		dec = dropSoftLease(dec, exec)
	}
	return dec, nil
}

// AdvanceClock moves the manual test clock forward.
type AdvanceClock struct {
	Seconds int64
}

// Decide advances the clock: stored in the meta record with the batch.
func (c *AdvanceClock) Decide(x *Ctx) (*Decision, error) {
	next := x.Now + c.Seconds*1000
	return &Decision{ManualClock: &next,
		Answer: func(*projections.State) Result { return Result{Value: next} }}, nil
}

// takeoverOf is the policy an authorization records, as decided: the one
// the request named, else the server's default (cfg nil: none), else
// reclaim. The event carries it, so a replay never reads the flag.
func takeoverOf(p string, cfg *Config) string {
	if p == "" && cfg != nil {
		p = cfg.DefaultTakeover
	}
	if p == projections.TakeoverManual {
		return p
	}
	return projections.TakeoverReclaim
}
