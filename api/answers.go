package api

import (
	"encoding/json"

	"taskledger/commands"
	"taskledger/events"
	"taskledger/projections"
	"taskledger/wire"
)

// The device answers as wire types: what the hand writers of device.go
// (writeTaskReply, writeClaim, writePresence, writeEvidence) write byte
// for byte on the hot paths, where it is measured to matter
// (BenchmarkAnswerEncoding). TestAnswersAreWhatEncodingJSONWrites,
// TestTaskAnswerIsTheTaskDocument and FuzzHotWriters hold each writer to
// the typed encoding of the same answer.

// taskReplyDoc is a task command's answer.
func taskReplyDoc(r *projections.Reply) wire.DeviceTaskAnswer {
	doc := wire.DeviceTaskAnswer{TaskID: r.TaskID, State: wire.State(r.State), Version: r.Version, ClaimGeneration: r.Generation,
		ServerTime: formatTime(r.ServerTime), CancelRequested: r.CancelRequested, ExecutionID: r.ExecutionID, Step: r.Step}
	if r.LeaseExpiresAt != 0 {
		t := formatTime(r.LeaseExpiresAt)
		doc.LeaseExpiresAt = &t
	}
	return doc
}

// claimDoc is a claim answer; secret derives a server-issued claim token.
func claimDoc(rec *projections.IdemRecord, t *commands.ClaimedTask, secret []byte) wire.ClaimAnswer {
	r := rec.Reply
	doc := wire.ClaimAnswer{
		Task: wire.ClaimedTask{ID: r.TaskID, Payload: json.RawMessage(t.Payload), Revision: t.Revision,
			CreatedAt: formatTime(t.CreatedAt)},
		Claim: wire.ClaimGrant{Generation: r.Generation, SessionID: r.SessionID, LeaseExpiresAt: formatTime(r.LeaseExpiresAt),
			AuthorizationExpiresAt: formatTime(r.AuthorizationExpiresAt)},
		State: wire.State(r.State), Version: r.Version, ClaimGeneration: r.Generation, ServerTime: formatTime(r.ServerTime),
		LeaseExpiresAt: formatTime(r.LeaseExpiresAt),
	}
	if t.HasImage {
		doc.Task.ReferenceImageURL = "/api/v1/device/tasks/" + r.TaskID + "/reference-image"
	}
	if t.Takeover == projections.TakeoverManual {
		doc.Claim.Takeover = wire.TakeoverManual
	}
	if r.TokenOrigin == events.TokenServer {
		doc.Claim.Token = commands.ServerToken(secret, rec.DeviceID, r.TaskID, r.AuthorizationID, r.Generation, r.Nonce)
	}
	return doc
}

// presenceDoc is a presence answer at server time now.
func presenceDoc(r commands.PresenceReply, now int64) wire.PresenceAnswer {
	doc := wire.PresenceAnswer{ServerTime: formatTime(now), Claimable: r.Claimable, MissingChecks: r.MissingChecks,
		PresenceExpiresAt: formatTime(r.PresenceExpiresAt), ActiveTaskMismatch: r.ActiveTaskMismatch}
	if r.ActiveTaskID != "" {
		id := r.ActiveTaskID
		doc.ActiveTaskID = &id
	}
	return doc
}

// errorDoc is an error answer's body.
func errorDoc(ae *apiError) wire.Error { return wire.Error{Code: ae.Code, Message: ae.Message} }
