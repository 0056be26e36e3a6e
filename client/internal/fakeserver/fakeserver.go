// Package fakeserver is an in-memory stand-in for the taskledger device
// API, for the client's unit tests: the device routes of api.md with
// idempotent replays (same key + same fingerprint → the recorded answer),
// claim tokens compared by hash, claim generations, executions, running
// leases and cancel requests. Time comes from an injected clock.
package fakeserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Clock is what the fake reads time from.
type Clock interface{ Now() time.Time }

// Task is the fake's view of one task.
type Task struct {
	ID              string
	State           string
	Version         int64
	Generation      int64
	Payload         json.RawMessage
	CreatedAt       time.Time
	TokenHash       string
	SessionID       string
	LeaseExpiresAt  time.Time
	ExecutionID     string
	CancelRequested bool
	Result          json.RawMessage
	ReasonCode      string
	Evidence        []string
}

type record struct {
	fingerprint string
	status      int
	body        []byte
}

// Server is the fake. Create it with New.
type Server struct {
	mu           sync.Mutex
	clock        Clock
	deviceID     string
	token        string
	tasks        []*Task
	idem         map[string]record
	requests     []string
	claims       int
	RunningLease time.Duration
	ClaimLease   time.Duration
	// Required readiness checks; presence must be fresh to claim.
	Required    []string
	presenceOK  bool
	presenceSet bool
}

// New returns a fake for one device.
func New(clock Clock, deviceID, token string) *Server {
	return &Server{clock: clock, deviceID: deviceID, token: token, idem: map[string]record{},
		RunningLease: 90 * time.Second, ClaimLease: 10 * time.Minute, Required: []string{"agent_running"}}
}

func (s *Server) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

// AddTask adds a claimable task and returns its id.
func (s *Server) AddTask(payload string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &Task{ID: uuid.NewString(), State: "PENDING", Version: 1, Payload: json.RawMessage(payload), CreatedAt: s.now()}
	s.tasks = append(s.tasks, t)
	return t.ID
}

// Cancel requests cancellation (RUNNING) or cancels at once (PENDING, CLAIMED).
func (s *Server) Cancel(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.find(id)
	switch t.State {
	case "RUNNING", "WAITING_CONFIRMATION":
		t.CancelRequested = true
	case "PENDING", "CLAIMED":
		t.State, t.Version = "CANCELED", t.Version+1
	}
}

// Recover ends a started task as FAILED by an operator's decision.
func (s *Server) Recover(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.find(id)
	t.State, t.Version, t.ReasonCode, t.ExecutionID = "FAILED", t.Version+1, "recovered", ""
}

// Get returns a copy of a task.
func (s *Server) Get(id string) Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.find(id)
}

// Claims counts committed claims (replays excluded).
func (s *Server) Claims() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims
}

// Requests returns "METHOD path" of every request received.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

func (s *Server) find(id string) *Task {
	for _, t := range s.tasks {
		if t.ID == id {
			return t
		}
	}
	return nil
}

