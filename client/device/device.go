// Package device is the crash-safe engine a device process embeds: it keeps
// the durable state (client/localstate), seals secrets (client/secretstore)
// and speaks the protocol (client) with the recovery rules of client.md:
//
//   - every keyed request is committed (key, exact body, sealed client
//     claim token) before it is sent, and replayed with the same key and
//     body after an unknown outcome;
//   - a new claim key only after a definitive 204;
//   - no new claim while a claim is active, a claim outcome is unknown, or
//     a task needs a person;
//   - a successful answer is stored with its snapshot in one transaction;
//   - a definitive rejection that is not a routine one is recorded for a
//     person, never retried with a new key;
//   - 401 stops until new credentials are enrolled.
//
// A Device is used by one goroutine at a time (calls are serialized by a
// mutex); one request is pending at most.
package device

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"taskledger/client"
	"taskledger/client/localstate"
	"taskledger/client/secretstore"
)

// Options configures Open.
type Options struct {
	// StateDir is the state directory (required).
	StateDir string
	// Clock defaults to the system clock.
	Clock client.Clock
	// Logger defaults to discarding.
	Logger *slog.Logger
	// ConnectTimeout, ReadTimeout and RootCAs configure the transport.
	ConnectTimeout time.Duration
	ReadTimeout    time.Duration
	RootCAs        *x509.CertPool
	// OnSend is called before each request leaves (tests).
	OnSend func(op string)
}

// Device is an open device state with its transport.
type Device struct {
	mu     sync.Mutex
	store  *localstate.Store
	st     *localstate.State
	sealer secretstore.Sealer
	c      *client.Client
	clock  client.Clock
	log    *slog.Logger
	// claimToken is the decrypted token of the active claim (memory only).
	claimToken string
}

// OpenStore opens the state without decrypting anything (status, resolve).
func OpenStore(dir string) (*localstate.Store, *localstate.State, error) {
	s, err := localstate.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.Load()
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, st, nil
}

// Open opens the state, decrypts every stored secret and builds the
// transport. Any state or decryption failure returns an error before a
// single request could be sent.
func Open(o Options) (*Device, error) {
	store, st, err := OpenStore(o.StateDir)
	if err != nil {
		return nil, err
	}
	d, err := open(store, st, o)
	if err != nil {
		store.Close()
		return nil, err
	}
	return d, nil
}

func open(store *localstate.Store, st *localstate.State, o Options) (*Device, error) {
	if st.Identity == nil {
		return nil, localstate.ErrNotEnrolled
	}
	id := st.Identity
	if !client.IsUUID(st.SessionID) {
		return nil, fmt.Errorf("%w: missing session id", localstate.ErrCorrupt)
	}
	sealer, err := secretstore.Open(id.KeySource, keyRef(id))
	if err != nil {
		return nil, err
	}
	tok, err := sealer.Open(id.SealedToken, deviceTokenAAD(id.ServerURL, id.DeviceID))
	if err != nil {
		return nil, fmt.Errorf("device token: %w", err)
	}
	d := &Device{store: store, st: st, sealer: sealer, clock: o.Clock, log: o.Logger}
	if d.clock == nil {
		d.clock = client.SystemClock{}
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if p := st.Pending; p != nil && p.Kind == localstate.PendingClaim {
		if _, err := sealer.Open(p.SealedClaimToken, claimTokenAAD(p.Key)); err != nil {
			return nil, fmt.Errorf("pending claim token: %w", err)
		}
	}
	if a := st.Active; a != nil {
		t, err := sealer.Open(a.SealedToken, claimTokenAAD(a.ClaimKey))
		if err != nil {
			return nil, fmt.Errorf("claim token of task %s: %w", a.TaskID, err)
		}
		d.claimToken = string(t)
	}
	c, err := client.New(client.Config{BaseURL: id.ServerURL, DeviceID: id.DeviceID, Token: string(tok),
		ConnectTimeout: o.ConnectTimeout, ReadTimeout: o.ReadTimeout, RootCAs: o.RootCAs, OnSend: o.OnSend})
	if err != nil {
		return nil, err
	}
	d.c = c
	return d, nil
}

// Close releases the state.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.c.CloseIdle()
	return d.store.Close()
}

// State returns a copy of the current local state (no secrets: sealed
// values only).
func (d *Device) State() localstate.State {
	d.mu.Lock()
	defer d.mu.Unlock()
	cp := *d.st
	if d.st.Active != nil {
		a := *d.st.Active
		cp.Active = &a
	}
	if d.st.Pending != nil {
		p := *d.st.Pending
		cp.Pending = &p
	}
	cp.Manual = append([]localstate.Manual(nil), d.st.Manual...)
	return cp
}

