package commands

import (
	"crypto/subtle"

	"taskledger/projections"
)

// ReferenceImageAccess checks a device's read of a task's reference image:
// only through its current, unexpired claim (the checks of steps 1 and 3–7
// of a task-scoped call). It returns the image's SHA-256.
func ReferenceImageAccess(s *projections.State, now int64, p Principal, taskID, tokenHash string, gen uint64) (string, error) {
	d := s.Devices[p.DeviceID]
	if d == nil || d.Status != projections.DeviceStatusActive {
		return "", ErrDeviceRevoked
	}
	t := s.Tasks[taskID]
	if t == nil || !t.Open() || t.Claim == nil || t.Claim.DeviceID != d.ID {
		return "", ErrClaimNotFound
	}
	if subtle.ConstantTimeCompare([]byte(t.Claim.TokenHash), []byte(tokenHash)) != 1 {
		return "", ErrClaimTokenMismatch
	}
	if gen != t.Claim.Generation {
		return "", ErrClaimGenerationMismatch
	}
	lease := t.Claim.LeaseExpiresAt
	if t.Started() {
		lease = t.Exec.Lease()
	}
	if now >= lease {
		return "", ErrLeaseExpired
	}
	if t.Image == nil {
		return "", ErrNoReferenceImage
	}
	return t.Image.SHA256, nil
}
