package api

import (
	"bytes"
	"encoding/json"
	"strings"

	"taskledger/commands"
	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
	"taskledger/wire"
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

// taskDetail is the task detail document (wire.TaskDetail) of t at now:
// never a token or hash. writeTask writes the same bytes by hand for the
// hot answers; TestTaskAnswerIsTheTaskDocument and FuzzTaskWriter hold it
// to the typed encoding. st is nil for a settled task read from disk
// outside the engine's lock: an ended task never needs an operator.
func taskDetail(st *projections.State, t *projections.Task, now int64) wire.TaskDetail {
	doc := wire.TaskDetail{
		ID: t.ID, State: t.State, Version: t.Version, Revision: t.Revision,
		Payload: json.RawMessage(t.Payload), CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt),
		CancelRequested: t.CancelRequested, LateReports: []wire.LateReport{}, Evidence: []wire.Evidence{},
	}
	if st != nil {
		doc.NeedsOperator = st.NeedsOperator(t, now)
		if r := st.OperatorReason(t, now); r != "" {
			doc.NeedsOperatorReason = &r
		}
	}
	if t.Image != nil {
		doc.ReferenceImage = &wire.ReferenceImage{SHA256: t.Image.SHA256, Size: t.Image.Size}
	}
	if a := t.Auth; a != nil {
		doc.Authorization = &wire.Authorization{ID: a.ID, Status: authStatus(t, now), ExpiresAt: formatTime(a.ExpiresAt),
			Revision: a.Revision, Takeover: wire.Takeover(takeoverName(a.Takeover))}
	}
	if cl := t.Claim; cl != nil {
		doc.Claim = &wire.Claim{Generation: cl.Generation, DeviceID: cl.DeviceID, SessionID: cl.SessionID,
			LeaseExpiresAt: formatTime(cl.LeaseExpiresAt), TokenOrigin: wire.TokenOrigin(cl.TokenOrigin)}
	}
	if x := t.Exec; x != nil {
		doc.Execution = &wire.Execution{ID: x.ID, StartedAt: formatTime(x.StartedAt), LeaseExpiresAt: formatTime(x.Lease()),
			LastSeenAt: formatTime(x.Seen())}
		if x.Step != "" {
			step := x.Step
			doc.Execution.Step = &step
		}
	}
	if t.Result != nil {
		r := json.RawMessage(*t.Result)
		doc.Result = &r
	}
	if f := t.Failure; f != nil {
		doc.Failure = &wire.Failure{ReasonCode: f.ReasonCode, Detail: f.Detail}
	}
	for _, l := range t.LateReports {
		lr := wire.LateReport{At: formatTime(l.At), DeviceID: l.DeviceID, ClaimGeneration: l.Generation,
			ExecutionID: l.ExecutionID, Outcome: l.Outcome}
		if l.Outcome == commands.OpComplete {
			lr.Result = json.RawMessage(l.Result)
		} else {
			code, detail := l.ReasonCode, l.Detail
			lr.ReasonCode, lr.Detail = &code, &detail
		}
		doc.LateReports = append(doc.LateReports, lr)
	}
	for _, e := range t.Evidence {
		doc.Evidence = append(doc.Evidence, evidenceDoc(e))
	}
	if r := t.Recovery; r != nil {
		doc.Recovery = &wire.Recovery{Decision: wire.RecoveryDecision(r.Decision), Reason: r.Reason, At: formatTime(r.At)}
	}
	return doc
}

// deviceDoc is the device document: never the token or its hash.
func deviceDoc(st *projections.State, d *projections.Device, now int64, cfg *commands.Config) wire.Device {
	required := commands.RequiredChecks(d, cfg)
	if required == nil {
		required = []string{}
	}
	doc := wire.Device{DeviceID: d.ID, OwnerID: d.OwnerID, Name: d.Name, Status: d.Status,
		RequiredChecks: required, RegisteredAt: formatTime(d.RegisteredAt)}
	if d.Status == projections.DeviceStatusRevoked {
		reason := d.RevokeReason
		doc.RevokedAt, doc.RevokeReason = formatTime(d.RevokedAt), &reason
	}
	if p := st.Presence[d.ID]; p != nil {
		checks := p.Checks
		if checks == nil {
			checks = map[string]bool{}
		}
		doc.Presence = &wire.DevicePresence{AppVersion: p.AppVersion, OSVersion: p.OSVersion,
			TargetAppVersion: p.TargetAppVersion, Checks: checks, LastSeenAt: formatTime(p.ReceivedAt),
			Claimable: d.Status == projections.DeviceStatusActive && commands.Ready(d, p, now, cfg),
			Online:    !p.Restored && now < p.ReceivedAt+cfg.PresenceTTL.Milliseconds()}
	}
	if t := st.Tasks[d.OpenTask]; t != nil && t.Claim != nil && t.Claim.DeviceID == d.ID {
		id := t.ID
		doc.OpenTaskID = &id
	}
	return doc
}

// eventDoc renders an event for the history routes and export: the body as
// JSON with its secret-bearing fields (token hashes, nonces) left out.
func eventDoc(e *ledger.Event, global bool) (wire.Event, error) {
	bm, err := eventBody(e)
	if err != nil {
		return wire.Event{}, err
	}
	raw, err := json.Marshal(bm)
	if err != nil {
		return wire.Event{}, err
	}
	doc := wire.Event{Seq: e.Seq, Type: string(e.Type), Schema: int(e.Schema), At: formatTime(e.At),
		Actor: wire.Actor{Kind: e.Actor.Kind, ID: e.Actor.ID, Owner: e.Actor.Owner}, Body: raw}
	if global {
		sv := e.StreamVersion
		doc.Stream, doc.StreamVersion = e.Stream, &sv
	}
	return doc, nil
}

// eventBody is e's body as a JSON document (bodyJSON).
func eventBody(e *ledger.Event) (map[string]any, error) {
	body, err := events.DecodeBody(e.Type, e.Schema, e.Body)
	if err != nil {
		return nil, err
	}
	return bodyJSON(body)
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

// writeTask writes taskDetail(st, t, now) with jsonw, keys in sorted order
// (the answers of create, cancel and the other admin task commands, and
// of GET /admin/tasks/{id}); TestTaskAnswerIsTheTaskDocument holds it to
// the typed encoding.
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
