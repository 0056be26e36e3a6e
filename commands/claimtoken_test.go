package commands

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

var testSecret = bytes.Repeat([]byte{0x42}, 32)

const testNonce = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// A server-issued claim token is bound to its whole field set: changing
// any field, moving bytes between adjacent fields, another secret, or the
// same bytes under another domain (the secret key-check, a bare HMAC)
// never gives the same token.
func TestClaimTokenDomainSeparation(t *testing.T) {
	base := ServerToken(testSecret, "dev", "task", "auth", 7, testNonce)
	if again := ServerToken(testSecret, "dev", "task", "auth", 7, testNonce); again != base {
		t.Fatalf("the token is not deterministic")
	}
	if len(base) != 64 {
		t.Fatalf("token %q is not 64 hex characters", base)
	}
	other := testNonce[:63] + "0"
	variants := map[string]string{
		"device":                  ServerToken(testSecret, "dev2", "task", "auth", 7, testNonce),
		"task":                    ServerToken(testSecret, "dev", "task2", "auth", 7, testNonce),
		"authorization":           ServerToken(testSecret, "dev", "task", "auth2", 7, testNonce),
		"generation":              ServerToken(testSecret, "dev", "task", "auth", 8, testNonce),
		"nonce":                   ServerToken(testSecret, "dev", "task", "auth", 7, other),
		"secret":                  ServerToken(bytes.Repeat([]byte{0x43}, 32), "dev", "task", "auth", 7, testNonce),
		"device|task boundary":    ServerToken(testSecret, "devt", "ask", "auth", 7, testNonce),
		"task|auth boundary":      ServerToken(testSecret, "dev", "tas", "kauth", 7, testNonce),
		"device and task swapped": ServerToken(testSecret, "task", "dev", "auth", 7, testNonce),
		"fields in the empty one": ServerToken(testSecret, "", "devtask", "auth", 7, testNonce),
		"secret key-check domain": hex.EncodeToString(SecretCheck(testSecret)),
		"HMAC without domain tag": bareHMAC(testSecret, "dev", "task", "auth"),
		"token hash (as stored)":  HashToken(base),
		"generation in the nonce": ServerToken(testSecret, "dev", "task", "auth", 0, testNonce),
	}
	seen := map[string]string{base: "base"}
	for name, v := range variants {
		if prev, dup := seen[v]; dup {
			t.Errorf("%s gives the same value as %s", name, prev)
		}
		seen[v] = name
		if hmac.Equal([]byte(HashToken(v)), []byte(HashToken(base))) {
			t.Errorf("a token for another field set (%s) verifies as the base token", name)
		}
	}
}

// bareHMAC is the HMAC of the concatenated fields without the domain tag
// and length prefixes: what a naive construction would compute.
func bareHMAC(secret []byte, fields ...string) string {
	m := hmac.New(sha256.New, secret)
	for _, f := range fields {
		m.Write([]byte(f))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// 10^5 claim nonces are all distinct, 32 bytes each.
func TestClaimNonceUniqueness(t *testing.T) {
	const n = 100_000
	seen := make(map[string]struct{}, n)
	for range n {
		nonce, err := NewNonce()
		if err != nil {
			t.Fatal(err)
		}
		if len(nonce) != 64 {
			t.Fatalf("nonce %q is not 32 bytes of hex", nonce)
		}
		if _, dup := seen[nonce]; dup {
			t.Fatalf("nonce repeated after %d claims", len(seen))
		}
		seen[nonce] = struct{}{}
	}
}
