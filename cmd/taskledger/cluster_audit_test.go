package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"taskledger/audit/checkpoint"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/node/nodetest/proc"
)

// keyedDataDirs makes n data directories holding the same checkpoint key
// (written by `checkpoint-key create`, copied with mode 0600, as an
// operator gives it to every node) and returns them with its verifier.
func keyedDataDirs(t *testing.T, n int) ([]string, string) {
	t.Helper()
	dirs := []string{t.TempDir()}
	r := reviewCLI("checkpoint-key", "create", "--data", dirs[0])
	if r.code != 0 {
		t.Fatalf("checkpoint-key create: %d %s", r.code, r.stderr)
	}
	key, err := os.ReadFile(filepath.Join(dirs[0], checkpoint.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, checkpoint.KeyFile), key, 0o600); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	return dirs, strings.TrimSpace(r.stdout)
}

// latestCheckpoint waits until the node serves a checkpoint of at least
// min events and returns it with its size.
func latestCheckpoint(t *testing.T, n *clusterNode, min uint64) (string, uint64) {
	t.Helper()
	var note string
	var size uint64
	jstest.Eventually(t, 20*time.Second, fmt.Sprintf("a checkpoint of %d events or more", min), func() error {
		r, err := proc.NewClient().Do(n.url, "GET", "/api/v1/checkpoint", "", nil, nil)
		if err != nil || r.Status != http.StatusOK {
			return fmt.Errorf("%v %v", r, err)
		}
		lines := strings.Split(string(r.Body), "\n")
		if len(lines) < 3 {
			return fmt.Errorf("not a checkpoint: %q", r.Body)
		}
		if size, err = strconv.ParseUint(lines[1], 10, 64); err != nil || size < min {
			return fmt.Errorf("size %q", lines[1])
		}
		note = string(r.Body)
		return nil
	})
	return note, size
}

