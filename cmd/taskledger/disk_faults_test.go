package main_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"taskledger/node"
	"taskledger/node/nodetest/proc"
)

// copyDir copies a stopped server's data directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// storedEvent returns the stored bytes of the event at seq.
func storedEvent(t *testing.T, dir string, seq uint64) []byte {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "taskledger.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v []byte
	_ = db.View(func(tx *bolt.Tx) error {
		v = append([]byte(nil), tx.Bucket([]byte("events")).Get(seqKey(seq))...)
		return nil
	})
	if len(v) == 0 {
		t.Fatalf("no event at seq %d", seq)
	}
	return v
}

func snapshotSeq(t *testing.T, dir string) uint64 {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "snapshots", "snapshot-*.tlsnap"))
	var newest uint64
	for _, n := range names {
		var s uint64
		if _, err := fmt.Sscanf(filepath.Base(n), "snapshot-%d.tlsnap", &s); err == nil && s > newest {
			newest = s
		}
	}
	if newest < 3 {
		t.Fatalf("no snapshot beyond seq 2 in %s", dir)
	}
	return newest
}

// A byte flipped (from outside, in the file) at a random position of an
// event older than the newest snapshot refuses the start naming its seq,
// as damage in the tail does; verify names it too.
func TestStartRefusesOldDamageNamingItsSeq(t *testing.T) {
	src := damagedDir(t)
	snap := snapshotSeq(t, src)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for range 3 {
		dir := copyDir(t, src)
		seq := 1 + rng.Uint64N(snap-1)
		raw := storedEvent(t, dir, seq)
		path := filepath.Join(dir, "taskledger.db")
		file, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// bbolt's freed pages may hold older copies of the event's page: the
		// byte is flipped in every copy, the live one among them.
		pos, flip := rng.IntN(len(raw)), byte(1+rng.IntN(255))
		copies := 0
		for at := 0; ; copies++ {
			i := bytes.Index(file[at:], raw)
			if i < 0 {
				break
			}
			file[at+i+pos] ^= flip
			at += i + len(raw)
		}
		if copies == 0 {
			t.Fatalf("the event at seq %d is not stored contiguously", seq)
		}
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("a byte flipped at %d of %d in seq %d (snapshot at %d)", pos, len(raw), seq, snap)
		r := proc.CLI(t, "serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual")
		refusedClearly(t, "serve on "+what, r, fmt.Sprintf("seq %d", seq))
		refusedClearly(t, "verify on "+what, proc.CLI(t, "verify", "--data", dir), fmt.Sprintf("seq %d", seq))
	}
}

