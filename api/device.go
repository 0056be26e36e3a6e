package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"taskledger/commands"
	"taskledger/events"
	"taskledger/projections"
	"taskledger/wire"
)

// checkDeviceID answers device_mismatch for a body naming another device.
func checkDeviceID(c echo.Context, id string) error {
	if id != principal(c).DeviceID {
		return errDeviceMismatch
	}
	return nil
}

// presence: POST /device/heartbeat.
func (s *Server) presence(c echo.Context) error {
	m, _, err := readJSON(c, presenceJSON)
	if err != nil {
		return err
	}
	f := newFields(m)
	deviceID := f.uuid("device_id", true)
	p := projections.Presence{
		AppVersion:       f.str("app_version", true),
		OSVersion:        f.str("os_version", true),
		TargetAppVersion: f.str("target_app_version", true),
		Checks:           map[string]bool{},
	}
	checks := f.object("checks", true)
	if at := f.optStr("active_task_id"); at != nil {
		if !isUUIDv4(*at) {
			f.fail(invalid("field \"active_task_id\" must be a canonical lowercase UUIDv4 or null"))
		}
		p.ActiveTaskID = *at
	}
	p.ClientTime = f.optTimeMs("client_time")
	if err := f.done(); err != nil {
		return err
	}
	for k, v := range checks {
		b, ok := v.(bool)
		if !ok {
			return invalid("field \"checks\" must map names to booleans")
		}
		p.Checks[k] = b
	}
	if err := checkBody(&wire.PresenceRequest{AppVersion: p.AppVersion, OSVersion: p.OSVersion,
		TargetAppVersion: p.TargetAppVersion, Checks: p.Checks}, "app_version", "checks", "os_version", "target_app_version"); err != nil {
		return err
	}
	if err := checkDeviceID(c, deviceID); err != nil {
		return err
	}
	res, err := s.do(c, &commands.Presence{Device: principal(c), Presence: p})
	if err != nil {
		return err
	}
	return writePresence(newJSONW(), res.Value.(commands.PresenceReply), res.Now).send(c, http.StatusOK)
}

// writePresence writes a presence answer at server time now.
func writePresence(w *jsonw, r commands.PresenceReply, now int64) *jsonw {
	w.open().key("active_task_id")
	if r.ActiveTaskID != "" {
		w.str(r.ActiveTaskID)
	} else {
		w.null()
	}
	return w.key("active_task_mismatch").bool(r.ActiveTaskMismatch).key("claimable").bool(r.Claimable).
		key("missing_checks").strs(r.MissingChecks).key("presence_expires_at").time(r.PresenceExpiresAt).
		key("server_time").time(now).close()
}

// claimNext: POST /device/tasks/claim-next.
func (s *Server) claimNext(c echo.Context) error {
	m, h, err := readJSON(c, deviceClaimJSON)
	if err != nil {
		return err
	}
	key, tok := h.key, h.token
	f := newFields(m)
	deviceID := f.uuid("device_id", true)
	session := f.uuid("session_id", true)
	if err := f.done(); err != nil {
		return err
	}
	if err := checkDeviceID(c, deviceID); err != nil {
		return err
	}
	tokHash := ""
	if tok != "" {
		tokHash = commands.HashToken(tok)
	} else if s.eng.Config().ClaimSecret == nil {
		return commands.ErrClaimTokenRequired
	}
	canon, _ := canonicalJSON(m)
	fp := fingerprint(commands.OpClaimNext, canon, tokHash)
	res, err := s.do(c, &commands.ClaimNext{Device: principal(c), Key: key, Fingerprint: fp, SessionID: session, TokenHash: tokHash})
	if err != nil {
		return err
	}
	return s.answerDevice(c, res)
}

// answerDevice renders a device command's recorded outcome.
func (s *Server) answerDevice(c echo.Context, res commands.Result) error {
	rec := res.Record
	if rec == nil {
		return commands.ErrInternal
	}
	if res.Replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	switch {
	case rec.Outcome == projections.OutcomeNoTask:
		c.Response().Header().Set("Retry-After", "2")
		return c.NoContent(http.StatusNoContent)
	case rec.Outcome == projections.OutcomeRefused:
		return sendError(c, toAPIError(commands.RecordedError(rec.Code)))
	case rec.EventType == string(events.EvTaskClaimed) || rec.EventType == string(events.EvTaskClaimResumed):
		if res.Task == nil {
			return commands.ErrInternal
		}
		return writeClaim(newJSONW(), rec, res.Task, s.eng.Config().ClaimSecret).send(c, http.StatusOK)
	case rec.Reply != nil && rec.Reply.Evidence != nil:
		return writeEvidence(newJSONW(), *rec.Reply.Evidence).send(c, http.StatusCreated)
	}
	return writeTaskReply(newJSONW(), rec.Reply).send(c, outcomeStatus(rec.Outcome))
}

// writeTaskReply writes a task command's answer.
func writeTaskReply(w *jsonw, r *projections.Reply) *jsonw {
	w.open().key("cancel_requested").bool(r.CancelRequested).key("claim_generation").uint(r.Generation)
	if r.ExecutionID != "" {
		w.key("execution_id").str(r.ExecutionID)
	}
	w.key("lease_expires_at").nullTime(r.LeaseExpiresAt).key("server_time").time(r.ServerTime).key("state").str(r.State)
	if r.Step != "" {
		w.key("step").str(r.Step)
	}
	return w.key("task_id").str(r.TaskID).key("version").uint(r.Version).close()
}

