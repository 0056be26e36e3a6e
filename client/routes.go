package client

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"taskledger/wire"
	"time"
)

// Heartbeat sends the presence heartbeat (no Idempotency-Key).
func (c *Client) Heartbeat(ctx context.Context, p Presence) (PresenceResult, error) {
	const op = "heartbeat"
	body := wire.PresenceRequest{DeviceID: c.deviceID, AppVersion: p.AppVersion, OSVersion: p.OSVersion,
		TargetAppVersion: p.TargetAppVersion, Checks: p.Checks}
	if p.ActiveTaskID != "" {
		body.ActiveTaskID = &p.ActiveTaskID
	}
	if !p.ClientTime.IsZero() {
		t := FormatTime(p.ClientTime)
		body.ClientTime = &t
	}
	// The server's constraints, from the wire type's tags: checked here so
	// a bad call never reaches the network.
	if err := wire.Check(body, "active_task_id", "app_version", "checks", "client_time", "os_version", "target_app_version"); err != nil {
		return PresenceResult{}, fmt.Errorf("%w: %v", ErrInvalidCall, err)
	}
	data, _ := json.Marshal(body)
	r, err := c.send(ctx, request{op: op, method: http.MethodPost, path: "/device/heartbeat", body: data}, MaxJSONResponse)
	if err != nil {
		return PresenceResult{}, err
	}
	if r.status != http.StatusOK {
		return PresenceResult{}, classify(op, r, presenceStatuses)
	}
	if !isJSON(r.header) {
		return PresenceResult{}, unknown(op, r.status, 0, "Content-Type is not application/json")
	}
	// The answer is read as its wire type, held to the type's members and
	// tags (wire.Strict.Decode), then to the exact time layout the server
	// writes.
	var a wire.PresenceAnswer
	if err := answerJSON.Decode(r.body, &a); err != nil {
		return PresenceResult{}, unknown(op, r.status, 0, "%v", err)
	}
	out := PresenceResult{Claimable: a.Claimable, MissingChecks: a.MissingChecks, ActiveTaskMismatch: a.ActiveTaskMismatch}
	var terr error
	if out.ServerTime, terr = ParseTime(a.ServerTime); terr == nil {
		out.PresenceExpiresAt, terr = ParseTime(a.PresenceExpiresAt)
	}
	if terr != nil {
		return PresenceResult{}, unknown(op, r.status, 0, "%v", terr)
	}
	if a.ActiveTaskID != nil {
		out.ActiveTaskID = *a.ActiveTaskID
	}
	return out, nil
}

// ClaimBody is the exact claim-next body.
func (c *Client) ClaimBody(sessionID string) []byte {
	data, _ := json.Marshal(wire.ClaimRequest{DeviceID: c.deviceID, SessionID: sessionID})
	return data
}

