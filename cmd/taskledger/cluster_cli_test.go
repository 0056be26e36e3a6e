package main

import (
	"fmt"
	"strings"
	"testing"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/ledger/ledgertest"
)

// natsURL starts an embedded JetStream server on a loopback random port
// (its store in a temporary directory) and returns its nats:// URL.
func natsURL(t *testing.T) string { return jstest.Server(t, false).ClientURL() }

func TestMigrateCopiesTheLedgerAndVerifyChecksTheStream(t *testing.T) {
	dir, _ := reviewLedger(t)
	url := natsURL(t)
	src := reviewCLI("verify", "--data", dir)
	if src.code != 0 {
		t.Fatalf("verify of the source: %d %s", src.code, src.stderr)
	}
	r := reviewCLI("migrate", "--data", dir, "--ledger", url)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "ok: migrated ") {
		t.Fatalf("migrate: %d %q %q", r.code, r.stdout, r.stderr)
	}
	v := reviewCLI("verify", "--ledger", url)
	if v.code != 0 || !strings.HasPrefix(v.stdout, "ok: ") {
		t.Fatalf("verify --ledger: %d %q %q", v.code, v.stdout, v.stderr)
	}
	// Same seqs, same hashes: the copy's head is the source's.
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	head, _ := store.Head()
	toks, _ := store.AdminTokens()
	store.Close()
	want := fmt.Sprintf("head seq %d, hash %x", head.Seq, head.Hash)
	if !strings.Contains(r.stdout, want) || !strings.Contains(v.stdout, want) {
		t.Fatalf("want %q in %q and %q", want, r.stdout, v.stdout)
	}
	l, err := jetstream.Open(jetstream.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	copied, _ := l.AdminTokens()
	if len(copied) != len(toks) || string(copied["initial"]) != string(toks["initial"]) {
		t.Fatalf("admin tokens: copied %d, source %d", len(copied), len(toks))
	}
	n := 0
	_ = l.SoftRecords("", func(string, []byte) error { n++; return nil })
	if n == 0 {
		t.Fatal("no soft record copied (the source has the device's presence)")
	}
	// export reads the stream as it reads the file: the same lines.
	fromFile, fromStream := reviewCLI("export", "--data", dir), reviewCLI("export", "--ledger", url)
	if fromFile.code != 0 || fromStream.code != 0 || fromFile.stdout != fromStream.stdout || strings.Count(fromStream.stdout, "\n") != int(head.Seq) {
		t.Fatalf("export: file %d (%d bytes), stream %d %q (%d bytes)", fromFile.code, len(fromFile.stdout), fromStream.code, fromStream.stderr, len(fromStream.stdout))
	}
	// A second migrate into the same stream is refused and changes nothing.
	again := reviewCLI("migrate", "--data", dir, "--ledger", url)
	if again.code != 1 || !strings.Contains(again.stderr, "not empty") {
		t.Fatalf("second migrate: %d %q", again.code, again.stderr)
	}
	if h, _ := l.Head(); h.Seq != head.Seq {
		t.Fatalf("the refused migrate moved the head to %d", h.Seq)
	}
}

func TestVerifyLedgerFailsOnATamperedEvent(t *testing.T) {
	url := natsURL(t)
	l, err := jetstream.Open(jetstream.Config{URL: url, Name: "BAD"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	evs, _ := ledgertest.Events(t, ledger.GenesisHead(), 1, map[string]uint64{})
	evs[0].Type = "edited.after.sealing" // the hash no longer matches the content
	if err := l.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs}); err != nil {
		t.Fatal(err)
	}
	r := reviewCLI("verify", "--ledger", url, "--nats-name", "BAD")
	if r.code != 1 || !strings.Contains(r.stderr, "verify FAILED") || !strings.Contains(r.stderr, "seq 1") {
		t.Fatalf("verify of a tampered stream: %d %q", r.code, r.stderr)
	}
}

func TestLedgerFlagsRefuseBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"verify", "--ledger", "http://127.0.0.1:4222"},
		{"export", "--ledger", "127.0.0.1:4222"},
		{"migrate", "--data", t.TempDir()},
		{"migrate", "--data", t.TempDir(), "--ledger", "nats://127.0.0.1:1", "extra"},
		{"status"},
		{"status", "--ledger", "http://127.0.0.1:4222"},
		{"status", "--ledger", "nats://127.0.0.1:4222", "extra"},
		{"history", "some-task", "--ledger", "127.0.0.1:4222"},
	} {
		if r := reviewCLI(args...); r.code != 2 {
			t.Errorf("%v: exit %d (%q), want 2", args, r.code, r.stderr)
		}
	}
	// No ledger in --data: nothing is copied.
	if r := reviewCLI("migrate", "--data", t.TempDir(), "--ledger", natsURL(t)); r.code != 1 || !strings.Contains(r.stderr, "no ledger") {
		t.Errorf("migrate of an empty directory: %d %q", r.code, r.stderr)
	}
	// A credentials file that does not exist.
	if r := reviewCLI("verify", "--ledger", natsURL(t), "--nats-creds", t.TempDir()+"/none.creds"); r.code != 1 {
		t.Errorf("verify with a missing credentials file: %d %q", r.code, r.stderr)
	}
	// No server at the address: a read-only command does not wait.
	for _, cmd := range []string{"verify", "status"} {
		if r := reviewCLI(cmd, "--ledger", "nats://127.0.0.1:1"); r.code != 1 {
			t.Errorf("%s with no server: %d %q", cmd, r.code, r.stderr)
		}
	}
	// Replicas out of bounds.
	if r := reviewCLI("verify", "--ledger", natsURL(t), "--nats-replicas", "6"); r.code != 1 || !strings.Contains(r.stderr, "--nats-replicas") {
		t.Errorf("verify --nats-replicas 6: %d %q", r.code, r.stderr)
	}
}
