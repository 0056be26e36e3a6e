package commands

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"

	"github.com/google/uuid"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// Principal is an authenticated device.
type Principal struct {
	DeviceID string
	OwnerID  string
}

// Actor is the principal as stamped on events.
func (p Principal) Actor() ledger.Actor {
	return ledger.Actor{Kind: ledger.ActorDevice, ID: p.DeviceID, Owner: p.OwnerID}
}

// activeDevice is the first check of every device command: the device is
// still ACTIVE at sequencing.
func activeDevice(x *Ctx, p Principal) (*projections.Device, error) {
	d := x.State.Devices[p.DeviceID]
	if d == nil || d.Status != projections.DeviceStatusActive {
		return nil, ErrDeviceRevoked
	}
	return d, nil
}

// RequiredChecks returns the readiness checks d must report true.
func RequiredChecks(d *projections.Device, cfg *Config) []string {
	if d.HasChecks {
		return d.RequiredChecks
	}
	return cfg.RequiredChecks
}

// MissingChecks returns the required checks p does not report as true.
func MissingChecks(required []string, p *projections.Presence) []string {
	missing := []string{}
	for _, c := range required {
		if p == nil || !p.Checks[c] {
			missing = append(missing, c)
		}
	}
	return missing
}

// Ready reports whether the device may claim at now.
func Ready(d *projections.Device, p *projections.Presence, now int64, cfg *Config) bool {
	if p == nil || p.Restored || now >= p.ReceivedAt+cfg.PresenceTTL.Milliseconds() {
		return false
	}
	return len(MissingChecks(RequiredChecks(d, cfg), p)) == 0
}

// PresenceReply is the answer to a presence heartbeat.
type PresenceReply struct {
	Claimable          bool
	MissingChecks      []string
	PresenceExpiresAt  int64
	ActiveTaskID       string
	ActiveTaskMismatch bool
}

// Presence is the presence heartbeat: soft state, not an event.
type Presence struct {
	Device   Principal
	Presence projections.Presence
}

// PresenceKey is the soft-record key of a device's presence.
func PresenceKey(deviceID string) string { return "presence/" + deviceID }

// Decide records the heartbeat and answers readiness.
func (c *Presence) Decide(x *Ctx) (*Decision, error) {
	d, err := activeDevice(x, c.Device)
	if err != nil {
		return nil, err
	}
	p := c.Presence
	p.ReceivedAt = x.Now
	raw, err := ledger.Marshal(&p)
	if err != nil {
		return nil, err
	}
	open := ""
	if t := x.State.Tasks[d.OpenTask]; t != nil && t.Claim != nil && t.Claim.DeviceID == d.ID &&
		(t.Started() || x.Now < t.Claim.LeaseExpiresAt) {
		open = t.ID
	}
	reply := PresenceReply{
		Claimable:          Ready(d, &p, x.Now, x.Cfg),
		MissingChecks:      MissingChecks(RequiredChecks(d, x.Cfg), &p),
		PresenceExpiresAt:  x.Now + x.Cfg.PresenceTTL.Milliseconds(),
		ActiveTaskID:       open,
		ActiveTaskMismatch: p.ActiveTaskID != open,
	}
	return &Decision{
		Soft:   []ledger.SoftRecord{{Key: PresenceKey(d.ID), Value: raw}},
		Effect: func(s *projections.State) { s.Presence[d.ID] = &p },
		Answer: func(*projections.State) Result { return Result{Value: reply} },
	}, nil
}

// ClaimNext asks for the oldest claimable task.
type ClaimNext struct {
	Device      Principal
	Key         string
	Fingerprint []byte
	SessionID   string
	// TokenHash is the SHA-256 (hex) of a client-issued X-Claim-Token, or
	// "" when the request carried none (server-issued).
	TokenHash string
}

// OpClaimNext is the idempotency operation of claim-next.
const OpClaimNext = "claim-next"

// softIdemWrites are the soft-bucket writes that keep rec (raw, its
// EncodeSoftIdem encoding) as a soft record — a "no task" claim-next, a
// quiet heartbeat: its put under a key ordered by time, and the delete of
// the id's older record (expired, not collected yet) stored under another
// key, so the bucket never keeps a record memory forgot.
func softIdemWrites(s *projections.State, rec *projections.IdemRecord, raw []byte) []ledger.SoftRecord {
	id := projections.IdemID(rec.Scope, rec.Key)
	key := projections.SoftIdemKey(id, rec.At)
	if old, ok := s.Idem.SoftKey(id); ok && old != key {
		return []ledger.SoftRecord{{Key: old}, {Key: key, Value: raw}}
	}
	return []ledger.SoftRecord{{Key: key, Value: raw}}
}