func hashHex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func fmtTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// ServeHTTP implements the device routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		w.Header().Set("WWW-Authenticate", "Bearer")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/api/v1/device/")
	var body map[string]any
	var raw []byte
	if r.Header.Get("Content-Type") == "image/png" {
		raw = make([]byte, 0, 1024)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Body.Read(buf)
			raw = append(raw, buf[:n]...)
			if err != nil {
				break
			}
		}
	} else {
		dec := json.NewDecoder(r.Body)
		dec.UseNumber()
		if err := dec.Decode(&body); err != nil {
			writeErr(w, 400, "invalid_request", "bad json")
			return
		}
		raw, _ = json.Marshal(body)
		if body["device_id"] != s.deviceID {
			writeErr(w, 403, "device_mismatch", "device_id is not the authenticated device")
			return
		}
	}
	if path == "heartbeat" {
		s.presence(w, body)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	tok := r.Header.Get("X-Claim-Token")
	fp := hashHex(r.URL.Path + "|" + string(raw) + "|" + hashHex(tok) + "|" + r.Header.Get("X-Execution-Id"))
	if rec, ok := s.idem[key]; ok {
		if rec.fingerprint != fp {
			writeErr(w, 409, "idempotency_conflict", "the Idempotency-Key was used with another request")
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		s.write(w, rec.status, rec.body)
		return
	}
	var status int
	var out []byte
	if path == "tasks/claim-next" {
		status, out = s.claim(body, tok)
		if status == 0 {
			writeErr(w, 409, "device_not_ready", "presence is stale or a required check is not true")
			return
		}
	} else {
		parts := strings.SplitN(strings.TrimPrefix(path, "tasks/"), "/", 2)
		t := s.find(parts[0])
		if t == nil || t.TokenHash == "" || (t.State != "CLAIMED" && t.State != "RUNNING" && t.State != "WAITING_CONFIRMATION") {
			writeErr(w, 404, "claim_not_found", "no claim of this device on this task")
			return
		}
		if t.TokenHash != hashHex(tok) {
			writeErr(w, 403, "claim_token_mismatch", "the claim token does not match")
			return
		}
		var errCode string
		if parts[1] == "evidence" {
			status, out, errCode = s.evidence(t, r, raw)
		} else {
			status, out, errCode = s.task(t, parts[1], body)
		}
		if errCode != "" {
			writeErr(w, status, errCode, "refused")
			if errCode != "lease_expired" {
				return
			}
			out, _ = json.Marshal(map[string]string{"code": errCode, "message": "refused"})
		}
	}
	if status != 0 {
		s.idem[key] = record{fingerprint: fp, status: status, body: out}
		if status < 300 {
			s.write(w, status, out)
		}
	}
}

func (s *Server) write(w http.ResponseWriter, status int, body []byte) {
	if status == http.StatusNoContent {
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg})
}

func (s *Server) presence(w http.ResponseWriter, body map[string]any) {
	checks, _ := body["checks"].(map[string]any)
	missing := []string{}
	for _, c := range s.Required {
		if v, _ := checks[c].(bool); !v {
			missing = append(missing, c)
		}
	}
	s.presenceOK, s.presenceSet = len(missing) == 0, true
	out, _ := json.Marshal(map[string]any{"server_time": fmtTime(s.now()), "claimable": len(missing) == 0,
		"missing_checks": missing, "presence_expires_at": fmtTime(s.now().Add(2 * time.Minute)),
		"active_task_id": nil, "active_task_mismatch": false})
	s.write(w, 200, out)
}

func (s *Server) claim(body map[string]any, tok string) (int, []byte) {
	if !s.presenceOK {
		return 0, nil // answered by the caller below
	}
	session, _ := body["session_id"].(string)
	for _, t := range s.tasks {
		if t.State == "PENDING" || (t.State == "CLAIMED" && !s.now().Before(t.LeaseExpiresAt)) {
			t.State, t.Version, t.Generation = "CLAIMED", t.Version+1, t.Generation+1
			t.TokenHash, t.SessionID = hashHex(tok), session
			t.LeaseExpiresAt = s.now().Add(s.ClaimLease)
			s.claims++
			out, _ := json.Marshal(map[string]any{
				"task": map[string]any{"id": t.ID, "payload": t.Payload, "revision": 1, "created_at": fmtTime(t.CreatedAt)},
				"claim": map[string]any{"generation": t.Generation, "session_id": session,
					"lease_expires_at": fmtTime(t.LeaseExpiresAt), "authorization_expires_at": fmtTime(s.now().Add(time.Hour))},
				"state": t.State, "version": t.Version, "claim_generation": t.Generation,
				"server_time": fmtTime(s.now()), "lease_expires_at": fmtTime(t.LeaseExpiresAt)})
			return 200, out
		}
	}
	return 204, nil
}