// rolledBack returns a data directory whose log is an older copy, beside
// the head record, snapshot and checkpoints of the newer one.
func rolledBack(t *testing.T) (dir string, newer uint64) {
	t.Helper()
	dir = damagedDir(t)
	older, err := os.ReadFile(filepath.Join(dir, "taskledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, dir)
	c := proc.NewClient()
	for i := range 5 {
		a, err := c.Do(s.URL, "POST", "/api/v1/admin/tasks", s.Admin, map[string]any{"payload": map[string]any{"m": i}}, nil)
		if err != nil || a.Status != 201 {
			t.Fatalf("create task: %v %v", a, err)
		}
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	if r := proc.CLI(t, "snapshot", "create", "--data", dir); r.Code != 0 {
		t.Fatalf("snapshot create: %d %s", r.Code, r.Stderr)
	}
	newer = snapshotSeq(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "taskledger.db"), older, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, newer
}

// A rolled-back log (an older copy of taskledger.db put back beside the
// newer head record and snapshots) is refused; with DATA/head removed too,
// the newer snapshot still proves the loss and the start is refused.
func TestStartRefusesARolledBackLog(t *testing.T) {
	dir, newer := rolledBack(t)
	serve := func() proc.Result {
		return proc.CLI(t, "serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual")
	}
	refusedClearly(t, "serve on a rolled-back log", serve(), "ends before the last acknowledged commit")
	if err := os.Remove(filepath.Join(dir, node.HeadFile)); err != nil {
		t.Fatal(err)
	}
	refusedClearly(t, "serve on a rolled-back log without head", serve(),
		"ends before the last acknowledged commit", fmt.Sprintf("snapshot-%d", newer), fmt.Sprintf("seq %d", newer))
	if _, err := os.Stat(filepath.Join(dir, node.HeadFile)); err == nil {
		t.Fatal("the refusal wrote a head record")
	}
	refusedClearly(t, "verify on a rolled-back log", proc.CLI(t, "verify", "--data", dir), fmt.Sprintf("snapshot-%d", newer))
}

// A torn head record (a power cut in the middle of its in-place rewrite)
// does not refuse the intact log: serve starts, verify passes.
func TestTornHeadStartsAndVerifies(t *testing.T) {
	dir := damagedDir(t)
	rec, err := os.ReadFile(filepath.Join(dir, node.HeadFile))
	if err != nil {
		t.Fatal(err)
	}
	torn := append([]byte(nil), rec...)
	for i := len(torn) / 2; i < len(torn); i++ {
		torn[i] = 0 // the second half never reached the disk
	}
	copy(torn, "00000000000000000009") // the first half of a newer record
	if err := os.WriteFile(filepath.Join(dir, node.HeadFile), torn, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := proc.CLI(t, "verify", "--data", dir); r.Code != 0 {
		t.Fatalf("verify with a torn head: %d %s", r.Code, r.Stderr)
	}
	s := startServer(t, dir)
	if code := s.Stop(t); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	if r := proc.CLI(t, "verify", "--data", dir); r.Code != 0 {
		t.Fatalf("verify after the start: %d %s", r.Code, r.Stderr)
	}
}

// verify on a file whose first meta page is zeroed names the page instead
// of reporting bbolt's assertion.
func TestVerifyNamesAZeroedMetaPage(t *testing.T) {
	dir := damagedDir(t)
	path := filepath.Join(dir, "taskledger.db")
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(make([]byte, 4096), 0)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := proc.CLI(t, "verify", "--data", dir)
	refusedClearly(t, "verify", r, "meta page 0")
	if strings.Contains(r.Stderr, "assertion") {
		t.Fatalf("verify still reports the assertion: %s", r.Stderr)
	}
}

// cutServe starts serve on dir with the failpoint point set to kill (a
// power cut at that step of its first side-file write), waits for the
// kill, and tears the .tmp file's unsynced content when the cut came
// before its fsync.
func cutServe(t *testing.T, dir, point string) {
	t.Helper()
	p := proc.Start(t, []string{"TASKLEDGER_FAILPOINTS=" + point}, proc.Taskledger(t),
		"serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual", "--device-rate", "0")
	p.Wait(t)
	if !p.Killed() {
		t.Fatalf("serve was not killed at %s:\n%s", point, p.Stderr())
	}
	if point != "side-file-written" {
		return
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	for _, tmp := range tmps {
		if fi, err := os.Stat(tmp); err == nil {
			_ = os.Truncate(tmp, fi.Size()/2)
		}
	}
}

var sideFileSteps = []string{"side-file-written", "side-file-synced", "side-file-renamed"}

// A real process killed at each step of its first start's initial token
// write starts again with a working initial admin token.
func TestFirstStartCutAtEachSideFileStepLeavesAWorkingToken(t *testing.T) {
	for _, point := range sideFileSteps {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			cutServe(t, dir, point)
			s := startServer(t, dir)
			if s.Admin == "" {
				t.Fatal("initial-admin-token is empty")
			}
			a, err := proc.NewClient().Do(s.URL, "GET", "/api/v1/admin/tasks", s.Admin, nil, nil)
			if err != nil || a.Status != 200 {
				t.Fatalf("the initial token does not work: %v %v", a, err)
			}
		})
	}
}

// A real process killed at each step of its start's head record write
// (the checkpoint key and token already there) loses nothing: the next
// start serves every acknowledged task and verify passes.
func TestRestartCutAtEachSideFileStepLosesNothing(t *testing.T) {
	for _, point := range sideFileSteps {
		t.Run(point, func(t *testing.T) {
			dir := damagedDir(t)
			cutServe(t, dir, point)
			s := startServer(t, dir)
			a, err := proc.NewClient().Do(s.URL, "GET", "/api/v1/admin/tasks?limit=100", s.Admin, nil, nil)
			if err != nil || a.Status != 200 || strings.Count(string(a.Body), `"payload"`) != 20 {
				t.Fatalf("after the cut: %v %v, want the 20 acknowledged tasks", a, err)
			}
			if code := s.Stop(t); code != 0 {
				t.Fatalf("stop: %d", code)
			}
			if r := proc.CLI(t, "verify", "--data", dir); r.Code != 0 {
				t.Fatalf("verify after the cut: %d %s", r.Code, r.Stderr)
			}
		})
	}
}
