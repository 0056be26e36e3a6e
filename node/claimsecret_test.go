package node_test

import (
	"encoding/hex"
	"errors"
	"net/http"
	"testing"

	"taskledger/commands"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

// Every server-issued claim records the key-check value of the secret that
// issued it, and the node refuses (at write time, in the fold) a claim
// carrying another; at start every open server-issued claim of the loaded
// projections is recomputed, so a snapshot cannot bring in a claim this
// secret does not give.
func TestServerClaimsCarryTheirSecretCheck(t *testing.T) {
	secret := nodetest.NewClaimSecret(t)
	n := nodetest.Start(t, nodetest.WithClaimSecret(secret))
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	nodetest.Must(t, n.Authorize(id, 1, 3600e9), http.StatusOK)
	nodetest.Must(t, d.ClaimWith(nodetest.NewKey(), ""), http.StatusOK)

	want := hex.EncodeToString(commands.SecretCheck(secret))
	n.Engine.ReadNow(func(st *projections.State, _ int64) {
		if got := st.ClaimsCheckedAgainst(); got != want {
			t.Errorf("the fold checks claims against %q, want the secret's %q", got, want)
		}
		if err := node.VerifyOpenServerClaims(st, secret); err != nil {
			t.Errorf("the open claim does not verify under its own secret: %v", err)
		}
		if err := node.VerifyOpenServerClaims(st, nodetest.NewClaimSecret(t)); !errors.Is(err, node.ErrSecret) {
			t.Errorf("an open claim verifies under another secret: %v", err)
		}
	})
	r := n.Restart(nodetest.WithClaimSecret(secret)) // start re-checks, and verifies at cleanup
	r.Close()
}
