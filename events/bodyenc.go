package events

import mp "taskledger/internal/msgpack/mpwrite"

// AppendBody appends body's encoding, exactly what EncodeBody(body) gives
// (ledger.Marshal): the body types of the commands a device sends all
// day are written by hand, every other one through the generic encoder.
// TestAppendBodyMatchesMarshal fills every field of every body type and
// compares.
func AppendBody(b []byte, body any) ([]byte, error) {
	switch v := body.(type) {
	case *TaskCreated:
		return appendTaskCreated(b, v), nil
	case *TaskClaimed:
		return appendTaskClaimed(b, v), nil
	case *TaskClaimResumed:
		b = mp.MapLen(b, 5)
		b = mp.String(append(b, kTaskID...), v.TaskID)
		b = mp.String(append(b, kDeviceID...), v.DeviceID)
		b = mp.String(append(b, kSessionID...), v.SessionID)
		b = mp.Uint(append(b, kGeneration...), v.Generation)
		b = mp.Int(append(b, kLeaseExpiresAt...), v.LeaseExpiresAt)
		return b, nil
	case *TaskClaimRenewed:
		b = mp.MapLen(b, 5)
		b = mp.String(append(b, kTaskID...), v.TaskID)
		b = mp.String(append(b, kDeviceID...), v.DeviceID)
		b = mp.Uint(append(b, kGeneration...), v.Generation)
		b = mp.Int(append(b, kPreviousLeaseExpiresAt...), v.PreviousExpiresAt)
		b = mp.Int(append(b, kLeaseExpiresAt...), v.LeaseExpiresAt)
		return b, nil
	case *TaskReleased:
		b = mp.MapLen(b, 4)
		b = mp.String(append(b, kTaskID...), v.TaskID)
		b = mp.String(append(b, kDeviceID...), v.DeviceID)
		b = mp.Uint(append(b, kGeneration...), v.Generation)
		b = mp.Uint(append(b, kVersion...), v.Version)
		return b, nil
	case *TaskStarted:
		return appendTaskStarted(b, v), nil
	case *TaskHeartbeat:
		return appendTaskHeartbeat(b, v), nil
	case *TaskExecStep:
		b = mp.MapLen(b, 7)
		b = appendExec(b, v.TaskID, v.DeviceID, v.Generation, v.ExecutionID, v.Version)
		b = mp.String(append(b, kReason...), v.Reason)
		b = mp.Int(append(b, kLeaseExpiresAt...), v.LeaseExpiresAt)
		return b, nil
	case *TaskCompleted:
		b = mp.MapLen(b, 7)
		b = appendExec(b, v.TaskID, v.DeviceID, v.Generation, v.ExecutionID, v.Version)
		b = mp.String(append(b, kResult...), v.Result)
		b = mp.Int(append(b, kLeaseExpiresAt...), v.LeaseExpiresAt)
		return b, nil
	case *TaskFailed:
		b = mp.MapLen(b, 8)
		b = appendExec(b, v.TaskID, v.DeviceID, v.Generation, v.ExecutionID, v.Version)
		b = mp.String(append(b, kReasonCode...), v.ReasonCode)
		b = mp.String(append(b, kDetail...), v.Detail)
		b = mp.Int(append(b, kLeaseExpiresAt...), v.LeaseExpiresAt)
		return b, nil
	case *TaskCancelRequested:
		b = mp.MapLen(b, 2)
		b = mp.String(append(b, kTaskID...), v.TaskID)
		b = mp.String(append(b, kReason...), v.Reason)
		return b, nil
	case *TaskCanceled:
		return appendTaskCanceled(b, v), nil
	case *DeviceClaimRequiresManual:
		b = mp.MapLen(b, 3)
		b = mp.String(append(b, kDeviceID...), v.DeviceID)
		b = mp.String(append(b, kSessionID...), v.SessionID)
		b = mp.String(append(b, kTaskID...), v.TaskID)
		return b, nil
	}
	raw, err := EncodeBody(body)
	if err != nil {
		return b, err
	}
	return append(b, raw...), nil
}

