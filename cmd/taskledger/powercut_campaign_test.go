//go:build linux

package main_test

// The power-cut campaign: the crash campaign's load on a server whose data
// directory is a file system that keeps only what was fsynced
// (internal/powercut). At each fault the server is SIGKILLed and the power
// cut: every file goes back to its content as of its last sync (a log
// page, the head record, a snapshot, a side file written but not synced
// loses those writes). Then verify must pass, every acknowledged command
// must be in the log, and the server must start on what is left.

import (
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"taskledger/internal/powercut"
)

var powerCuts = flag.Int("powercuts", 3, "power cuts of TestPowerCutCampaign")

func TestPowerCutCampaign(t *testing.T) {
	backing, mnt := t.TempDir(), t.TempDir()
	dir := filepath.Join(mnt, "data")
	var fs *powercut.FS
	mount := func(t *testing.T) {
		var err error
		if fs, err = powercut.Mount(backing, mnt); err != nil {
			t.Fatalf("mount (needs /dev/fuse and root): %v", err)
		}
	}
	mount(t)
	t.Cleanup(func() {
		if fs != nil {
			_, _, _ = fs.Cut(nil) // the servers are gone by now (their cleanups ran first)
		}
	})
	cuts, lostFiles, tornFiles, syncs := 0, 0, 0, 0
	seed := uint64(time.Now().UnixNano()) //tl:wallclock the tears' seed
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("tear seed %d", seed)
	runCampaign(t, *powerCuts, campaignFault{name: "power cuts", serve: dir, check: filepath.Join(backing, "data"),
		after: func(t *testing.T) {
			syncs += fs.Syncs()
			tokenFile := filepath.Join(backing, "data", "initial-admin-token")
			token, _ := os.ReadFile(tokenFile)
			lost, torn, err := fs.Cut(rng)
			fs = nil
			if err != nil {
				t.Fatal(err)
			}
			cuts++
			lostFiles += lost
			tornFiles += torn
			// The initial admin token is a secret the operator cannot get
			// back: a cut must leave it whole.
			if after, err := os.ReadFile(tokenFile); err != nil || string(after) != string(token) || len(token) == 0 {
				t.Fatalf("cut %d: initial-admin-token held %q before the cut and %q (%v) after", cuts, token, after, err)
			}
		},
		again: mount,
	})
	t.Logf("%d power cuts: %d files lost unsynced writes, %d of them torn; %d syncs seen", cuts, lostFiles, tornFiles, syncs)
	if lostFiles == 0 {
		t.Fatal("no cut lost a write: the cuts did not cut anything")
	}
}
