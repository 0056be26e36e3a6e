package device

import (
	"context"
	"errors"
	"fmt"
	"time"

	"taskledger/client"
	"taskledger/client/localstate"
	"taskledger/internal/failpoint"
)

// ClaimOutcome is what Claim did.
type ClaimOutcome struct {
	// Active is the claim now held (new, replayed, or already held).
	Active *localstate.Active
	// NoTask is a definitive 204; RetryAfter is the server's hint.
	NoTask     bool
	RetryAfter time.Duration
	// Replayed is set when the answer came from a replayed key.
	Replayed bool
}

// CheckManual returns a *NeedsPersonError when anything needs a person.
func (d *Device) CheckManual() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.manualErr()
}

func (d *Device) manualErr() error {
	if len(d.st.Manual) == 0 {
		return nil
	}
	m := d.st.Manual[0]
	return &NeedsPersonError{ID: m.ID, Code: m.Code, Reason: m.Reason}
}

// Claim asks for work, or replays the claim whose outcome is unknown. It
// returns the active claim without sending anything when one is held, and
// refuses while a task needs a person. On an unknown outcome, 401 or
// device_not_ready the persisted key is kept for the next call.
func (d *Device) Claim(ctx context.Context) (ClaimOutcome, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.manualErr(); err != nil {
		return ClaimOutcome{}, err
	}
	if d.st.Active != nil {
		a := *d.st.Active
		return ClaimOutcome{Active: &a}, nil
	}
	p := d.st.Pending
	if p != nil && p.Kind != localstate.PendingClaim {
		return ClaimOutcome{}, fmt.Errorf("%w: %s %s", ErrPendingOther, p.Kind, p.Op)
	}
	replay := p != nil
	if p == nil {
		tok, err := newClaimToken()
		if err != nil {
			return ClaimOutcome{}, err
		}
		key := newKey()
		sealed, err := d.sealer.Seal([]byte(tok), claimTokenAAD(key))
		if err != nil {
			return ClaimOutcome{}, err
		}
		np := &localstate.Pending{Kind: localstate.PendingClaim, Key: key, Body: d.c.ClaimBody(d.st.SessionID),
			SealedClaimToken: sealed, CreatedAt: d.clock.Now().UTC()}
		if err := d.apply(localstate.Change{Pending: np}); err != nil {
			return ClaimOutcome{}, err
		}
		p = d.st.Pending
		d.log.Info("claim persisted", "key", p.Key)
	} else {
		d.log.Info("replaying claim", "key", p.Key)
	}
	tokb, err := d.sealer.Open(p.SealedClaimToken, claimTokenAAD(p.Key))
	if err != nil {
		return ClaimOutcome{}, fmt.Errorf("pending claim token: %w", err)
	}
	tok := string(tokb)
	_ = failpoint.Eval(failpoint.ClaimBeforeSend) // kill only
	res, err := d.c.Claim(ctx, client.ClaimCall{Key: p.Key, SessionID: d.st.SessionID, ClaimToken: tok})
	if err != nil {
		return ClaimOutcome{}, d.claimFailed(p, err)
	}
	if res.NoTask {
		if err := d.apply(localstate.Change{ClearPending: true}); err != nil {
			return ClaimOutcome{}, err
		}
		d.log.Info("no task", "key", p.Key, "retry_after", res.RetryAfter.String())
		return ClaimOutcome{NoTask: true, RetryAfter: res.RetryAfter, Replayed: res.Replayed}, nil
	}
	_ = failpoint.Eval(failpoint.ClaimAfterResponse) // kill only
	cl := res.Claim
	a := &localstate.Active{TaskID: cl.TaskID, SessionID: cl.SessionID, ClaimKey: p.Key, Generation: cl.Generation,
		TokenOrigin: localstate.OriginClient, SealedToken: p.SealedClaimToken, Payload: cl.Payload,
		Revision: cl.Revision, CreatedAt: cl.CreatedAt, ReferenceImageURL: cl.ReferenceImageURL, State: cl.State,
		Version: cl.Version, ServerTime: cl.ServerTime, LeaseExpiresAt: cl.LeaseExpiresAt,
		AuthorizationExpiresAt: cl.AuthorizationExpiresAt, Takeover: cl.Takeover}
	if err := d.apply(localstate.Change{ClearPending: true, Active: a}); err != nil {
		return ClaimOutcome{}, err
	}
	d.claimToken = tok
	d.log.Info("claimed", "task", cl.TaskID, "generation", cl.Generation, "replayed", replay || res.Replayed)
	cp := *d.st.Active
	return ClaimOutcome{Active: &cp, Replayed: res.Replayed}, nil
}

// claimFailed applies the recovery table to a failed claim.
func (d *Device) claimFailed(p *localstate.Pending, err error) error {
	var ae *client.APIError
	switch {
	case errors.Is(err, client.ErrUnknownOutcome), errors.Is(err, client.ErrUnauthorized):
		d.log.Warn("claim outcome unknown, key kept for replay", "key", p.Key, "err", err.Error())
		return err
	case errors.As(err, &ae) && ae.Code == client.CodeDeviceNotReady:
		d.log.Warn("device not ready, key kept for replay", "key", p.Key)
		return err
	case errors.As(err, &ae):
		m := &localstate.Manual{ID: p.Key, Code: ae.Code, Since: d.clock.Now().UTC(),
			Reason: fmt.Sprintf("claim-next answered %d %s: %s", ae.Status, ae.Code, ae.Message)}
		if aerr := d.apply(localstate.Change{ClearPending: true, Manual: m}); aerr != nil {
			return aerr
		}
		d.log.Error("claim needs a person", "key", p.Key, "code", ae.Code)
		return &NeedsPersonError{ID: m.ID, Code: m.Code, Reason: m.Reason}
	}
	return err
}
