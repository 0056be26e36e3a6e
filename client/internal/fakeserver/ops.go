package fakeserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/google/uuid"
)

// task applies one task-scoped op; it returns status, body, error code.
func (s *Server) task(t *Task, op string, body map[string]any) (int, []byte, string) {
	gen, _ := body["claim_generation"].(json.Number).Int64()
	if gen != t.Generation {
		return 409, nil, "claim_generation_mismatch"
	}
	now := s.now()
	if !now.Before(t.LeaseExpiresAt) {
		return 409, nil, "lease_expired"
	}
	exec, _ := body["execution_id"].(string)
	if op != "start" && op != "lease/renew" && op != "release" && exec != t.ExecutionID {
		return 409, nil, "execution_mismatch"
	}
	if ev, ok := body["expected_version"].(json.Number); ok {
		if v, _ := ev.Int64(); v != t.Version {
			return 409, nil, "version_mismatch"
		}
	}
	step := ""
	switch op {
	case "start":
		if t.State != "CLAIMED" {
			return 409, nil, "invalid_state"
		}
		t.State, t.Version, t.ExecutionID = "RUNNING", t.Version+1, uuid.NewString()
		t.LeaseExpiresAt = now.Add(s.RunningLease)
	case "heartbeat":
		if t.State == "CLAIMED" {
			return 409, nil, "invalid_state"
		}
		step, _ = body["step"].(string)
		t.LeaseExpiresAt = now.Add(s.RunningLease)
	case "complete", "fail", "cancel-ack":
		if t.State == "CLAIMED" {
			return 409, nil, "invalid_state"
		}
		if op == "cancel-ack" && !t.CancelRequested {
			return 409, nil, "cancel_not_requested"
		}
		t.State = map[string]string{"complete": "SUCCEEDED", "fail": "FAILED", "cancel-ack": "CANCELED"}[op]
		t.Version++
		if op == "complete" {
			t.Result, _ = json.Marshal(body["result"])
		}
		if op == "fail" {
			t.ReasonCode, _ = body["reason_code"].(string)
		}
	case "lease/renew":
		t.LeaseExpiresAt = now.Add(s.ClaimLease)
	case "release":
		t.State, t.Version, t.TokenHash = "PENDING", t.Version+1, ""
	default:
		return 404, nil, "not_found"
	}
	doc := map[string]any{"task_id": t.ID, "state": t.State, "version": t.Version, "claim_generation": t.Generation,
		"server_time": fmtTime(now), "lease_expires_at": fmtTime(t.LeaseExpiresAt), "cancel_requested": t.CancelRequested}
	switch t.State {
	case "SUCCEEDED", "FAILED", "CANCELED", "PENDING":
		doc["lease_expires_at"] = nil
	}
	if t.ExecutionID != "" {
		doc["execution_id"] = t.ExecutionID
	}
	if step != "" {
		doc["step"] = step
	}
	out, _ := json.Marshal(doc)
	return 200, out, ""
}

func (s *Server) evidence(t *Task, r *http.Request, png []byte) (int, []byte, string) {
	if g, _ := strconv.ParseInt(r.Header.Get("X-Claim-Generation"), 10, 64); g != t.Generation {
		return 409, nil, "claim_generation_mismatch"
	}
	if r.Header.Get("X-Execution-Id") != t.ExecutionID || t.ExecutionID == "" {
		return 409, nil, "execution_mismatch"
	}
	sum := sha256.Sum256(png)
	id := uuid.NewString()
	t.Evidence = append(t.Evidence, hex.EncodeToString(sum[:]))
	out, _ := json.Marshal(map[string]any{"evidence_id": id, "sha256": hex.EncodeToString(sum[:]), "size": len(png),
		"kind": "screenshot", "captured_at": r.Header.Get("X-Captured-At")})
	return 201, out, ""
}