// Decide implements the claim decision of domain.md, in api.md's order.
func (c *ClaimNext) Decide(x *Ctx) (*Decision, error) {
	d, err := activeDevice(x, c.Device)
	if err != nil {
		return nil, err
	}
	actor := c.Device.Actor()
	scope := Scope(actor, OpClaimNext)
	if dec, err := lookupIdem(x, scope, c.Key, c.Fingerprint, func(r *projections.IdemRecord) error {
		if r.Outcome != projections.OutcomeAccepted {
			return nil // 204 and claim_requires_manual replay as recorded
		}
		t := x.State.Tasks[r.TaskID]
		if t == nil || !t.Open() || t.Claim == nil || t.Claim.DeviceID != d.ID || t.Claim.Generation != r.Reply.Generation {
			return ErrClaimReplayExpired
		}
		return nil
	}); dec != nil || err != nil {
		if dec != nil {
			dec.Answer = claimAnswer(dec.Answer)
		}
		return dec, err
	}
	// A "no task" record past retention is the key's expiry, decided
	// before readiness and never turned into a claim (D322).
	if x.State.Idem.SoftExpired(scope, c.Key, x.Now, x.Cfg.IdempotencyRetention.Milliseconds()) || x.State.Idem.Gone(scope, c.Key) {
		return nil, ErrIdempotencyKeyExpired
	}
	id := idem(scope, c.Key, c.Fingerprint)

	// A claim of this device that needs an operator (manual takeover, an
	// authorization that ended with the claim lease) is never re-claimed,
	// resumed or left behind for another task: a device never holds two.
	if t := x.State.Tasks[d.OpenTask]; t != nil && t.Claim != nil && t.Claim.DeviceID == d.ID && x.State.NeedsOperator(t, x.Now) {
		return requiresManual(actor, id, scope, c, d.ID, t.ID), nil
	}

	// The device's open task: resume it or refuse.
	if t := x.State.Tasks[d.OpenTask]; t != nil && t.Claim != nil && t.Claim.DeviceID == d.ID &&
		(t.Started() || x.Now < t.Claim.LeaseExpiresAt) {
		return c.resumeOrRefuse(t, d, actor, id, scope)
	}

	p := x.State.Presence[d.ID]
	if !Ready(d, p, x.Now, x.Cfg) {
		return nil, ErrDeviceNotReady
	}

	// Selection: the device's own expired claim first, then the oldest.
	var t *projections.Task
	if own := x.State.Tasks[d.OpenTask]; own != nil && own.State == projections.StateClaimed && own.Claim != nil &&
		own.Claim.DeviceID == d.ID && own.Claimable(x.Now) {
		t = own
	} else {
		t = x.State.NextClaimable(x.Now)
	}
	if t == nil {
		rec := &projections.IdemRecord{Scope: scope, Key: c.Key, Fingerprint: c.Fingerprint, At: x.Now,
			Outcome: projections.OutcomeNoTask, DeviceID: d.ID}
		raw, err := projections.EncodeSoftIdem(rec)
		if err != nil {
			return nil, err
		}
		return &Decision{
			Soft:   softIdemWrites(x.State, rec, raw),
			Effect: func(s *projections.State) { s.Idem.PutSoft(rec, raw) },
			Answer: func(*projections.State) Result { return Result{Record: rec} },
		}, nil
	}

	return c.claim(x, t, d, p, actor, id, scope)
}

// resumeOrRefuse decides a claim-next of a device whose own claim is live
// or whose task is executing: the same session with the same token gets
// its claim back (task.claim_resumed); a started task or another session
// is recorded as device.claim_requires_manual.
func (c *ClaimNext) resumeOrRefuse(t *projections.Task, d *projections.Device, actor ledger.Actor, id *ledger.Idem, scope string) (*Decision, error) {
	if t.Started() || t.Claim.SessionID != c.SessionID {
		return &Decision{
			Events: []Draft{{Stream: events.DeviceStream(d.ID), Type: events.EvDeviceClaimRequiresManual,
				Actor: actor, Idem: id, Body: &events.DeviceClaimRequiresManual{DeviceID: d.ID, SessionID: c.SessionID, TaskID: t.ID}}},
			Answer: recorded(scope, c.Key),
		}, nil
	}
	want := ""
	if t.Claim.TokenOrigin == events.TokenClient {
		want = t.Claim.TokenHash
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(c.TokenHash)) != 1 {
		return nil, ErrClaimTokenMismatch
	}
	return &Decision{
		Events: []Draft{{Stream: events.TaskStream(t.ID), Type: events.EvTaskClaimResumed, Actor: actor, Idem: id,
			Body: &events.TaskClaimResumed{TaskID: t.ID, DeviceID: d.ID, SessionID: c.SessionID,
				Generation: t.Claim.Generation, LeaseExpiresAt: t.Claim.LeaseExpiresAt}}},
		Answer: claimAnswer(recorded(scope, c.Key)),
	}, nil
}

