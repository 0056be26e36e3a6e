package api

import (
	"bytes"
	"encoding/json"
	"strings"

	"taskledger/commands"
	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// authStatus is an authorization's status as shown at now.
func authStatus(t *projections.Task, now int64) string {
	a := t.Auth
	switch {
	case a.Status != projections.AuthActive:
		return a.Status
	case !t.Eligible(now) && now >= a.ExpiresAt:
		return "EXPIRED"
	case !t.Eligible(now):
		return "STALE" // the task was amended after this authorization
	}
	return projections.AuthActive
}

// taskDoc is the task detail document of api.md: never a token or hash.
func taskDoc(t *projections.Task, now int64) map[string]any {
	doc := map[string]any{
		"id": t.ID, "state": t.State, "version": t.Version, "revision": t.Revision,
		"payload": json.RawMessage(t.Payload), "created_at": formatTime(t.CreatedAt),
		"updated_at": formatTime(t.UpdatedAt), "reference_image": nil, "authorization": nil,
		"claim": nil, "execution": nil, "cancel_requested": t.CancelRequested, "result": nil,
		"failure": nil, "late_reports": []any{}, "evidence": []any{}, "recovery": nil,
	}
	if t.Image != nil {
		doc["reference_image"] = map[string]any{"sha256": t.Image.SHA256, "size": t.Image.Size}
	}
	if t.Auth != nil {
		doc["authorization"] = map[string]any{"id": t.Auth.ID, "status": authStatus(t, now),
			"expires_at": formatTime(t.Auth.ExpiresAt), "revision": t.Auth.Revision, "takeover": takeoverName(t.Auth.Takeover)}
	}
	if t.Claim != nil {
		doc["claim"] = map[string]any{"generation": t.Claim.Generation, "device_id": t.Claim.DeviceID,
			"session_id": t.Claim.SessionID, "lease_expires_at": formatTime(t.Claim.LeaseExpiresAt),
			"token_origin": t.Claim.TokenOrigin}
	}
	if t.Exec != nil {
		doc["execution"] = map[string]any{"id": t.Exec.ID, "started_at": formatTime(t.Exec.StartedAt),
			"lease_expires_at": formatTime(t.Exec.Lease()), "step": nullStr(t.Exec.Step),
			"last_seen_at": formatTime(t.Exec.Seen())}
	}
	if t.Result != nil {
		doc["result"] = json.RawMessage(*t.Result)
	}
	if t.Failure != nil {
		doc["failure"] = map[string]any{"reason_code": t.Failure.ReasonCode, "detail": t.Failure.Detail}
	}
	lates := []any{}
	for _, l := range t.LateReports {
		lr := map[string]any{"at": formatTime(l.At), "device_id": l.DeviceID, "claim_generation": l.Generation,
			"execution_id": l.ExecutionID, "outcome": l.Outcome}
		if l.Outcome == commands.OpComplete {
			lr["result"] = json.RawMessage(l.Result)
		} else {
			lr["reason_code"], lr["detail"] = l.ReasonCode, l.Detail
		}
		lates = append(lates, lr)
	}
	doc["late_reports"] = lates
	evs := []any{}
	for _, e := range t.Evidence {
		evs = append(evs, evidenceDoc(e))
	}
	doc["evidence"] = evs
	if t.Recovery != nil {
		doc["recovery"] = map[string]any{"decision": t.Recovery.Decision, "reason": t.Recovery.Reason,
			"at": formatTime(t.Recovery.At)}
	}
	return doc
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// deviceDoc is the device document: never the token or its hash.
func deviceDoc(st *projections.State, d *projections.Device, now int64, cfg *commands.Config) map[string]any {
	required := commands.RequiredChecks(d, cfg)
	if required == nil {
		required = []string{}
	}
	doc := map[string]any{"device_id": d.ID, "owner_id": d.OwnerID, "name": d.Name, "status": d.Status,
		"required_checks": required, "registered_at": formatTime(d.RegisteredAt), "presence": nil, "open_task_id": nil}
	if d.Status == projections.DeviceStatusRevoked {
		doc["revoked_at"], doc["revoke_reason"] = formatTime(d.RevokedAt), d.RevokeReason
	}
	if p := st.Presence[d.ID]; p != nil {
		checks := p.Checks
		if checks == nil {
			checks = map[string]bool{}
		}
		doc["presence"] = map[string]any{"app_version": p.AppVersion, "os_version": p.OSVersion,
			"target_app_version": p.TargetAppVersion, "checks": checks, "last_seen_at": formatTime(p.ReceivedAt),
			"claimable": d.Status == projections.DeviceStatusActive && commands.Ready(d, p, now, cfg),
			"online":    !p.Restored && now < p.ReceivedAt+cfg.PresenceTTL.Milliseconds()}
	}
	if t := st.Tasks[d.OpenTask]; t != nil && t.Claim != nil && t.Claim.DeviceID == d.ID {
		doc["open_task_id"] = t.ID
	}
	return doc
}

// eventDoc renders an event for the history routes and export: the body as
// JSON with its secret-bearing fields (token hashes, nonces) left out.
func eventDoc(e *ledger.Event, global bool) (map[string]any, error) {
	body, err := events.DecodeBody(e.Type, e.Schema, e.Body)
	if err != nil {
		return nil, err
	}
	bm, err := bodyJSON(body)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{"seq": e.Seq, "type": string(e.Type), "schema": e.Schema, "at": formatTime(e.At),
		"actor": e.Actor, "body": bm}
	if global {
		doc["stream"], doc["stream_version"] = e.Stream, e.StreamVersion
	}
	return doc, nil
}

// bodyJSON turns a decoded body into its JSON document: fields tagged
// json:"-" (token hashes, nonces) are left out, times (…_at, client_time)
// become RFC 3339, and payload/result are embedded as JSON.
func bodyJSON(body any) (map[string]any, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	fixBody(m)
	return m, nil
}

func fixBody(m map[string]any) {
	for k, v := range m {
		switch t := v.(type) {
		case json.Number:
			if strings.HasSuffix(k, "_at") || k == "client_time" {
				if ms, err := t.Int64(); err == nil && ms != 0 {
					m[k] = formatTime(ms)
				}
			}
		case string:
			if (k == "payload" || k == "result") && t != "" {
				m[k] = json.RawMessage(t)
			}
		case map[string]any:
			fixBody(t)
		}
	}
}

// writeTask writes taskDocIn(st, t, now) with jsonw, keys in sorted order
// (the answers of create, cancel and the other admin task commands, and
// of GET /admin/tasks/{id}); TestTaskAnswerIsTheTaskDocument holds it to
// the map.
func writeTask(w *jsonw, st *projections.State, t *projections.Task, now int64) *jsonw {
	w.open().key("authorization")
	if a := t.Auth; a != nil {
		w.open().key("expires_at").time(a.ExpiresAt).key("id").str(a.ID).key("revision").uint(a.Revision).
			key("status").str(authStatus(t, now)).key("takeover").str(takeoverName(a.Takeover)).close()
	} else {
		w.null()
	}
	w.key("cancel_requested").bool(t.CancelRequested).key("claim")
	if cl := t.Claim; cl != nil {
		w.open().key("device_id").str(cl.DeviceID).key("generation").uint(cl.Generation).
			key("lease_expires_at").time(cl.LeaseExpiresAt).key("session_id").str(cl.SessionID).
			key("token_origin").str(cl.TokenOrigin).close()
	} else {
		w.null()
	}
	w.key("created_at").time(t.CreatedAt).key("evidence").open0('[')
	for _, e := range t.Evidence {
		writeEvidence(w, e)
	}
	w.close0(']').key("execution")
	if x := t.Exec; x != nil {
		w.open().key("id").str(x.ID).key("last_seen_at").time(x.Seen()).key("lease_expires_at").time(x.Lease()).
			key("started_at").time(x.StartedAt).key("step")
		if x.Step != "" {
			w.str(x.Step)
		} else {
			w.null()
		}
		w.close()
	} else {
		w.null()
	}
	w.key("failure")
	if f := t.Failure; f != nil {
		w.open().key("detail").str(f.Detail).key("reason_code").str(f.ReasonCode).close()
	} else {
		w.null()
	}
	w.key("id").str(t.ID).key("late_reports").open0('[')
	for _, l := range t.LateReports {
		w.open().key("at").time(l.At).key("claim_generation").uint(l.Generation)
		if l.Outcome != commands.OpComplete {
			w.key("detail").str(l.Detail)
		}
		w.key("device_id").str(l.DeviceID).key("execution_id").str(l.ExecutionID).key("outcome").str(l.Outcome)
		if l.Outcome == commands.OpComplete {
			w.key("result").raw(l.Result)
		} else {
			w.key("reason_code").str(l.ReasonCode)
		}
		w.close()
	}
	w.close0(']').key("needs_operator").bool(st.NeedsOperator(t, now)).key("needs_operator_reason")
	if r := st.OperatorReason(t, now); r != "" {
		w.str(r)
	} else {
		w.null()
	}
	w.key("payload").raw(t.Payload).key("recovery")
	if r := t.Recovery; r != nil {
		w.open().key("at").time(r.At).key("decision").str(r.Decision).key("reason").str(r.Reason).close()
	} else {
		w.null()
	}
	w.key("reference_image")
	if im := t.Image; im != nil {
		w.open().key("sha256").str(im.SHA256).key("size").int(im.Size).close()
	} else {
		w.null()
	}
	w.key("result")
	if t.Result != nil {
		w.raw(*t.Result)
	} else {
		w.null()
	}
	return w.key("revision").uint(t.Revision).key("state").str(string(t.State)).key("updated_at").time(t.UpdatedAt).
		key("version").uint(t.Version).close()
}
