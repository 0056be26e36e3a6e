// Package checkpoint signs and opens the checkpoints of the Merkle tree
// over the log (signed tree heads).
//
// # Format
//
// A checkpoint is a signed note (golang.org/x/mod/sumdb/note) whose text
// is the log checkpoint of github.com/transparency-dev/formats/log — the
// origin, the tree size in decimal and the base64 root hash, one a line —
// followed by one extension line "time <RFC 3339 UTC, milliseconds>" (the
// server's injected clock when it signed):
//
//	taskledger/6f1c0e9a3b2d4c5e
//	1042
//	qP1m0e3Xo5tY1c2VJmS7q8kWq0wZ4Lm9Jx1cQy3vE0Q=
//	time 2026-12-01T21:08:24.123Z
//
//	— taskledger/6f1c0e9a3b2d4c5e <base64 key hash and Ed25519 signature>
//
// The origin is the signing key's name, so a checkpoint names the log that
// signed it and witness tools that read this format can check it with the
// verifier string alone.
//
// # Key
//
// The Ed25519 signing key is the file checkpoint-key in the data
// directory (mode 0600, created at the first start): one line, the note
// signer key "PRIVATE+KEY+<origin>+<key hash>+<key>". It is never logged or
// served; `taskledger checkpoint-key export` prints its verifier string
// "<origin>+<key hash>+<public key>".
package checkpoint

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"

	"taskledger/internal/durable"
)

// KeyFile is the signing key's file name in the data directory.
const KeyFile = "checkpoint-key"

// Errors of the package.
var (
	// ErrNoKey is a data directory without a signing key.
	ErrNoKey = errors.New("checkpoint: no checkpoint key in the data directory")
	// ErrKeyMode is a key file readable by group or others.
	ErrKeyMode = errors.New("checkpoint: the checkpoint key file must be mode 0600")
	// ErrKey is a key file that does not hold a signer key.
	ErrKey = errors.New("checkpoint: the checkpoint key file is damaged")
	// ErrSignature is a checkpoint that does not carry a valid signature of
	// the expected key.
	ErrSignature = errors.New("checkpoint: not signed by the expected key")
	// ErrFormat is a checkpoint whose text is not a log checkpoint.
	ErrFormat = errors.New("checkpoint: not a log checkpoint")
	// ErrVerifier is a verifier string that cannot be parsed.
	ErrVerifier = errors.New("checkpoint: invalid verifier string")
)

// Checkpoint is one signed tree head.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   []byte
	Time   int64 // Unix milliseconds, from the server's clock
}

// Text is the checkpoint's note text.
func (c Checkpoint) Text() string {
	body := log.Checkpoint{Origin: c.Origin, Size: c.Size, Hash: c.Root}.Marshal()
	return string(body) + "time " + time.UnixMilli(c.Time).UTC().Format("2006-01-02T15:04:05.000Z") + "\n"
}

// Key is a loaded signing key.
type Key struct {
	signer   note.Signer
	verifier string
}

// Origin is the key's name, which every checkpoint it signs carries.
func (k *Key) Origin() string { return k.signer.Name() }

// Verifier is the public key's note verifier string.
func (k *Key) Verifier() string { return k.verifier }

// Sign signs c (its origin is set to the key's).
func (k *Key) Sign(c Checkpoint) ([]byte, error) {
	c.Origin = k.Origin()
	return note.Sign(&note.Note{Text: c.Text()}, k.signer)
}

// LoadOrCreateKey loads the key in dir, creating it (mode 0600) when there
// is none. created says whether it was created now.
func LoadOrCreateKey(dir string) (k *Key, created bool, err error) {
	k, err = LoadKey(dir)
	if !errors.Is(err, ErrNoKey) {
		return k, false, err
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, false, err
	}
	skey, _, err := note.GenerateKey(rand.Reader, "taskledger/"+hex.EncodeToString(id[:]))
	if err != nil {
		return nil, false, err
	}
	if err := durable.WriteFile(filepath.Join(dir, KeyFile), []byte(skey+"\n"), 0o600); err != nil {
		return nil, false, fmt.Errorf("checkpoint: write key: %w", err)
	}
	k, err = LoadKey(dir)
	return k, err == nil, err
}

// LoadKey loads the key in dir; ErrNoKey when there is none.
func LoadKey(dir string) (*Key, error) {
	path := filepath.Join(dir, KeyFile)
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoKey
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w (it is %#o)", ErrKeyMode, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	skey := strings.TrimSpace(string(b))
	signer, err := note.NewSigner(skey)
	if err != nil {
		return nil, ErrKey // the parse error could quote the key: never shown
	}
	return &Key{signer: signer, verifier: verifierOf(skey)}, nil
}

// verifierOf derives the verifier string of a signer key
// "PRIVATE+KEY+name+hash+base64(alg||private)".
func verifierOf(skey string) string {
	parts := strings.SplitN(skey, "+", 5)
	if len(parts) != 5 {
		return ""
	}
	name, hash, key64 := parts[2], parts[3], parts[4]
	v, err := publicFromPrivate(name, hash, key64)
	if err != nil {
		return ""
	}
	return v
}

// NewVerifier parses a verifier string.
func NewVerifier(vkey string) (note.Verifier, error) {
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrVerifier, err)
	}
	return v, nil
}

// Open checks a signed checkpoint against the verifier string vkey and
// parses it.
func Open(signed []byte, vkey string) (*Checkpoint, error) {
	v, err := NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	cp, ext, n, err := log.ParseCheckpoint(signed, v.Name(), v)
	if err != nil {
		if strings.Contains(err.Error(), "signature") {
			return nil, fmt.Errorf("%w: %v", ErrSignature, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	for _, s := range append(append([]note.Signature(nil), n.Sigs...), n.UnverifiedSigs...) {
		// base64 with nonzero padding bits decodes to the same signature:
		// only the canonical spelling is accepted, so every byte counts.
		if _, err := base64.StdEncoding.Strict().DecodeString(s.Base64); err != nil {
			return nil, fmt.Errorf("%w: signature is not canonical base64", ErrSignature)
		}
	}
	if len(cp.Hash) != 32 {
		return nil, fmt.Errorf("%w: root hash of %d bytes", ErrFormat, len(cp.Hash))
	}
	out := &Checkpoint{Origin: cp.Origin, Size: cp.Size, Root: cp.Hash}
	line, rest, _ := bytes.Cut(ext, []byte("\n"))
	ts, ok := bytes.CutPrefix(line, []byte("time "))
	if !ok || len(rest) != 0 {
		return nil, fmt.Errorf("%w: the extension is not one time line", ErrFormat)
	}
	t, err := time.Parse("2006-01-02T15:04:05.000Z", string(ts))
	if err != nil {
		return nil, fmt.Errorf("%w: time: %v", ErrFormat, err)
	}
	out.Time = t.UnixMilli()
	if out.Text() != string(checkpointText(signed)) {
		return nil, fmt.Errorf("%w: not in canonical form", ErrFormat)
	}
	return out, nil
}

// checkpointText is the text part of a signed note (before the blank line).
func checkpointText(signed []byte) []byte {
	i := bytes.LastIndex(signed, []byte("\n\n"))
	if i < 0 {
		return signed
	}
	return signed[:i+1]
}
