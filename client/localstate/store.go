package localstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// FileName is the state file inside the state directory.
const FileName = "agent.db"

var (
	bMeta    = []byte("meta")
	bPending = []byte("pending")
	bClaim   = []byte("claim")
	bManual  = []byte("manual")

	kFormat   = []byte("format")
	kIdentity = []byte("identity")
	kSession  = []byte("session")
	kOp       = []byte("op")
	kActive   = []byte("active")
)

// Store is an open state file.
type Store struct {
	db   *bolt.DB
	path string
}

// DefaultDir is the per-user state directory: $XDG_STATE_HOME/taskledger
// (or ~/.local/state/taskledger) on Unix, %LOCALAPPDATA%\taskledger on
// Windows, the user config dir on macOS.
func DefaultDir() (string, error) {
	return defaultDir(runtime.GOOS, os.Getenv, os.UserHomeDir, os.UserConfigDir)
}

// defaultDir is DefaultDir for the system goos, with its environment and
// directory lookups passed in (so every system's rule is tested anywhere).
// Windows: %LOCALAPPDATA%\taskledger — the machine-local profile, never the
// roaming %AppData% (the state and its sealed secrets belong to this
// machine). macOS: the user configuration directory. Others:
// $XDG_STATE_HOME/taskledger or ~/.local/state/taskledger.
func defaultDir(goos string, getenv func(string) string, home, config func() (string, error)) (string, error) {
	switch goos {
	case "windows":
		d := getenv("LOCALAPPDATA")
		if d == "" || !isAbsFor(goos, d) {
			return "", fmt.Errorf("localstate: %%LOCALAPPDATA%% is not set to an absolute path")
		}
		return strings.TrimRight(d, `\/`) + `\taskledger`, nil
	case "darwin":
		d, err := config()
		if err != nil {
			return "", fmt.Errorf("localstate: no user config directory: %w", err)
		}
		return filepath.Join(d, "taskledger"), nil
	}
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "taskledger"), nil
	}
	h, err := home()
	if err != nil {
		return "", fmt.Errorf("localstate: no home directory: %w", err)
	}
	return filepath.Join(h, ".local", "state", "taskledger"), nil
}

// isAbsFor reports whether p is absolute on goos (a Windows path is
// checked by its own rules on any system: drive letter or UNC).
func isAbsFor(goos, p string) bool {
	if goos != "windows" {
		return filepath.IsAbs(p)
	}
	if strings.HasPrefix(p, `\\`) {
		return len(p) > 2
	}
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') &&
		(('a' <= p[0] && p[0] <= 'z') || ('A' <= p[0] && p[0] <= 'Z'))
}

// Open opens (creating when missing) the state in dir, taking its
// exclusive lock; a second opener fails at once with ErrInUse.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("localstate: create %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 250 * time.Millisecond})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: state %s is in use by another agent (stop it first)", ErrInUse, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	s := &Store{db: db, path: path}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bMeta, bPending, bClaim, bManual} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		m := tx.Bucket(bMeta)
		switch v := m.Get(kFormat); {
		case v == nil:
			return m.Put(kFormat, []byte(FormatVersion))
		case string(v) != FormatVersion:
			return fmt.Errorf("%w: unknown format %q", ErrCorrupt, v)
		}
		return nil
	})
	if err != nil {
		db.Close()
		if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return nil, err
	}
	return s, nil
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// Close releases the file and its lock.
func (s *Store) Close() error { return s.db.Close() }

// Load reads and decodes the whole state in one transaction.
func (s *Store) Load() (*State, error) {
	st := &State{}
	err := s.db.View(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		if v := m.Get(kIdentity); v != nil {
			st.Identity = &Identity{}
			if err := decode(v, st.Identity); err != nil {
				return err
			}
		}
		st.SessionID = string(m.Get(kSession))
		if v := tx.Bucket(bPending).Get(kOp); v != nil {
			st.Pending = &Pending{}
			if err := decode(v, st.Pending); err != nil {
				return err
			}
		}
		if v := tx.Bucket(bClaim).Get(kActive); v != nil {
			st.Active = &Active{}
			if err := decode(v, st.Active); err != nil {
				return err
			}
		}
		return tx.Bucket(bManual).ForEach(func(k, v []byte) error {
			var mm Manual
			if err := decode(v, &mm); err != nil {
				return err
			}
			st.Manual = append(st.Manual, mm)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

func decode(v []byte, out any) error {
	if err := json.Unmarshal(v, out); err != nil {
		return fmt.Errorf("%w: undecodable record", ErrCorrupt)
	}
	return nil
}

// Change is one atomic, fsynced update. Fields left zero change nothing.
type Change struct {
	// Identity replaces the identity; SessionID replaces the session.
	Identity  *Identity
	SessionID string
	// ClearPending removes the pending request; Pending stores one (the
	// slot must be empty unless ClearPending is set too).
	ClearPending bool
	Pending      *Pending
	// ClearActive removes the active claim; Active stores one.
	ClearActive bool
	Active      *Active
	// Manual records a task needing a person; Resolve removes one by id.
	Manual  *Manual
	Resolve string
}

// Apply commits c in one transaction (fsynced before it returns).
func (s *Store) Apply(c Change) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		m, p, a, mb := tx.Bucket(bMeta), tx.Bucket(bPending), tx.Bucket(bClaim), tx.Bucket(bManual)
		if c.Identity != nil {
			if err := put(m, kIdentity, c.Identity); err != nil {
				return err
			}
		}
		if c.SessionID != "" {
			if err := m.Put(kSession, []byte(c.SessionID)); err != nil {
				return err
			}
		}
		if c.ClearPending {
			if err := p.Delete(kOp); err != nil {
				return err
			}
		}
		if c.Pending != nil {
			if p.Get(kOp) != nil {
				return ErrPendingExists
			}
			if err := put(p, kOp, c.Pending); err != nil {
				return err
			}
		}
		if c.ClearActive {
			if err := a.Delete(kActive); err != nil {
				return err
			}
		}
		if c.Active != nil {
			if err := put(a, kActive, c.Active); err != nil {
				return err
			}
		}
		if c.Manual != nil {
			if err := put(mb, []byte(c.Manual.ID), c.Manual); err != nil {
				return err
			}
		}
		if c.Resolve != "" {
			if mb.Get([]byte(c.Resolve)) == nil {
				return fmt.Errorf("%w: nothing needs a person under %s", ErrNotFound, c.Resolve)
			}
			if err := mb.Delete([]byte(c.Resolve)); err != nil {
				return err
			}
		}
		return nil
	})
}

func put(b *bolt.Bucket, k []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, data)
}