// writeClaim writes a claim answer: the recorded claim and the claimed
// task as read when the answer was built (see commands.ClaimedTask);
// secret derives a server-issued claim token.
func writeClaim(w *jsonw, rec *projections.IdemRecord, t *commands.ClaimedTask, secret []byte) *jsonw {
	r := rec.Reply
	w.open().key("claim").open().key("authorization_expires_at").time(r.AuthorizationExpiresAt).
		key("generation").uint(r.Generation).key("lease_expires_at").time(r.LeaseExpiresAt).key("session_id").str(r.SessionID)
	if t.Takeover == projections.TakeoverManual {
		// Only then: the default answer keeps the contract's exact shape.
		w.key("takeover").str(t.Takeover)
	}
	if r.TokenOrigin == events.TokenServer {
		w.key("token").str(commands.ServerToken(secret, rec.DeviceID, r.TaskID, r.AuthorizationID, r.Generation, r.Nonce))
	}
	w.close().key("claim_generation").uint(r.Generation).key("lease_expires_at").time(r.LeaseExpiresAt).
		key("server_time").time(r.ServerTime).key("state").str(r.State).
		key("task").open().key("created_at").time(t.CreatedAt).key("id").str(r.TaskID).key("payload").raw(t.Payload)
	if t.HasImage {
		w.key("reference_image_url").str("/api/v1/device/tasks/" + r.TaskID + "/reference-image")
	}
	return w.key("revision").uint(t.Revision).close().key("version").uint(r.Version).close()
}

// writeEvidence writes an evidence item.
func writeEvidence(w *jsonw, e projections.Evidence) *jsonw {
	return w.open().key("captured_at").time(e.CapturedAt).key("evidence_id").str(e.ID).key("kind").str(e.Kind).
		key("sha256").str(e.SHA256).key("size").int(e.Size).close()
}

func evidenceDoc(e projections.Evidence) wire.Evidence {
	return wire.Evidence{EvidenceID: e.ID, SHA256: e.SHA256, Size: e.Size, Kind: e.Kind,
		CapturedAt: formatTime(e.CapturedAt)}
}

// taskCall: POST /device/tasks/{id}/… for every task-scoped operation.
func (s *Server) taskCall(op string) echo.HandlerFunc {
	return func(c echo.Context) error {
		m, h, err := readJSON(c, deviceTaskJSON)
		if err != nil {
			return err
		}
		key, tok := h.key, h.token
		taskID := c.Param("id")
		cmd := &commands.TaskCall{Op: op, Device: principal(c), TaskID: taskID, Key: key, TokenHash: commands.HashToken(tok)}
		f := newFields(m)
		deviceID := f.uuid("device_id", true)
		cmd.Generation = uint64(f.integer("claim_generation", true, 1, 1<<53-1))
		switch op {
		case commands.OpRenew:
			cmd.SessionID = f.uuid("session_id", true)
			cmd.ExpectedAt = f.timeMs("expected_lease_expires_at")
		case commands.OpRelease, commands.OpStart:
			cmd.Version = uint64(f.integer("expected_version", true, 1, 1<<53-1))
		case commands.OpHeartbeat:
			cmd.ExecutionID = f.uuid("execution_id", true)
			cmd.Step = f.str("step", true)
			cmd.ClientTime = f.optTimeMs("client_time")
			if f.err == nil {
				f.fail(checkBody(&wire.HeartbeatRequest{Step: cmd.Step}, "step"))
			}
		default:
			cmd.ExecutionID = f.uuid("execution_id", true)
			cmd.Version = uint64(f.integer("expected_version", true, 1, 1<<53-1))
		}
		switch op {
		case commands.OpAwaitConfirmation:
			cmd.Reason = f.str("reason", true)
			f.fail(checkBody(&wire.AwaitConfirmationRequest{Reason: cmd.Reason}, "reason"))
		case commands.OpComplete:
			res := f.object("result", true)
			if f.err == nil {
				cmd.Result, err = canonicalJSON(res)
				if err != nil {
					f.fail(err)
				} else if len(cmd.Result) > ResultLimit {
					f.fail(invalid("field \"result\" must be at most %d bytes encoded", ResultLimit))
				}
			}
		case commands.OpFail:
			cmd.ReasonCode = f.str("reason_code", true)
			cmd.Detail = f.str("detail", true)
			if f.err == nil {
				f.fail(checkBody(&wire.FailRequest{ReasonCode: cmd.ReasonCode, Detail: cmd.Detail}, "reason_code", "detail"))
			}
		}
		if err := f.done(); err != nil {
			return err
		}
		if err := checkDeviceID(c, deviceID); err != nil {
			return err
		}
		if !isUUIDv4(taskID) {
			return commands.ErrClaimNotFound
		}
		canon, _ := canonicalJSON(m)
		cmd.Fingerprint = fingerprint(op, taskID, canon, cmd.TokenHash)
		res, err := s.do(c, cmd)
		if err != nil {
			return err
		}
		return s.answerDevice(c, res)
	}
}

// deviceReferenceImage: GET /device/tasks/{id}/reference-image, for the
// current unexpired claim only.
func (s *Server) deviceReferenceImage(c echo.Context) error {
	tok, err := claimToken(c, true)
	if err != nil {
		return err
	}
	gen, err := generationHeader(c)
	if err != nil {
		return err
	}
	p := principal(c)
	var sha string
	var rerr error
	s.eng.ReadNow(func(st *projections.State, now int64) {
		sha, rerr = commands.ReferenceImageAccess(st, now, p, c.Param("id"), commands.HashToken(tok), gen)
	})
	if rerr != nil {
		return rerr
	}
	return s.serveBlob(c, sha, "image/jpeg")
}
