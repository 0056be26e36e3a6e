package commands

import (
	"encoding/hex"
	"testing"

	"taskledger/events"
	"taskledger/ledger"
)

// A server-issued claim records the key-check value of the secret that
// issued it (a client-issued one none), and a fold told to check claims
// against another value refuses it: the check at write time that lets the
// one stored key-check value stand for every claim (D324).
func TestServerClaimRecordsItsSecretCheck(t *testing.T) {
	claim := func(w *world, token string) (*Decision, *events.TaskClaimed) {
		d := w.device()
		w.task()
		w.present(d)
		c := &ClaimNext{Device: d, Key: w.key(), Fingerprint: []byte{1}, SessionID: w.id()}
		if token != "" {
			c.TokenHash = HashToken(token)
		}
		dec, err := c.Decide(&Ctx{State: w.s, Now: w.now, Cfg: &w.cfg, IDs: w.id, Nonce: func(b []byte) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		return dec, dec.Events[0].Body.(*events.TaskClaimed)
	}
	w := newWorld(t)
	want := hex.EncodeToString(SecretCheck(w.cfg.ClaimSecret))
	if _, b := claim(w, ""); b.SecretCheck != want {
		t.Fatalf("server-issued claim records secret_check %q, want %q", b.SecretCheck, want)
	}
	if _, b := claim(newWorld(t), "client"); b.SecretCheck != "" {
		t.Fatalf("client-issued claim records secret_check %q", b.SecretCheck)
	}

	for _, tc := range []struct {
		name    string
		against string
		refused bool
	}{{"same secret", want, false}, {"another secret", hex.EncodeToString(SecretCheck([]byte("another secret"))), true}} {
		w := newWorld(t)
		w.s.CheckClaimsAgainst(tc.against)
		dec, _ := claim(w, "")
		ev := (&Engine{}).stamp(w.s, &dec.Events[0], w.now)
		if _, _, err := ledger.SealBody(ev, w.head, dec.Events[0].Body, events.AppendBody); err != nil {
			t.Fatal(err)
		}
		err := w.s.ApplyDecoded(ev, dec.Events[0].Body)
		if (err != nil) != tc.refused {
			t.Fatalf("%s: fold answered %v, refused want %v", tc.name, err, tc.refused)
		}
	}
}