// Claim sends claim-next. A 204 is a definitive "no task"; only then may
// the caller use a new key next time.
func (c *Client) Claim(ctx context.Context, call ClaimCall) (ClaimResult, error) {
	const op = "claim-next"
	if !IsUUID(call.Key) || !IsUUID(call.SessionID) {
		return ClaimResult{}, fmt.Errorf("%w: key and session id must be UUIDv4", ErrInvalidCall)
	}
	if call.ClaimToken != "" && !IsClientClaimToken(call.ClaimToken) {
		return ClaimResult{}, fmt.Errorf("%w: malformed client claim token", ErrInvalidCall)
	}
	r, err := c.send(ctx, request{op: op, method: http.MethodPost, path: "/device/tasks/claim-next",
		key: call.Key, claimToken: call.ClaimToken, body: c.ClaimBody(call.SessionID)}, MaxJSONResponse)
	if err != nil {
		return ClaimResult{}, err
	}
	replayed := r.header.Get("Idempotent-Replayed") == "true"
	switch r.status {
	case http.StatusNoContent:
		if len(r.body) != 0 {
			return ClaimResult{}, unknown(op, r.status, 0, "204 with a body")
		}
		ra := r.retryAfter
		if ra == 0 {
			ra = 2 * time.Second
		}
		return ClaimResult{NoTask: true, RetryAfter: ra, Replayed: replayed}, nil
	case http.StatusOK:
	default:
		return ClaimResult{}, classify(op, r, claimStatuses)
	}
	if !isJSON(r.header) {
		return ClaimResult{}, unknown(op, r.status, 0, "Content-Type is not application/json")
	}
	// The answer is read as its wire type (wire.Strict.Decode: members,
	// types and tags), then held to the exact time layout and to the call.
	var a wire.ClaimAnswer
	if err := answerJSON.Decode(r.body, &a); err != nil {
		return ClaimResult{}, unknown(op, r.status, 0, "%v", err)
	}
	cl := &Claim{TaskID: a.Task.ID, Payload: a.Task.Payload, Revision: int64(a.Task.Revision),
		ReferenceImageURL: a.Task.ReferenceImageURL, Generation: int64(a.Claim.Generation), SessionID: a.Claim.SessionID,
		ServerToken: a.Claim.Token, Takeover: string(a.Claim.Takeover), State: a.State, Version: int64(a.Version)}
	gen := int64(a.ClaimGeneration)
	var lease time.Time
	for _, tm := range []struct {
		dst *time.Time
		s   string
	}{{&cl.CreatedAt, a.Task.CreatedAt}, {&cl.LeaseExpiresAt, a.Claim.LeaseExpiresAt},
		{&cl.AuthorizationExpiresAt, a.Claim.AuthorizationExpiresAt}, {&cl.ServerTime, a.ServerTime}, {&lease, a.LeaseExpiresAt}} {
		if *tm.dst, err = ParseTime(tm.s); err != nil {
			return ClaimResult{}, unknown(op, r.status, 0, "%v", err)
		}
	}
	if cl.ReferenceImageURL != "" && cl.ReferenceImageURL != "/api/v1/device/tasks/"+cl.TaskID+"/reference-image" {
		return ClaimResult{}, unknown(op, r.status, 0, "reference_image_url: unexpected value")
	}
	switch {
	case cl.State != StateClaimed:
		err = fmt.Errorf("state %q, want CLAIMED", cl.State)
	case gen != cl.Generation:
		err = fmt.Errorf("claim_generation differs from claim.generation")
	case cl.SessionID != call.SessionID:
		err = fmt.Errorf("claim.session_id is not ours")
	case !lease.Equal(cl.LeaseExpiresAt):
		err = fmt.Errorf("lease_expires_at differs from claim.lease_expires_at")
	case call.ClaimToken != "" && cl.ServerToken != "":
		err = fmt.Errorf("server issued a token for a client-issued claim")
	case call.ClaimToken == "" && cl.ServerToken == "":
		err = fmt.Errorf("no claim token in the answer")
	}
	if err != nil {
		return ClaimResult{}, unknown(op, r.status, 0, "%v", err)
	}
	return ClaimResult{Claim: cl, Replayed: replayed}, nil
}

// Body builders for task-scoped calls. Each returns the exact JSON bytes
// to persist and send.

// RenewBody builds the lease/renew body.
func (c *Client) RenewBody(gen int64, sessionID string, expectedLease time.Time) []byte {
	return marshal(wire.RenewRequest{DeviceID: c.deviceID, ClaimGeneration: uint64(gen), SessionID: sessionID,
		ExpectedLeaseExpiresAt: FormatTime(expectedLease)})
}

// ReleaseBody builds the release body.
func (c *Client) ReleaseBody(gen, expectedVersion int64) []byte {
	return marshal(wire.ClaimVersionRequest{DeviceID: c.deviceID, ClaimGeneration: uint64(gen), ExpectedVersion: uint64(expectedVersion)})
}

// StartBody builds the start body.
func (c *Client) StartBody(gen, expectedVersion int64) []byte {
	return marshal(wire.ClaimVersionRequest{DeviceID: c.deviceID, ClaimGeneration: uint64(gen), ExpectedVersion: uint64(expectedVersion)})
}

// HeartbeatBody builds the running heartbeat body; clientTime is omitted
// when zero.
func (c *Client) HeartbeatBody(gen int64, executionID, step string, clientTime time.Time) []byte {
	b := wire.HeartbeatRequest{DeviceID: c.deviceID, ClaimGeneration: uint64(gen), ExecutionID: executionID, Step: step}
	if !clientTime.IsZero() {
		t := FormatTime(clientTime)
		b.ClientTime = &t
	}
	return marshal(b)
}

// AwaitConfirmationBody builds the await-confirmation body.
func (c *Client) AwaitConfirmationBody(gen int64, executionID string, expectedVersion int64, reason string) []byte {
	return marshal(wire.AwaitConfirmationRequest{DeviceID: c.deviceID, ClaimGeneration: uint64(gen), ExecutionID: executionID,
		ExpectedVersion: uint64(expectedVersion), Reason: reason})
}

// ResumeBody builds the resume body.
func (c *Client) ResumeBody(gen int64, executionID string, expectedVersion int64) []byte {
	return c.execution(gen, executionID, expectedVersion)
}

// CompleteBody builds the complete body; result must be a JSON object.
func (c *Client) CompleteBody(gen int64, executionID string, expectedVersion int64, result json.RawMessage) []byte {
	return marshal(wire.CompleteRequest{DeviceID: c.deviceID, ClaimGeneration: uint64(gen), ExecutionID: executionID,
		ExpectedVersion: uint64(expectedVersion), Result: result})
}