// fetchOK GETs path from the node and returns the body of its 200.
func fetchOK(t *testing.T, n *clusterNode, path, tok string) []byte {
	t.Helper()
	r, err := proc.NewClient().Do(n.url, "GET", path, tok, nil, nil)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("GET %s on %s: %v %v", path, n.url, r, err)
	}
	return r.Body
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClusterAuditAcrossAFailover: two `serve --ledger` processes given
// the same checkpoint key. The follower serves the sequencer's checkpoint
// and an audit bundle `audit-verify` accepts; after SIGTERM of the
// sequencer the follower sequences and signs, and the checkpoint signed
// before the failover verifies against one signed after it by a
// consistency proof from the new sequencer; a node started after the
// failover (a follower from its first event) serves a bundle of the new
// task that verifies too.
func TestClusterAuditAcrossAFailover(t *testing.T) {
	servers := jstest.Cluster(t)
	url := jstest.URLs(servers)
	bin := proc.Taskledger(t)
	dirs, verifier := keyedDataDirs(t, 3)
	a := startKeyedClusterNode(t, bin, url, dirs[0])
	a.waitReady(t, 30*time.Second)
	a.p.WaitLine(t, 0, "sequencing: this node holds the lease")
	tok := readToken(t, a)
	task1 := createTaskID(t, a)
	b := startKeyedClusterNode(t, bin, url, dirs[1])
	b.waitReady(t, 30*time.Second)
	b.p.WaitLine(t, 0, "following the sequencer")

	cp1, size1 := latestCheckpoint(t, b, 1)
	bundle := fetchOK(t, b, "/api/v1/admin/tasks/"+task1+"/audit-bundle", tok)
	if r := reviewCLI("audit-verify", writeFile(t, "b1.json", bundle), "--key", verifier); r.code != 0 {
		t.Fatalf("audit-verify of the follower's bundle: %d %s %s", r.code, r.stdout, r.stderr)
	}

	a.stop(t)
	b.p.WaitLine(t, 0, "sequencing: this node holds the lease")
	bt := &clusterNode{p: b.p, url: b.url, data: a.data} // the token file is a's
	task2 := createTaskID(t, bt)
	cp2, size2 := latestCheckpoint(t, b, size1+1)
	proof := fetchOK(t, b, fmt.Sprintf("/api/v1/admin/proofs/consistency?from=%d&to=%d", size1, size2), tok)
	r := reviewCLI("audit-verify", "--consistency", writeFile(t, "old.cp", []byte(cp1)), writeFile(t, "new.cp", []byte(cp2)),
		"--proof", writeFile(t, "proof.json", proof), "--key", verifier)
	if r.code != 0 {
		t.Fatalf("the checkpoint before the failover does not verify against the one after: %d %s %s", r.code, r.stdout, r.stderr)
	}

	c := startKeyedClusterNode(t, bin, url, dirs[2])
	c.waitReady(t, 30*time.Second)
	bundle = fetchOK(t, c, "/api/v1/admin/tasks/"+task2+"/audit-bundle", tok)
	if r := reviewCLI("audit-verify", writeFile(t, "b2.json", bundle), "--key", verifier); r.code != 0 {
		t.Fatalf("audit-verify of the new follower's bundle: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if got := fetchOK(t, c, fmt.Sprintf("/api/v1/admin/proofs/inclusion?seq=1&size=%d", size1), tok); !strings.Contains(string(got), `"checkpoint":"`) {
		t.Fatalf("inclusion proof on the new follower carries no checkpoint: %s", got)
	}
	if got := fetchOK(t, c, fmt.Sprintf("/api/v1/checkpoint?size=%d", size1), ""); string(got) != cp1 {
		t.Fatalf("the checkpoint of size %d changed across the failover:\n%s\nwas\n%s", size1, got, cp1)
	}
}

// TestClusterNodeWithoutKeyServesNoCheckpoint: a cluster node never
// creates a checkpoint key of its own (a key per node would sign
// checkpoints that do not verify against each other): without the key
// file its checkpoint route answers 404 and it says why.
func TestClusterNodeWithoutKeyServesNoCheckpoint(t *testing.T) {
	servers := jstest.Cluster(t)
	bin := proc.Taskledger(t)
	a := startClusterNode(t, bin, jstest.URLs(servers))
	a.waitReady(t, 30*time.Second)
	a.p.WaitLine(t, 0, "no checkpoint key in the data directory")
	r, err := proc.NewClient().Do(a.url, "GET", "/api/v1/checkpoint", "", nil, nil)
	if err != nil || r.Status != http.StatusNotFound {
		t.Fatalf("checkpoint without a key: %v %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(a.data, checkpoint.KeyFile)); !os.IsNotExist(err) {
		t.Fatalf("a cluster node created a checkpoint key: %v", err)
	}
}

// TestClusterNodeRefusesAKeyFileOthersCanRead: a cluster node given a
// checkpoint key readable by others refuses to start, naming the mode.
func TestClusterNodeRefusesAKeyFileOthersCanRead(t *testing.T) {
	servers := jstest.Cluster(t)
	dirs, _ := keyedDataDirs(t, 1)
	if err := os.Chmod(filepath.Join(dirs[0], checkpoint.KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startKeyedClusterNode(t, proc.Taskledger(t), jstest.URLs(servers), dirs[0])
	if code := a.p.Wait(t); code == 0 || !strings.Contains(a.p.Stderr(), "must be mode 0600") {
		t.Fatalf("exit %d, stderr:\n%s", code, a.p.Stderr())
	}
}

// startKeyedClusterNode is startClusterNode on a given data directory.
func startKeyedClusterNode(t *testing.T, bin, natsURL, dir string) *clusterNode {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", jstest.FreePorts(t, 1)[0])
	p := proc.Start(t, nil, bin, "serve", "--data", dir, "--listen", addr, "--ledger", natsURL,
		"--advertise", "http://"+addr, "--lease-ttl", "1s", "--device-rate", "0")
	t.Cleanup(func() {
		if !p.Exited() {
			p.Signal(syscall.SIGTERM)
			p.Wait(t)
		}
	})
	return &clusterNode{p: p, url: "http://" + addr, data: dir}
}
