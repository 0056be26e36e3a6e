package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"taskledger/api"
	"taskledger/audit/checkpoint"
	"taskledger/ledger"
	"taskledger/node/nodetest"
)

// grownLedger writes a ledger with a checkpoint after each of two rounds
// of commands and returns its directory and both checkpoints' files.
func grownLedger(t *testing.T) (dir, oldFile, newFile string) {
	n := nodetest.Start(t)
	n.CreateTask(nil)
	old, err := n.Transparency.Sign()
	if err != nil {
		t.Fatal(err)
	}
	n.CreateTask(nil)
	n.CreateTask(nil)
	cur, err := n.Transparency.Sign()
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	tmp := t.TempDir()
	oldFile, newFile = filepath.Join(tmp, "old.ckpt"), filepath.Join(tmp, "new.ckpt")
	if err := os.WriteFile(oldFile, old, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newFile, cur, 0o644); err != nil {
		t.Fatal(err)
	}
	return n.Dir, oldFile, newFile
}

func sizeOf(t *testing.T, file, key string) string {
	b, _ := os.ReadFile(file)
	cp, err := checkpoint.Open(b, key)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(cp.Size, 10)
}

func TestAuditVerifyConsistencyProvesTheLogOnlyGrew(t *testing.T) {
	dir, oldFile, newFile := grownLedger(t)
	k := reviewCLI("checkpoint-key", "export", "--data", dir)
	if k.code != 0 || strings.Contains(k.stdout, "PRIVATE") || !strings.Contains(k.stdout, "taskledger/") {
		t.Fatalf("export: %d %q %q", k.code, k.stdout, k.stderr)
	}
	key := strings.TrimSpace(k.stdout)
	from, to := sizeOf(t, oldFile, key), sizeOf(t, newFile, key)
	p := reviewCLI("audit-proof", "--consistency", "--from", from, "--to", to, "--data", dir)
	if p.code != 0 {
		t.Fatalf("audit-proof: %d %s", p.code, p.stderr)
	}
	proofFile := filepath.Join(t.TempDir(), "proof.json")
	if err := os.WriteFile(proofFile, []byte(p.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := reviewCLI("audit-verify", "--consistency", oldFile, newFile, "--proof", proofFile, "--key", key); r.code != 0 {
		t.Fatalf("audit-verify: %d %s", r.code, r.stderr)
	}
	// Swapped: the old checkpoint is not an extension of the new one.
	if r := reviewCLI("audit-verify", "--consistency", newFile, oldFile, "--proof", proofFile, "--key", key); r.code != 1 {
		t.Fatalf("swapped checkpoints passed: %d %s", r.code, r.stdout)
	}
	// Another key refuses both checkpoints.
	other, _, _ := checkpoint.LoadOrCreateKey(t.TempDir())
	if r := reviewCLI("audit-verify", "--consistency", oldFile, newFile, "--proof", proofFile, "--key", other.Verifier()); r.code != 1 || !strings.Contains(r.stderr, "not signed by the expected key") {
		t.Fatalf("another key: %d %s", r.code, r.stderr)
	}
	// A forked log: the new checkpoint's root is of another history.
	fork := filepath.Join(t.TempDir(), "fork.ckpt")
	store, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	signer, err := checkpoint.LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(newFile)
	cp, _ := checkpoint.Open(b, key)
	cp.Root[0] ^= 1
	forged, _ := signer.Sign(*cp)
	if err := os.WriteFile(fork, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	var pj api.ConsistencyProofJSON
	if err := json.Unmarshal([]byte(p.stdout), &pj); err != nil {
		t.Fatal(err)
	}
	pj.ToRoot, pj.ToCheckpoint = cp.Root, nil
	forkProof, _ := json.MarshalIndent(&pj, "", "  ")
	forkProofFile := filepath.Join(t.TempDir(), "fork-proof.json")
	if err := os.WriteFile(forkProofFile, append(forkProof, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := reviewCLI("audit-verify", "--consistency", oldFile, fork, "--proof", forkProofFile, "--key", key); r.code != 1 || !strings.Contains(r.stderr, "does not extend") {
		t.Fatalf("forked log passed: %d %s", r.code, r.stderr)
	}
	// Every flipped byte of the proof file fails.
	raw := []byte(p.stdout)
	for i := range raw {
		bad := append([]byte(nil), raw...)
		bad[i] ^= 0x01
		if err := os.WriteFile(proofFile, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := reviewCLI("audit-verify", "--consistency", oldFile, newFile, "--proof", proofFile, "--key", key); r.code == 0 {
			t.Fatalf("byte %d flipped: the proof still verified", i)
		}
	}
}

func TestAuditProofAndKeyExportRefuseBadUse(t *testing.T) {
	empty := t.TempDir()
	if r := reviewCLI("checkpoint-key", "export", "--data", empty); r.code != 1 || !strings.Contains(r.stderr, "no checkpoint key") {
		t.Fatalf("no key: %d %s", r.code, r.stderr)
	}
	if r := reviewCLI("checkpoint-key", "show"); r.code != 2 {
		t.Fatalf("unknown subcommand: %d", r.code)
	}
	if r := reviewCLI("audit-proof", "--from", "1", "--to", "2"); r.code != 2 {
		t.Fatalf("no --consistency: %d", r.code)
	}
	dir, _, _ := grownLedger(t)
	if r := reviewCLI("audit-proof", "--consistency", "--from", "2", "--to", "999", "--data", dir); r.code != 1 || !strings.Contains(r.stderr, "beyond") {
		t.Fatalf("size beyond the log: %d %s", r.code, r.stderr)
	}
	if r := reviewCLI("audit-verify", "--consistency", "a"); r.code != 2 {
		t.Fatalf("missing arguments: %d", r.code)
	}
}