// FailBody builds the fail body.
func (c *Client) FailBody(gen int64, executionID string, expectedVersion int64, reasonCode, detail string) []byte {
	return marshal(wire.FailRequest{DeviceID: c.deviceID, ClaimGeneration: uint64(gen), ExecutionID: executionID,
		ExpectedVersion: uint64(expectedVersion), ReasonCode: reasonCode, Detail: detail})
}

// CancelAckBody builds the cancel-ack body.
func (c *Client) CancelAckBody(gen int64, executionID string, expectedVersion int64) []byte {
	return c.execution(gen, executionID, expectedVersion)
}

func (c *Client) execution(gen int64, executionID string, expectedVersion int64) []byte {
	return marshal(wire.ExecutionRequest{DeviceID: c.deviceID, ClaimGeneration: uint64(gen), ExecutionID: executionID,
		ExpectedVersion: uint64(expectedVersion)})
}

// marshal writes a request body: the wire types declare their fields in
// name order, so the bytes are deterministic (keys sorted, as the maps
// wrote them before); nil when a raw result is not JSON (the call refuses
// an empty body).
func marshal(body any) []byte {
	data, _ := json.Marshal(body)
	return data
}

// Task sends one task-scoped call and validates the answer against the
// call (task, generation, execution, step, expected state).
func (c *Client) Task(ctx context.Context, call TaskCall) (TaskResult, error) {
	op := string(call.Op)
	states, ok := resultStates[call.Op]
	if !ok {
		return TaskResult{}, fmt.Errorf("%w: unknown op %q", ErrInvalidCall, op)
	}
	if !IsUUID(call.TaskID) || !IsUUID(call.Key) || call.Generation < 1 {
		return TaskResult{}, fmt.Errorf("%w: task id, key and generation required", ErrInvalidCall)
	}
	if !IsClientClaimToken(call.ClaimToken) && !IsServerClaimToken(call.ClaimToken) {
		return TaskResult{}, fmt.Errorf("%w: malformed claim token", ErrInvalidCall)
	}
	if len(call.Body) == 0 || len(call.Body) > MaxJSONRequest {
		return TaskResult{}, fmt.Errorf("%w: body must be 1-%d bytes", ErrInvalidCall, MaxJSONRequest)
	}
	r, err := c.send(ctx, request{op: op, method: http.MethodPost, path: "/device/tasks/" + call.TaskID + "/" + op,
		key: call.Key, claimToken: call.ClaimToken, body: call.Body}, MaxJSONResponse)
	if err != nil {
		return TaskResult{}, err
	}
	if r.status != http.StatusOK {
		return TaskResult{}, classify(op, r, taskStatuses)
	}
	if !isJSON(r.header) {
		return TaskResult{}, unknown(op, r.status, 0, "Content-Type is not application/json")
	}
	// The answer is read as its wire type (wire.Strict.Decode: members,
	// types and tags), then held to the exact time layout and to the call.
	var a wire.DeviceTaskAnswer
	if err := answerJSON.Decode(r.body, &a); err != nil {
		return TaskResult{}, unknown(op, r.status, 0, "%v", err)
	}
	out := TaskResult{Replayed: r.header.Get("Idempotent-Replayed") == "true", TaskID: a.TaskID, State: a.State,
		Version: int64(a.Version), ClaimGeneration: int64(a.ClaimGeneration), ExecutionID: a.ExecutionID,
		CancelRequested: a.CancelRequested, Step: a.Step}
	var terr error
	if out.ServerTime, terr = ParseTime(a.ServerTime); terr == nil && a.LeaseExpiresAt != nil {
		out.LeaseExpiresAt, terr = ParseTime(*a.LeaseExpiresAt)
	}
	switch {
	case terr != nil:
		err = terr
	case a.LeaseExpiresAt == nil && (out.State == StateClaimed || out.State == StateRunning || out.State == StateWaitingConfirmation):
		err = fmt.Errorf("lease_expires_at is null for an open task")
	case call.Op == OpHeartbeat && a.Step == "":
		// Required on heartbeat answers; tolerated on others (the running
		// execution's last step).
		err = fmt.Errorf("heartbeat answer without step")
	}
	if err != nil {
		return TaskResult{}, unknown(op, r.status, 0, "%v", err)
	}
	switch {
	case out.TaskID != call.TaskID:
		err = fmt.Errorf("answer names another task")
	case out.ClaimGeneration != call.Generation:
		err = fmt.Errorf("answer names another claim generation")
	case !contains(states, out.State):
		err = fmt.Errorf("state %q not possible after %s", out.State, op)
	case call.ExecutionID != "" && out.ExecutionID != call.ExecutionID:
		err = fmt.Errorf("answer names another execution")
	case call.Op == OpStart && out.ExecutionID == "":
		err = fmt.Errorf("start answer without execution_id")
	case call.Op == OpHeartbeat && out.Step != call.Step:
		err = fmt.Errorf("heartbeat answer with another step")
	}
	if err != nil {
		return TaskResult{}, unknown(op, r.status, 0, "%v", err)
	}
	return out, nil
}

