package bench

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"taskledger/commands"
	"taskledger/projections"
)

// Device is a simulated device.
type Device struct {
	ID      string
	OwnerID string
	Token   string // device bearer token (HTTP)
	Session string
}

// Claim is a device's hold on a task, updated by every answer.
type Claim struct {
	TaskID      string
	Token       string // client-issued claim token
	TokenHash   string
	Generation  uint64
	Version     uint64
	ExecutionID string
	// Step is the step the next heartbeat reports (the load sets it).
	Step string
}

// Driver is how the generator reaches a ledger: every method is one
// command, answered after it is durable.
type Driver interface {
	RegisterDevice(ctx context.Context) (*Device, error)
	// CreateTask creates an authorized task (the operator).
	CreateTask(ctx context.Context) (string, error)
	// Presence reports every required check true; an error if the answer
	// is not claimable.
	Presence(ctx context.Context, d *Device) error
	// Claim asks for the oldest claimable task; (nil, nil) is a 204.
	Claim(ctx context.Context, d *Device) (*Claim, error)
	Release(ctx context.Context, d *Device, c *Claim) error
	Start(ctx context.Context, d *Device, c *Claim) error
	// Heartbeat renews the running lease and reports cancel_requested.
	Heartbeat(ctx context.Context, d *Device, c *Claim) (bool, error)
	// Cancel is the operator's cancel of a running task.
	Cancel(ctx context.Context, taskID string) error
	CancelAck(ctx context.Context, d *Device, c *Claim) error
}

// ErrUnexpected is an answer the generator did not expect.
var ErrUnexpected = errors.New("bench: unexpected answer")

// NewClaimToken returns a client-issued claim token: 43 base64url chars.
func NewClaimToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// newDeviceToken returns a device token of the documented shape.
func newDeviceToken() string { return "tldev_" + NewClaimToken() }

// requiredChecks is what every simulated device reports.
var requiredChecks = map[string]bool{"accessibility_connected": true, "target_app_installed": true, "agent_running": true}

// taskPayload is the payload of every benchmark task (canonical JSON).
const taskPayload = `{"action":"bench","n":1}`

// InProcess drives a node's sequencer directly (commands.Engine.Do): no
// HTTP, no authentication lookups, the same decisions, encoding, hash
// chain, group commit and fsync.
type InProcess struct {
	Engine   *commands.Engine
	Operator commands.Operator
	// AuthTTL is the authorization TTL of created tasks (default 24h).
	AuthTTL time.Duration
}

