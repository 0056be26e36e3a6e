package client

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// The claim answer's takeover policy is read when present ("reclaim" or
// "manual"); any other value makes the answer not definitive.
func TestClaimTakeoverField(t *testing.T) {
	with := func(v string) string {
		return strings.Replace(goodClaim, `"authorization_expires_at":"2026-11-30T09:15:00.000Z"}`,
			`"authorization_expires_at":"2026-11-30T09:15:00.000Z","takeover":`+v+`}`, 1)
	}
	for _, v := range []string{"reclaim", "manual"} {
		c := newStub(t, &stub{status: 200, header: jsonCT, body: with(`"` + v + `"`)})
		res, err := c.Claim(context.Background(), claimCall())
		if err != nil || res.Claim == nil || res.Claim.Takeover != v {
			t.Fatalf("%s: %+v %v", v, res.Claim, err)
		}
	}
	c := newStub(t, &stub{status: 200, header: jsonCT, body: goodClaim})
	if res, err := c.Claim(context.Background(), claimCall()); err != nil || res.Claim.Takeover != "" {
		t.Fatalf("absent: %+v %v", res.Claim, err)
	}
	for _, bad := range []string{`"never"`, `1`, `null`} {
		c := newStub(t, &stub{status: 200, header: jsonCT, body: with(bad)})
		if _, err := c.Claim(context.Background(), claimCall()); !errors.Is(err, ErrUnknownOutcome) {
			t.Errorf("takeover %s: %v, want an unknown outcome", bad, err)
		}
	}
}