// appendTaskCreated appends the encoding of a TaskCreated body.
func appendTaskCreated(b []byte, v *TaskCreated) []byte {
	b = mp.MapLen(b, 5)
	b = mp.String(append(b, kTaskID...), v.TaskID)
	b = mp.String(append(b, kPayload...), v.Payload)
	b = mp.String(append(b, kPayloadSHA256...), v.PayloadSHA256)
	b = append(b, kAuthorization...)
	if a := v.Authorization; a == nil {
		b = mp.Nil(b)
	} else {
		b = mp.MapLen(b, 5)
		b = mp.String(append(b, kAuthorizationID...), a.ID)
		b = mp.Uint(append(b, kRevision...), a.Revision)
		b = mp.String(append(b, kPayloadSHA256...), a.PayloadSHA256)
		b = mp.String(append(b, kImageSHA256...), a.ImageSHA256)
		b = mp.Int(append(b, kExpiresAt...), a.ExpiresAt)
	}
	return mp.String(append(b, kTakeover...), v.Takeover)
}

// appendTaskClaimed appends the encoding of a TaskClaimed body.
func appendTaskClaimed(b []byte, v *TaskClaimed) []byte {
	b = mp.MapLen(b, 14)
	b = mp.String(append(b, kTaskID...), v.TaskID)
	b = mp.String(append(b, kDeviceID...), v.DeviceID)
	b = mp.String(append(b, kSessionID...), v.SessionID)
	b = mp.Uint(append(b, kGeneration...), v.Generation)
	b = mp.Uint(append(b, kVersion...), v.Version)
	b = mp.String(append(b, kTokenOrigin...), v.TokenOrigin)
	b = mp.String(append(b, kTokenSHA256...), v.TokenHash)
	b = mp.String(append(b, kNonce...), v.Nonce)
	b = mp.String(append(b, kAuthorizationID...), v.AuthorizationID)
	b = mp.Int(append(b, kAuthorizationExpiresAt...), v.AuthorizationExpiresAt)
	b = mp.Int(append(b, kLeaseExpiresAt...), v.LeaseExpiresAt)
	b = mp.String(append(b, kPreviousDeviceID...), v.PreviousDeviceID)
	b = append(b, kPresence...)
	if p := v.Presence; p == nil {
		b = mp.Nil(b)
	} else {
		b = mp.MapLen(b, 6)
		b = mp.Int(append(b, kReceivedAt...), p.ReceivedAt)
		b = mp.String(append(b, kAppVersion...), p.AppVersion)
		b = mp.String(append(b, kOSVersion...), p.OSVersion)
		b = mp.String(append(b, kTargetAppVersion...), p.TargetAppVersion)
		b = mp.MapStringBool(append(b, kChecks...), p.Checks)
		b = mp.Strings(append(b, kRequiredChecks...), p.RequiredChecks)
	}
	return mp.String(append(b, kSecretCheck...), v.SecretCheck)
}

// appendTaskStarted appends the encoding of a TaskStarted body.
func appendTaskStarted(b []byte, v *TaskStarted) []byte {
	b = mp.MapLen(b, 7)
	b = mp.String(append(b, kTaskID...), v.TaskID)
	b = mp.String(append(b, kDeviceID...), v.DeviceID)
	b = mp.Uint(append(b, kGeneration...), v.Generation)
	b = mp.String(append(b, kExecutionID...), v.ExecutionID)
	b = mp.String(append(b, kAuthorizationID...), v.AuthorizationID)
	b = mp.Int(append(b, kLeaseExpiresAt...), v.LeaseExpiresAt)
	b = mp.Uint(append(b, kVersion...), v.Version)
	return b
}

