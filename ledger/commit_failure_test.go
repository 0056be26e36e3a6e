//go:build failpoints

package ledger

import (
	"errors"
	"syscall"
	"testing"

	"taskledger/internal/failpoint"
)

// A commit whose write or sync fails returns ErrCommitIO (wrapping the
// I/O error), and every later write of the store returns it too — an
// append, a checkpoint, an admin token — even once the disk works again:
// what the file holds is unknown until it is opened again. A refused
// sequence check is no such failure: the store goes on.
func TestFailedCommitBreaksTheStoreUntilReopened(t *testing.T) {
	for _, point := range []string{failpoint.CommitWrite, failpoint.CommitSync} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir)
			evs, head := sealed(t, GenesisHead(), 1, "a", 1)
			if err := s.Append(&Batch{Expected: GenesisHead(), Events: evs}); err != nil {
				t.Fatal(err)
			}
			stale, _ := sealed(t, GenesisHead(), 1, "x", 1)
			if err := s.Append(&Batch{Expected: GenesisHead(), Events: stale}); !errors.Is(err, ErrHeadMoved) || errors.Is(err, ErrCommitIO) {
				t.Fatalf("a stale batch: %v, want ErrHeadMoved and not ErrCommitIO", err)
			}
			disable, err := failpoint.Enable(point, "eio")
			if err != nil {
				t.Fatal(err)
			}
			next, head2 := sealed(t, head, 1, "a", 2)
			err = s.Append(&Batch{Expected: head, Events: next})
			disable()
			if !errors.Is(err, ErrCommitIO) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("the failed commit: %v, want ErrCommitIO wrapping EIO", err)
			}
			more, _ := sealed(t, head2, 1, "a", 3)
			for what, err := range map[string]error{
				"append":      s.Append(&Batch{Expected: head2, Events: more}),
				"retry":       s.Append(&Batch{Expected: head, Events: next}),
				"checkpoint":  s.PutCheckpoint(1, []byte("note")),
				"admin token": s.PutAdminToken("x", []byte{1}),
			} {
				if !errors.Is(err, ErrCommitIO) {
					t.Fatalf("%s after a failed commit: %v, want ErrCommitIO", what, err)
				}
			}
			s.Close()
			s2 := mustOpen(t, dir) // a fresh open reads what the file holds
			h, err := s2.Head()
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]uint64{failpoint.CommitWrite: 1, failpoint.CommitSync: 2}[point]; h.Seq != want {
				t.Fatalf("head after reopening: %d, want %d", h.Seq, want)
			}
			after, _ := sealed(t, h, 1, "b", 1)
			if err := s2.Append(&Batch{Expected: h, Events: after}); err != nil {
				t.Fatalf("append after reopening: %v", err)
			}
		})
	}
}
