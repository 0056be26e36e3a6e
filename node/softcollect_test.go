package node_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

// softCounts returns the soft idempotency records on disk (the soft
// bucket) and in the live projections.
func softCounts(t testing.TB, n *nodetest.Node) (disk, mem int) {
	t.Helper()
	err := n.Store.SoftRecords(projections.SoftIdemAtPrefix, func(string, []byte) error {
		disk++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Engine.Read(func(s *projections.State) { mem = s.Idem.SoftCount() })
	return disk, mem
}

func wantSoft(t testing.TB, n *nodetest.Node, want int) {
	t.Helper()
	if disk, mem := softCounts(t, n); disk != want || mem != want {
		t.Fatalf("soft idempotency records: %d on disk, %d in memory; want %d", disk, mem, want)
	}
}

func collect(t testing.TB, n *nodetest.Node) int {
	t.Helper()
	got, err := n.CollectSoft(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// poll has each device send its presence, then claim-next with a new key,
// rounds times; every answer must be 204.
func poll(t testing.TB, devices []*nodetest.Device, rounds int) {
	t.Helper()
	for range rounds {
		for _, d := range devices {
			nodetest.Must(t, d.Ready(), http.StatusOK)
			r, _ := d.Claim()
			nodetest.Must(t, r, http.StatusNoContent)
		}
	}
}

func softRetention(c *commands.Config) { c.IdempotencyRetention = time.Hour }

// Expired soft idempotency records ("no task" answers, quiet heartbeats)
// are deleted from the soft bucket and dropped from memory; the unexpired
// ones stay, also across restarts, and a replay of an unexpired one still
// answers what was recorded. The cleanup verifies the log.
func TestExpiredSoftRecordsAreDeleted(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(softRetention))
	devices := []*nodetest.Device{n.RegisterDevice(), n.RegisterDevice(), n.RegisterDevice()}
	worker := n.RegisterDevice()
	run := n.StartTask(t, worker, nil)
	nodetest.Must(t, run.Beat("working"), http.StatusOK) // a new step: an event, not soft
	for range 5 {
		nodetest.Must(t, run.Beat("working"), http.StatusOK) // quiet: soft
	}
	poll(t, devices, 10)
	wantSoft(t, n, 35)
	if got := collect(t, n); got != 0 {
		t.Fatalf("collected %d records inside retention", got)
	}
	wantSoft(t, n, 35)

	n.Advance(30 * time.Minute)
	key, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, devices[0].Ready(), http.StatusOK)
	nodetest.Must(t, devices[0].ClaimWith(key, tok), http.StatusNoContent)
	poll(t, devices, 3) // 10 records younger than the first 35
	wantSoft(t, n, 45)

	n.Advance(30 * time.Minute) // exactly the first ones' retention: expired
	if got := collect(t, n); got != 35 {
		t.Fatalf("collected %d records, want the 35 older than retention", got)
	}
	wantSoft(t, n, 10)
	r := devices[0].ClaimWith(key, tok)
	if r.Status != http.StatusNoContent || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("an unexpired 204 does not replay after a collection: %d %v", r.Status, r.Header)
	}

	n = n.Restart(nodetest.WithConfig(softRetention))
	wantSoft(t, n, 10)
	d0 := *devices[0]
	d0.N = n
	nodetest.Must(t, d0.Ready(), http.StatusOK)
	r = d0.ClaimWith(key, tok)
	if r.Status != http.StatusNoContent || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("an unexpired 204 does not replay after a restart: %d %v", r.Status, r.Header)
	}

	n.Advance(30 * time.Minute)
	if got := collect(t, n); got != 10 {
		t.Fatalf("collected %d records after the restart, want 10", got)
	}
	wantSoft(t, n, 0)
	n = n.Restart(nodetest.WithConfig(softRetention))
	wantSoft(t, n, 0)
}