// appendTaskHeartbeat appends the encoding of a TaskHeartbeat body.
func appendTaskHeartbeat(b []byte, v *TaskHeartbeat) []byte {
	b = mp.MapLen(b, 8)
	b = mp.String(append(b, kTaskID...), v.TaskID)
	b = mp.String(append(b, kDeviceID...), v.DeviceID)
	b = mp.Uint(append(b, kGeneration...), v.Generation)
	b = mp.String(append(b, kExecutionID...), v.ExecutionID)
	b = mp.Int(append(b, kPreviousLeaseExpiresAt...), v.PreviousExpiresAt)
	b = mp.Int(append(b, kLeaseExpiresAt...), v.LeaseExpiresAt)
	b = mp.String(append(b, kStep...), v.Step)
	b = append(b, kClientTime...)
	if v.ClientTime == nil {
		b = mp.Nil(b)
	} else {
		b = mp.Int(b, *v.ClientTime)
	}
	return b
}

// appendTaskCanceled appends the encoding of a TaskCanceled body.
func appendTaskCanceled(b []byte, v *TaskCanceled) []byte {
	b = mp.MapLen(b, 8)
	b = mp.String(append(b, kTaskID...), v.TaskID)
	b = mp.String(append(b, kBy...), v.By)
	b = mp.String(append(b, kReason...), v.Reason)
	b = mp.String(append(b, kDeviceID...), v.DeviceID)
	b = mp.Uint(append(b, kGeneration...), v.Generation)
	b = mp.String(append(b, kExecutionID...), v.ExecutionID)
	b = mp.Uint(append(b, kVersion...), v.Version)
	b = mp.Int(append(b, kLeaseExpiresAt...), v.LeaseExpiresAt)
	return b
}

// appendExec appends the fields an execution step, completion and failure
// begin with.
func appendExec(b []byte, task, device string, gen uint64, exec string, version uint64) []byte {
	b = mp.String(append(b, kTaskID...), task)
	b = mp.String(append(b, kDeviceID...), device)
	b = mp.Uint(append(b, kGeneration...), gen)
	b = mp.String(append(b, kExecutionID...), exec)
	return mp.Uint(append(b, kVersion...), version)
}

// Body field names, as msgpack strings.
var (
	kTaskID                 = mp.String(nil, "task_id")
	kPayload                = mp.String(nil, "payload")
	kPayloadSHA256          = mp.String(nil, "payload_sha256")
	kAuthorization          = mp.String(nil, "authorization")
	kTakeover               = mp.String(nil, "takeover")
	kSecretCheck            = mp.String(nil, "secret_check")
	kAuthorizationID        = mp.String(nil, "authorization_id")
	kRevision               = mp.String(nil, "revision")
	kImageSHA256            = mp.String(nil, "image_sha256")
	kExpiresAt              = mp.String(nil, "expires_at")
	kDeviceID               = mp.String(nil, "device_id")
	kSessionID              = mp.String(nil, "session_id")
	kGeneration             = mp.String(nil, "claim_generation")
	kVersion                = mp.String(nil, "version")
	kTokenOrigin            = mp.String(nil, "token_origin")
	kTokenSHA256            = mp.String(nil, "token_sha256")
	kNonce                  = mp.String(nil, "nonce")
	kAuthorizationExpiresAt = mp.String(nil, "authorization_expires_at")
	kLeaseExpiresAt         = mp.String(nil, "lease_expires_at")
	kPreviousDeviceID       = mp.String(nil, "previous_device_id")
	kPresence               = mp.String(nil, "presence")
	kReceivedAt             = mp.String(nil, "received_at")
	kAppVersion             = mp.String(nil, "app_version")
	kOSVersion              = mp.String(nil, "os_version")
	kTargetAppVersion       = mp.String(nil, "target_app_version")
	kChecks                 = mp.String(nil, "checks")
	kRequiredChecks         = mp.String(nil, "required_checks")
	kPreviousLeaseExpiresAt = mp.String(nil, "previous_lease_expires_at")
	kExecutionID            = mp.String(nil, "execution_id")
	kStep                   = mp.String(nil, "step")
	kClientTime             = mp.String(nil, "client_time")
	kReason                 = mp.String(nil, "reason")
	kResult                 = mp.String(nil, "result")
	kReasonCode             = mp.String(nil, "reason_code")
	kDetail                 = mp.String(nil, "detail")
	kBy                     = mp.String(nil, "by")
)
