package localstate

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSecondOpenerRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Open(dir)
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second open: %v", err)
	}
}

func TestApplyAndLoad(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(Change{Pending: &Pending{Kind: PendingClaim, Key: "k1"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(Change{Pending: &Pending{Kind: PendingClaim, Key: "k2"}}); !errors.Is(err, ErrPendingExists) {
		t.Fatalf("second pending: %v", err)
	}
	if err := s.Apply(Change{ClearPending: true, Active: &Active{TaskID: "t1", Generation: 2}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != nil || st.Active == nil || st.Active.TaskID != "t1" || st.Active.Generation != 2 || !st.Busy() {
		t.Fatalf("%+v", st)
	}
	if err := s.Apply(Change{Resolve: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
}

func TestDamagedFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("this is not a bbolt file at all, not at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%v", err)
	}
}