// Evidence uploads one PNG to the execution the device owns.
func (c *Client) Evidence(ctx context.Context, call EvidenceCall) (EvidenceResult, error) {
	const op = "evidence"
	if !IsUUID(call.TaskID) || !IsUUID(call.Key) || !IsUUID(call.ExecutionID) || call.Generation < 1 {
		return EvidenceResult{}, fmt.Errorf("%w: task, key, execution and generation required", ErrInvalidCall)
	}
	if !IsClientClaimToken(call.ClaimToken) && !IsServerClaimToken(call.ClaimToken) {
		return EvidenceResult{}, fmt.Errorf("%w: malformed claim token", ErrInvalidCall)
	}
	if len(call.PNG) == 0 || len(call.PNG) > MaxEvidence || int64(len(call.PNG)) != call.Size {
		return EvidenceResult{}, fmt.Errorf("%w: evidence must be 1-%d bytes and match its size", ErrInvalidCall, MaxEvidence)
	}
	r, err := c.send(ctx, request{op: op, method: http.MethodPost, path: "/device/tasks/" + call.TaskID + "/evidence",
		key: call.Key, claimToken: call.ClaimToken, contentType: "image/png", body: call.PNG,
		extra: map[string]string{
			"X-Claim-Generation": strconv.FormatInt(call.Generation, 10),
			"X-Execution-Id":     call.ExecutionID,
			"X-Evidence-Kind":    "screenshot",
			"X-Captured-At":      FormatTime(call.CapturedAt),
		}}, MaxJSONResponse)
	if err != nil {
		return EvidenceResult{}, err
	}
	if r.status != http.StatusCreated {
		return EvidenceResult{}, classify(op, r, evidenceStatuses)
	}
	if !isJSON(r.header) {
		return EvidenceResult{}, unknown(op, r.status, 0, "Content-Type is not application/json")
	}
	var a wire.Evidence
	if err := answerJSON.Decode(r.body, &a); err != nil {
		return EvidenceResult{}, unknown(op, r.status, 0, "%v", err)
	}
	out := EvidenceResult{Replayed: r.header.Get("Idempotent-Replayed") == "true", EvidenceID: a.EvidenceID,
		SHA256: a.SHA256, Size: a.Size, Kind: a.Kind}
	if out.CapturedAt, err = ParseTime(a.CapturedAt); err != nil {
		return EvidenceResult{}, unknown(op, r.status, 0, "%v", err)
	}
	if out.SHA256 != call.SHA256 || out.Size != call.Size || out.Kind != "screenshot" ||
		!out.CapturedAt.Equal(call.CapturedAt.UTC().Truncate(time.Millisecond)) {
		return EvidenceResult{}, unknown(op, r.status, 0, "answer does not describe the uploaded file")
	}
	return out, nil
}

// ReferenceImage downloads the task's reference image (JPEG).
func (c *Client) ReferenceImage(ctx context.Context, taskID, claimToken string, gen int64) ([]byte, error) {
	const op = "reference-image"
	if !IsUUID(taskID) || gen < 1 || (!IsClientClaimToken(claimToken) && !IsServerClaimToken(claimToken)) {
		return nil, fmt.Errorf("%w: task id, token and generation required", ErrInvalidCall)
	}
	r, err := c.send(ctx, request{op: op, method: http.MethodGet, path: "/device/tasks/" + taskID + "/reference-image",
		claimToken: claimToken, extra: map[string]string{"X-Claim-Generation": strconv.FormatInt(gen, 10)}}, MaxReferenceImage)
	if err != nil {
		return nil, err
	}
	if r.status != http.StatusOK {
		return nil, classify(op, r, imageStatuses)
	}
	mt, _, perr := mime.ParseMediaType(r.header.Get("Content-Type"))
	if perr != nil || mt != "image/jpeg" || len(r.body) < 3 || r.body[0] != 0xFF || r.body[1] != 0xD8 {
		return nil, unknown(op, r.status, 0, "not a JPEG image")
	}
	return r.body, nil
}

// send wraps do (a hook point for a single place of request assembly).
func (c *Client) send(ctx context.Context, r request, limit int64) (*response, error) {
	if r.contentType == "" && len(r.body) > MaxJSONRequest {
		return nil, fmt.Errorf("%w: %s body larger than %d bytes", ErrInvalidCall, r.op, MaxJSONRequest)
	}
	return c.do(ctx, r, limit)
}

func contains[T comparable](list []T, s T) bool { return slices.Contains(list, s) }