// Client exposes the transport (presence heartbeat, reference image).
func (d *Device) Client() *client.Client { return d.c }

// apply commits a change and reloads the cached state.
func (d *Device) apply(c localstate.Change) error {
	if err := d.store.Apply(c); err != nil {
		return err
	}
	st, err := d.store.Load()
	if err != nil {
		return err
	}
	d.st = st
	return nil
}

// keyRef is what names the identity's key: its file, or its keychain id.
func keyRef(id *localstate.Identity) string {
	if id.KeySource == secretstore.KindKeychain {
		return id.KeyID
	}
	return id.KeyFile
}

func deviceTokenAAD(server, deviceID string) []byte {
	return []byte("taskledger/device-token/v1|" + server + "|" + deviceID)
}

func claimTokenAAD(claimKey string) []byte {
	return []byte("taskledger/claim-token/v1|" + claimKey)
}

// newClaimToken returns 32 random bytes as unpadded base64url.
func newClaimToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func newKey() string { return uuid.NewString() }

// EnrollOptions is the input of Enroll.
type EnrollOptions struct {
	StateDir  string
	ServerURL string
	DeviceID  string
	// TokenFile holds the device token alone (trailing newline allowed).
	TokenFile string
	// KeyFile names the AEAD key file (created 0600 when missing); empty
	// uses the OS store where there is one, else enrollment refuses.
	KeyFile string
	Clock   client.Clock
}

// Enroll stores (or replaces) the identity. The identity (server, device)
// cannot change while anything is pending, active or needs a person; the
// same identity may be enrolled again with a new token.
func Enroll(o EnrollOptions) error {
	base, err := client.ParseBaseURL(o.ServerURL)
	if err != nil {
		return err
	}
	server := base.String()
	if !client.IsUUID(o.DeviceID) {
		return fmt.Errorf("%w: device id must be a canonical lowercase UUIDv4", ErrIdentity)
	}
	raw, err := os.ReadFile(o.TokenFile)
	if err != nil {
		return fmt.Errorf("%w: cannot read the token file", ErrIdentity)
	}
	token := strings.TrimRight(string(raw), "\r\n")
	if err := client.CheckDeviceToken(token); err != nil {
		return fmt.Errorf("%w: the token file must hold the device token alone", ErrIdentity)
	}
	store, st, err := OpenStore(o.StateDir)
	if err != nil {
		return err
	}
	defer store.Close()
	keyPath := o.KeyFile
	if keyPath != "" {
		if keyPath, err = filepath.Abs(keyPath); err != nil {
			return fmt.Errorf("%w: key file path", ErrIdentity)
		}
	}
	if keyPath == "" && st.Identity != nil {
		keyPath = st.Identity.KeyFile
	}
	sameKey := st.Identity == nil || st.Identity.KeyFile == keyPath
	if st.Identity != nil && st.Busy() {
		if st.Identity.ServerURL != server || st.Identity.DeviceID != o.DeviceID {
			return fmt.Errorf("%w (enrolled: %s, device %s)", localstate.ErrIdentityLocked, st.Identity.ServerURL, st.Identity.DeviceID)
		}
		if !sameKey {
			return fmt.Errorf("%w: the key file cannot change now", localstate.ErrIdentityLocked)
		}
	}
	var sealer secretstore.Sealer
	if keyPath == "" && st.Identity != nil && st.Identity.KeySource == secretstore.KindKeychain {
		// The same keychain key: sealed claim tokens stay readable.
		sealer, err = secretstore.OpenKeychainKey(st.Identity.KeyID)
	} else {
		sealer, err = secretstore.ForEnrollment(keyPath)
	}
	if err != nil {
		return err
	}
	sealed, err := sealer.Seal([]byte(token), deviceTokenAAD(server, o.DeviceID))
	if err != nil {
		return err
	}
	clock := o.Clock
	if clock == nil {
		clock = client.SystemClock{}
	}
	id := &localstate.Identity{ServerURL: server, DeviceID: o.DeviceID, KeySource: sealer.Kind(),
		SealedToken: sealed, EnrolledAt: clock.Now().UTC()}
	switch sealer.Kind() {
	case secretstore.KindKeyFile:
		id.KeyFile = keyPath
	case secretstore.KindKeychain:
		if k, ok := sealer.(interface{ KeyID() string }); ok {
			id.KeyID = k.KeyID()
		}
	}
	ch := localstate.Change{Identity: id}
	if st.Identity == nil || st.Identity.ServerURL != server || st.Identity.DeviceID != o.DeviceID || st.SessionID == "" {
		ch.SessionID = newKey()
	}
	return store.Apply(ch)
}