// Records that expired while the server was down are deleted by the
// collection a restarted node runs at start.
func TestSoftRecordsExpiredAtStartAreDeleted(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(softRetention))
	poll(t, []*nodetest.Device{n.RegisterDevice(), n.RegisterDevice()}, 20)
	n.Advance(time.Hour)
	wantSoft(t, n, 40) // expired, not collected yet
	n = n.Restart(nodetest.WithConfig(softRetention))
	collect(t, n) // waits for the round the start began (one round at a time)
	wantSoft(t, n, 0)
}

// A fleet that only polls (claim-next answered 204) stays bounded: 10,000
// polls over 20 retention windows leave at most the records of the last
// window, on disk and in memory, and the ledger file stops growing once
// the first windows' pages are reused. (The polls go to the sequencer
// directly: the HTTP path of the same records is tested above.)
func TestPollOnlyFleetStaysBounded(t *testing.T) {
	const (
		windows = 20
		steps   = 10 // collections per retention window
		perStep = 50 // polls between collections
	)
	noSync := func(c *node.Config) { c.NoSync = true } // 10,000 fsyncs would only measure the disk
	n := nodetest.Start(t, nodetest.WithConfig(softRetention), noSync)
	var devices []*nodetest.Device
	for range 10 {
		devices = append(devices, n.RegisterDevice())
	}
	head := n.Head()
	var sizeAtSteady int64
	most := 0
	for w := range windows {
		for range steps {
			enginePoll(t, n, devices, perStep/len(devices))
			n.Advance(time.Hour / steps)
			collect(t, n)
			disk, mem := softCounts(t, n)
			if disk != mem {
				t.Fatalf("window %d: %d records on disk, %d in memory", w, disk, mem)
			}
			most = max(most, mem)
		}
		if w == 2 {
			sizeAtSteady = fileSize(t, n.Dir)
		}
	}
	if limit := steps * perStep; most > limit {
		t.Fatalf("up to %d soft records held; a window holds at most %d", most, limit)
	}
	// bbolt grows its file by doubling, and this ledger sits near a step
	// (256 KiB): one doubling over the run is page layout (it came in 1 of
	// 8 runs before the fingerprints of D325, 5 of 10 after); the records a
	// leak would keep (500 polls a window, ~300 bytes each) would be 2.5 MB
	// more over 17 windows, three doublings.
	if size := fileSize(t, n.Dir); size > 2*sizeAtSteady {
		t.Fatalf("ledger file grew from %d bytes after 3 windows to %d after %d", sizeAtSteady, size, windows)
	}
	if n.Head() != head {
		t.Fatalf("polling appended events: head %d → %d", head, n.Head())
	}
	t.Logf("%d polls: at most %d soft records held, ledger file %d bytes", windows*steps*perStep, most, fileSize(t, n.Dir))
}

// enginePoll is poll through the sequencer, the devices concurrently (so
// their commands share batches): presence, then claim-next with a new key
// and a new client-issued token, for each device, rounds times.
func enginePoll(t testing.TB, n *nodetest.Node, devices []*nodetest.Device, rounds int) {
	t.Helper()
	ctx := context.Background()
	checks := map[string]bool{"accessibility_connected": true, "target_app_installed": true}
	var wg sync.WaitGroup
	for _, d := range devices {
		wg.Go(func() {
			p := commands.Principal{DeviceID: d.ID, OwnerID: d.OwnerID}
			for range rounds {
				if _, err := n.Engine.Do(ctx, &commands.Presence{Device: p, Presence: projections.Presence{Checks: checks}}); err != nil {
					t.Error(err)
					return
				}
				key := nodetest.NewKey()
				fp := sha256.Sum256([]byte(key))
				res, err := n.Engine.Do(ctx, &commands.ClaimNext{Device: p, Key: key, Fingerprint: fp[:], SessionID: d.Session,
					TokenHash: commands.HashToken(nodetest.NewClaimToken())})
				if err != nil || res.Record == nil || res.Record.Outcome != projections.OutcomeNoTask {
					t.Errorf("claim-next: %+v, %v; want no task", res.Record, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func fileSize(t testing.TB, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, ledger.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