// claim decides a new claim of t by d (task.claimed, generation +1): the
// claim lease, the client's token hash or a server-issued token, and the
// presence the device reported.
func (c *ClaimNext) claim(x *Ctx, t *projections.Task, d *projections.Device, p *projections.Presence, actor ledger.Actor, id *ledger.Idem, scope string) (*Decision, error) {
	gen := t.Generation + 1
	body := &events.TaskClaimed{TaskID: t.ID, DeviceID: d.ID, SessionID: c.SessionID, Generation: gen,
		Version: t.Version + 1, AuthorizationID: t.Auth.ID, AuthorizationExpiresAt: t.Auth.ExpiresAt,
		LeaseExpiresAt: min(x.Now+x.Cfg.ClaimLease.Milliseconds(), t.Auth.ExpiresAt)}
	if t.Claim != nil && t.Claim.DeviceID != d.ID {
		body.PreviousDeviceID = t.Claim.DeviceID
	}
	if c.TokenHash != "" {
		body.TokenOrigin, body.TokenHash = events.TokenClient, c.TokenHash
	} else {
		if x.Cfg.ClaimSecret == nil {
			return nil, ErrClaimTokenRequired
		}
		nonce, err := x.newNonce()
		if err != nil {
			return nil, err
		}
		body.TokenOrigin, body.Nonce = events.TokenServer, nonce
		body.TokenHash = HashToken(ServerToken(x.Cfg.ClaimSecret, d.ID, t.ID, t.Auth.ID, gen, body.Nonce))
		body.SecretCheck = hex.EncodeToString(SecretCheck(x.Cfg.ClaimSecret))
	}
	if p != nil {
		body.Presence = &events.PresenceSnapshot{ReceivedAt: p.ReceivedAt, AppVersion: p.AppVersion,
			OSVersion: p.OSVersion, TargetAppVersion: p.TargetAppVersion, Checks: p.Checks,
			RequiredChecks: RequiredChecks(d, x.Cfg)}
	}
	dec := &Decision{
		Events: []Draft{{Stream: events.TaskStream(t.ID), Type: events.EvTaskClaimed, Actor: actor, Idem: id, Body: body}},
		Answer: claimAnswer(recorded(scope, c.Key)),
	}
	if body.TokenOrigin == events.TokenServer && x.State.ServerClaims == 0 {
		dec.SecretCheck = SecretCheck(x.Cfg.ClaimSecret)
	}
	return dec, nil
}

// NewNonce returns the random 32-byte nonce of a server-issued claim
// token, as 64 lowercase hex characters (crypto/rand).
func NewNonce() (string, error) {
	var nonce [32]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(nonce[:]), nil
}

// HashToken is the SHA-256 (hex) under which a token is stored.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// ServerToken computes a server-issued claim token: HMAC-SHA256 over the
// domain-separated, length-prefixed device, task, authorization, generation
// and nonce, as 64 lowercase hex characters.
func ServerToken(secret []byte, device, task, auth string, gen uint64, nonce string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("taskledger/claim-token/v1"))
	for _, f := range []string{device, task, auth} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	var g [8]byte
	binary.BigEndian.PutUint64(g[:], gen)
	m.Write(g[:])
	nb, _ := hex.DecodeString(nonce)
	m.Write(nb)
	return hex.EncodeToString(m.Sum(nil))
}

// SecretCheck is the key-check value of a claim-token secret.
func SecretCheck(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("taskledger/secret-check/v1"))
	return m.Sum(nil)
}

// NewID returns a new canonical UUIDv4.
func NewID() string { return uuid.NewString() }

// requiresManual records a claim-next refused with claim_requires_manual.
func requiresManual(actor ledger.Actor, id *ledger.Idem, scope string, c *ClaimNext, device, task string) *Decision {
	return &Decision{
		Events: []Draft{{Stream: events.DeviceStream(device), Type: events.EvDeviceClaimRequiresManual,
			Actor: actor, Idem: id, Body: &events.DeviceClaimRequiresManual{DeviceID: device, SessionID: c.SessionID, TaskID: task}}},
		Answer: recorded(scope, c.Key),
	}
}
