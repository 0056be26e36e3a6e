package checkpoint

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
)

// algEd25519 is the note format's algorithm byte of Ed25519 keys.
const algEd25519 = 1

// publicFromPrivate builds the verifier string of a note signer key from
// its name, key hash and base64(alg || 32-byte seed).
func publicFromPrivate(name, hash, key64 string) (string, error) {
	key, err := base64.StdEncoding.DecodeString(key64)
	if err != nil || len(key) != 1+ed25519.SeedSize || key[0] != algEd25519 {
		return "", errors.New("checkpoint: not an Ed25519 signer key")
	}
	pub := ed25519.NewKeyFromSeed(key[1:]).Public().(ed25519.PublicKey)
	return name + "+" + hash + "+" + base64.StdEncoding.EncodeToString(append([]byte{algEd25519}, pub...)), nil
}
