package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"taskledger/ledger"
	"taskledger/node"
	"taskledger/snapshots"
)

// A replay log is built with its snapshot, reused as kept, and refused
// when kept with another size; a snapshot this build does not load is
// replaced by one at the same seq that it does.
func TestReplayLogIsKeptAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	built, err := ReplayLogIn(dir, 500, 100, MixLifecycle)
	if err != nil {
		t.Fatal(err)
	}
	if built.Events < 500 || built.Events > 500+eventsPerTask || built.SnapSeq != built.Events-100 || built.SnapshotBytes == 0 {
		t.Fatalf("built %+v", built)
	}
	kept, err := ReplayLogIn(dir, 500, 100, MixLifecycle)
	if err != nil || *kept != *built {
		t.Fatalf("reused %+v, %v; want %+v", kept, err, built)
	}
	if _, err := ReplayLogIn(dir, 5000, 100, MixLifecycle); err == nil || !strings.Contains(err.Error(), "holds") {
		t.Fatalf("a kept log of another size: %v", err)
	}

	list, err := snapshots.List(snapshots.Dir(dir))
	if err != nil || len(list) != 1 {
		t.Fatalf("snapshots %v, %v", list, err)
	}
	if err := os.WriteFile(list[0].Path, []byte("an older build's snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := OpenReplayLog(dir)
	if err != nil || again.SnapSeq != built.SnapSeq {
		t.Fatalf("reopened %+v, %v", again, err)
	}
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if !loadable(list[0].Path, again.Cfg, store) {
		t.Fatal("the replaced snapshot does not load")
	}
	if _, err := node.Verify(store, again.Cfg, nil); err != nil {
		t.Fatal(err)
	}
}

func TestReplayLogRefusesWhatItCannotBuild(t *testing.T) {
	if _, err := BuildReplayLog(t.TempDir(), 100, 10, "mixed"); err == nil || !strings.Contains(err.Error(), "unknown log mix") {
		t.Fatalf("unknown mix: %v", err)
	}
	dir := t.TempDir()
	if _, err := BuildReplayLog(dir, 100, 10, MixTasks); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(snapshots.Dir(dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReplayLog(dir); err == nil || !strings.Contains(err.Error(), "no snapshot") {
		t.Fatalf("a kept log without its snapshot: %v", err)
	}
}