func fingerprint(parts ...string) []byte {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// keySeq numbers the in-process driver's idempotency keys.
var keySeq atomic.Uint64

// newInProcessKey returns an idempotency key unique in this process, in
// the shape of a UUIDv4 (the sequencer takes any string; drawing random
// UUIDs only costs the generator CPU the measured process shares).
func newInProcessKey() string {
	var b [36]byte
	copy(b[:], "00000000-0000-4000-8000-000000000000")
	n := keySeq.Add(1)
	for i := 35; n > 0 && i > 23; i-- {
		b[i] = "0123456789abcdef"[n&15]
		n >>= 4
	}
	return string(b[:])
}

func (p *InProcess) admin(op string) commands.AdminReq {
	key := newInProcessKey()
	return commands.AdminReq{Operator: p.Operator, Key: key, Fingerprint: fingerprint(op, key)}
}

func principal(d *Device) commands.Principal {
	return commands.Principal{DeviceID: d.ID, OwnerID: d.OwnerID}
}

// do runs cmd and unwraps its recorded answer, insisting on outcome want.
func (p *InProcess) do(ctx context.Context, cmd commands.Command, want projections.Outcome) (*projections.IdemRecord, error) {
	res, err := p.Engine.Do(ctx, cmd)
	return record(res, err, want)
}

// record unwraps a command's recorded answer, insisting on outcome want.
func record(res commands.Result, err error, want projections.Outcome) (*projections.IdemRecord, error) {
	if err != nil {
		return nil, err
	}
	r := res.Record
	if r == nil || r.Outcome != want {
		outcome, code := projections.OutcomeNone, ""
		if r != nil {
			outcome, code = r.Outcome, r.Code
		}
		return nil, fmt.Errorf("%w: outcome %s %s, want %s", ErrUnexpected, outcome, code, want)
	}
	return r, nil
}

// RegisterDevice implements Driver.
func (p *InProcess) RegisterDevice(ctx context.Context) (*Device, error) {
	tok := newDeviceToken()
	owner := uuid.NewString()
	rec, err := p.do(ctx, &commands.RegisterDevice{AdminReq: p.admin(commands.OpRegisterDevice),
		OwnerID: owner, Name: "bench-device", TokenHash: commands.HashToken(tok)}, projections.OutcomeCreated)
	if err != nil {
		return nil, err
	}
	return &Device{ID: rec.DeviceID, OwnerID: owner, Token: tok, Session: uuid.NewString()}, nil
}

// CreateTask implements Driver.
func (p *InProcess) CreateTask(ctx context.Context) (string, error) {
	ttl := p.AuthTTL
	if ttl == 0 {
		ttl = 24 * time.Hour
	}
	sum := sha256.Sum256([]byte(taskPayload))
	rec, err := p.do(ctx, &commands.CreateTask{AdminReq: p.admin(commands.OpCreateTask),
		Payload: taskPayload, PayloadSHA256: fmt.Sprintf("%x", sum), AuthorizeTTL: ttl}, projections.OutcomeCreated)
	if err != nil {
		return "", err
	}
	return rec.TaskID, nil
}

// Presence implements Driver.
func (p *InProcess) Presence(ctx context.Context, d *Device) error {
	res, err := p.Engine.Do(ctx, &commands.Presence{Device: principal(d), Presence: projections.Presence{
		AppVersion: "1.0.0", OSVersion: "Android 14", TargetAppVersion: "7.1.0", Checks: requiredChecks}})
	if err != nil {
		return err
	}
	if r, ok := res.Value.(commands.PresenceReply); !ok || !r.Claimable {
		return fmt.Errorf("%w: presence not claimable", ErrUnexpected)
	}
	return nil
}

// Claim implements Driver.
func (p *InProcess) Claim(ctx context.Context, d *Device) (*Claim, error) {
	key, tok := newInProcessKey(), NewClaimToken()
	h := commands.HashToken(tok)
	res, err := p.Engine.Do(ctx, &commands.ClaimNext{Device: principal(d), Key: key,
		Fingerprint: fingerprint(commands.OpClaimNext, key, h), SessionID: d.Session, TokenHash: h})
	if err == nil && res.Record != nil && res.Record.Outcome == projections.OutcomeNoTask {
		return nil, nil
	}
	rec, err := record(res, err, projections.OutcomeAccepted)
	if err != nil {
		return nil, err
	}
	return &Claim{TaskID: rec.TaskID, Token: tok, TokenHash: h, Generation: rec.Reply.Generation, Version: rec.Reply.Version}, nil
}

func (p *InProcess) call(ctx context.Context, op string, d *Device, c *Claim, step string) (*projections.Reply, error) {
	key := newInProcessKey()
	rec, err := p.do(ctx, &commands.TaskCall{Op: op, Device: principal(d), TaskID: c.TaskID, Key: key,
		Fingerprint: fingerprint(op, key), TokenHash: c.TokenHash, Generation: c.Generation, Version: c.Version,
		ExecutionID: c.ExecutionID, Step: step}, projections.OutcomeAccepted)
	if err != nil {
		return nil, err
	}
	c.Version = rec.Reply.Version
	return rec.Reply, nil
}

// Release implements Driver.
func (p *InProcess) Release(ctx context.Context, d *Device, c *Claim) error {
	_, err := p.call(ctx, commands.OpRelease, d, c, "")
	return err
}

// Start implements Driver.
func (p *InProcess) Start(ctx context.Context, d *Device, c *Claim) error {
	r, err := p.call(ctx, commands.OpStart, d, c, "")
	if err == nil {
		c.ExecutionID = r.ExecutionID
	}
	return err
}

// Heartbeat implements Driver.
func (p *InProcess) Heartbeat(ctx context.Context, d *Device, c *Claim) (bool, error) {
	r, err := p.call(ctx, commands.OpHeartbeat, d, c, c.Step)
	if err != nil {
		return false, err
	}
	return r.CancelRequested, nil
}

// Cancel implements Driver.
func (p *InProcess) Cancel(ctx context.Context, taskID string) error {
	_, err := p.do(ctx, &commands.Cancel{AdminReq: p.admin(commands.OpCancel), TaskID: taskID,
		Reason: "bench"}, projections.OutcomeAccepted)
	return err
}

// CancelAck implements Driver.
func (p *InProcess) CancelAck(ctx context.Context, d *Device, c *Claim) error {
	_, err := p.call(ctx, commands.OpCancelAck, d, c, "")
	return err
}

// Head returns the committed head seq.
func (p *InProcess) Head() uint64 {
	var seq uint64
	p.Engine.Read(func(s *projections.State) { seq = s.Head.Seq })
	return seq
}
