package wire

import "encoding/json"

// The task documents: the detail every admin task route answers (and each
// item of the task list), and its parts. Fields are declared in the
// order of their names: encoding/json then writes the keys sorted, as
// the server's hand writer for the hot answers does (api/render.go).

// TaskDetail is the task detail document (GET /admin/tasks/{id}, the
// answer of every admin task command, each item of GET /admin/tasks):
// never a token or a hash.
type TaskDetail struct {
	Authorization       *Authorization   `json:"authorization"`
	CancelRequested     bool             `json:"cancel_requested"`
	Claim               *Claim           `json:"claim"`
	CreatedAt           string           `json:"created_at" wire:"time"`
	Evidence            []Evidence       `json:"evidence"`
	Execution           *Execution       `json:"execution"`
	Failure             *Failure         `json:"failure"`
	ID                  string           `json:"id" wire:"uuid"`
	LateReports         []LateReport     `json:"late_reports"`
	NeedsOperator       bool             `json:"needs_operator"`
	NeedsOperatorReason *string          `json:"needs_operator_reason" wire:"enum=manual_takeover|device_revoked|authorization_expired|running_lease_expired"`
	Payload             json.RawMessage  `json:"payload" wire:"object"`
	Recovery            *Recovery        `json:"recovery"`
	ReferenceImage      *ReferenceImage  `json:"reference_image"`
	Result              *json.RawMessage `json:"result" wire:"object"`
	Revision            uint64           `json:"revision" wire:"min=0"`
	State               State            `json:"state"`
	UpdatedAt           string           `json:"updated_at" wire:"time"`
	Version             uint64           `json:"version" wire:"min=0"`
}

// Authorization is a task's current authorization as shown at the
// server's time: ACTIVE, CONSUMED (by a claim), REVOKED, EXPIRED, or STALE
// (the task was amended after it).
type Authorization struct {
	ExpiresAt string   `json:"expires_at" wire:"time"`
	ID        string   `json:"id" wire:"uuid"`
	Revision  uint64   `json:"revision" wire:"min=0"`
	Status    string   `json:"status" wire:"enum=ACTIVE|CONSUMED|REVOKED|EXPIRED|STALE"`
	Takeover  Takeover `json:"takeover"`
}

// Claim is a task's current claim.
type Claim struct {
	DeviceID       string      `json:"device_id" wire:"uuid"`
	Generation     uint64      `json:"generation" wire:"min=0"`
	LeaseExpiresAt string      `json:"lease_expires_at" wire:"time"`
	SessionID      string      `json:"session_id" wire:"uuid"`
	TokenOrigin    TokenOrigin `json:"token_origin"`
}

// Execution is a task's current execution.
type Execution struct {
	ID             string  `json:"id" wire:"uuid"`
	LastSeenAt     string  `json:"last_seen_at" wire:"time"`
	LeaseExpiresAt string  `json:"lease_expires_at" wire:"time"`
	StartedAt      string  `json:"started_at" wire:"time"`
	Step           *string `json:"step"`
}

// Failure is why a task failed.
type Failure struct {
	Detail     string `json:"detail"`
	ReasonCode string `json:"reason_code"`
}

// LateReport is a device's complete or fail that arrived after its claim
// ended: a complete carries result, a fail reason_code and detail.
type LateReport struct {
	At              string          `json:"at" wire:"time"`
	ClaimGeneration uint64          `json:"claim_generation" wire:"min=0"`
	Detail          *string         `json:"detail,omitempty"`
	DeviceID        string          `json:"device_id" wire:"uuid"`
	ExecutionID     string          `json:"execution_id" wire:"uuid"`
	Outcome         string          `json:"outcome" wire:"enum=complete|fail"`
	ReasonCode      *string         `json:"reason_code,omitempty"`
	Result          json.RawMessage `json:"result,omitempty" wire:"object"`
}

// Recovery is an operator's decision on a stuck task.
type Recovery struct {
	At       string           `json:"at" wire:"time"`
	Decision RecoveryDecision `json:"decision"`
	Reason   string           `json:"reason"`
}

// ReferenceImage names a task's reference image (its bytes are served
// apart).
type ReferenceImage struct {
	SHA256 string `json:"sha256" wire:"pattern=^[0-9a-f]{64}$"`
	Size   int64  `json:"size" wire:"min=0"`
}

// Evidence is one evidence item of an execution (also the answer of
// POST /device/tasks/{id}/evidence).
type Evidence struct {
	CapturedAt string `json:"captured_at" wire:"time"`
	EvidenceID string `json:"evidence_id" wire:"uuid"`
	Kind       string `json:"kind" wire:"enum=screenshot"`
	SHA256     string `json:"sha256" wire:"pattern=^[0-9a-f]{64}$"`
	Size       int64  `json:"size" wire:"min=0"`
}

// TaskPage is GET /admin/tasks: one page of task details, newest first;
// next_cursor is null on the last page. counts, server_time and head_seq
// are absent from the needs_operator=true list.
type TaskPage struct {
	Counts     map[string]uint64 `json:"counts,omitempty"`
	HeadSeq    *uint64           `json:"head_seq,omitempty" wire:"min=0"`
	NextCursor *string           `json:"next_cursor"`
	ServerTime string            `json:"server_time,omitempty" wire:"time"`
	Tasks      []TaskDetail      `json:"tasks"`
}

// TokenOrigin is who issued a claim token.
type TokenOrigin string

const (
	// TokenOriginClient: the device sent its own claim token.
	TokenOriginClient TokenOrigin = "client"
	// TokenOriginServer: the server derived the token and answered it.
	TokenOriginServer TokenOrigin = "server"
)

// Takeover is what happens after a claim lease ends or the device is
// revoked.
type Takeover string

const (
	// TakeoverReclaim: another device may claim the task.
	TakeoverReclaim Takeover = "reclaim"
	// TakeoverManual: an operator recovers the task.
	TakeoverManual Takeover = "manual"
)

// RecoveryDecision is what an operator decided for a stuck task.
type RecoveryDecision string

const (
	// RecoverFail fails the task.
	RecoverFail RecoveryDecision = "fail"
	// RecoverRequeue puts the task back to PENDING.
	RecoverRequeue RecoveryDecision = "requeue"
)

// Enums lists the values of every named string type of the vocabulary,
// by the name of its schema in the OpenAPI document.
func Enums() map[string][]string {
	return map[string][]string{
		"State":            strs(AllStates()),
		"TokenOrigin":      {string(TokenOriginClient), string(TokenOriginServer)},
		"Takeover":         {string(TakeoverReclaim), string(TakeoverManual)},
		"RecoveryDecision": {string(RecoverFail), string(RecoverRequeue)},
	}
}

func strs[T ~string](list []T) []string {
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = string(v)
	}
	return out
}
