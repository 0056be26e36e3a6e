package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"taskledger/audit/checkpoint"
	"taskledger/node/nodetest"
)

func writeBundle(t *testing.T, dir, task string) (string, []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bundle.json")
	if r := reviewCLI("audit-bundle", "--task", task, "--out", out, "--data", dir); r.code != 0 {
		t.Fatalf("audit-bundle: %d %s", r.code, r.stderr)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return out, raw
}

func TestAuditBundleOfAClaimedTaskVerifies(t *testing.T) {
	dir, task := reviewLedger(t)
	file, _ := writeBundle(t, dir, task)
	key := strings.TrimSpace(reviewCLI("checkpoint-key", "export", "--data", dir).stdout)
	r := reviewCLI("audit-verify", file, "--key", key)
	if r.code != 0 || !strings.Contains(r.stdout, "task.created") || !strings.Contains(r.stdout, "task.claimed") {
		t.Fatalf("audit-verify: %d %s %s", r.code, r.stdout, r.stderr)
	}
	other, _, _ := checkpoint.LoadOrCreateKey(t.TempDir())
	if r := reviewCLI("audit-verify", file, "--key", other.Verifier()); r.code != 1 {
		t.Fatalf("another key: %d %s", r.code, r.stdout)
	}
}

func TestAuditBundleOfACanceledTaskVerifies(t *testing.T) {
	n := nodetest.Start(t)
	id := n.CreateTask(nil)
	if r := n.Do("POST", "/api/v1/admin/tasks/"+id+"/cancel", n.AdminToken, map[string]any{"reason": "not needed"}, nil); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	n.Close()
	file, _ := writeBundle(t, n.Dir, id)
	if r := reviewCLI("audit-verify", file); r.code != 0 || !strings.Contains(r.stdout, "task.cancel") {
		t.Fatalf("audit-verify: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestEverySingleByteFlipOfABundleFails(t *testing.T) {
	dir, task := reviewLedger(t)
	_, raw := writeBundle(t, dir, task)
	key := strings.TrimSpace(reviewCLI("checkpoint-key", "export", "--data", dir).stdout)
	if _, _, err := verifyBundle(raw, key); err != nil {
		t.Fatalf("intact bundle: %v", err)
	}
	for i := range raw {
		bad := append([]byte(nil), raw...)
		bad[i] ^= 0x01
		if _, _, err := verifyBundle(bad, key); err == nil {
			t.Fatalf("byte %d flipped: the bundle still verified", i)
		}
	}
}

func TestAuditBundleRefusesBadUse(t *testing.T) {
	dir, _ := reviewLedger(t)
	if r := reviewCLI("audit-bundle", "--out", "x"); r.code != 2 {
		t.Fatalf("no --task: %d", r.code)
	}
	if r := reviewCLI("audit-bundle", "--task", "nope", "--out", filepath.Join(t.TempDir(), "b"), "--data", dir); r.code != 1 || !strings.Contains(r.stderr, "no task") {
		t.Fatalf("unknown task: %d %s", r.code, r.stderr)
	}
	if r := reviewCLI("audit-verify", filepath.Join(t.TempDir(), "missing")); r.code != 1 {
		t.Fatalf("missing file: %d", r.code)
	}
}

func TestAuditBundleOfASucceededTaskVerifies(t *testing.T) {
	n := nodetest.Start(t)
	run := n.StartTask(t, n.RegisterDevice(), map[string]any{"job": "audit"})
	id := run.TaskID
	nodetest.Must(t, run.Beat("typing"), 200)
	nodetest.Must(t, run.Complete(map[string]any{"ok": true}), 200)
	n.Close()
	file, _ := writeBundle(t, n.Dir, id)
	r := reviewCLI("audit-verify", file)
	if r.code != 0 || !strings.Contains(r.stdout, "5 events") || !strings.Contains(r.stdout, "task.completed") {
		t.Fatalf("audit-verify: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// A bundle of a failed, a recovered and a late-reported task verifies
// too: each history passes the task's own rules from the bundle alone.
func TestAuditBundlesOfFailedRecoveredAndLateTasksVerify(t *testing.T) {
	n := nodetest.Start(t)
	failed := n.StartTask(t, n.RegisterDevice(), map[string]any{"job": "fails"})
	nodetest.Must(t, failed.Act("fail", map[string]any{"expected_version": 3, "reason_code": "exit_7", "detail": "exited 7"}), 200)
	late := n.StartTask(t, n.RegisterDevice(), map[string]any{"job": "late"})
	recovered := n.StartTask(t, n.RegisterDevice(), map[string]any{"job": "lost"})
	n.Advance(2 * time.Minute) // both running leases end
	nodetest.Must(t, late.Complete(map[string]any{"late": true}), 409, "lease_expired")
	nodetest.Must(t, n.Do("POST", "/api/v1/admin/tasks/"+recovered.TaskID+"/recover", n.AdminToken,
		map[string]any{"decision": "requeue", "reason": "device lost", "expected_version": 3}, nil), 200)
	n.Close()
	for id, want := range map[string]string{failed.TaskID: "task.failed", late.TaskID: "task.late_report", recovered.TaskID: "task.recovered"} {
		file, _ := writeBundle(t, n.Dir, id)
		if r := reviewCLI("audit-verify", file); r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("audit-verify of %s: %d %s %s", want, r.code, r.stdout, r.stderr)
		}
	}
}

// audit-bundle --server reads the bundle from a running server and keeps
// it only once it verifies here; refusals name their reason and write
// nothing.
func TestAuditBundleFromARunningServer(t *testing.T) {
	n := nodetest.Start(t)
	id := n.CreateTask(map[string]any{"job": "remote"})
	nodetest.Must(t, n.Do("POST", "/api/v1/admin/tasks/"+id+"/cancel", n.AdminToken, map[string]any{"reason": "done"}, nil), 200)
	key := strings.TrimSpace(reviewCLI("checkpoint-key", "export", "--data", n.Dir).stdout)
	out := filepath.Join(t.TempDir(), "bundle.json")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(n.AdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := reviewCLI("audit-bundle", "--server", n.URL, "--token-file", tokenFile, "--task", id, "--out", out, "--key", key); r.code != 0 {
		t.Fatalf("audit-bundle --server: %d %s", r.code, r.stderr)
	}
	if r := reviewCLI("audit-verify", out, "--key", key); r.code != 0 || !strings.Contains(r.stdout, "task.canceled") {
		t.Fatalf("audit-verify of the served bundle: %d %s %s", r.code, r.stdout, r.stderr)
	}
	other, _, _ := checkpoint.LoadOrCreateKey(t.TempDir())
	bad := filepath.Join(t.TempDir(), "bad", "bundle.json")
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"no token", []string{"--task", id}, "", "admin token"},
		{"a refused token", []string{"--task", id}, "tladm_nope", "401"},
		{"an unknown task", []string{"--task", nodetest.NewKey()}, n.AdminToken, "task_not_found"},
		{"another key", []string{"--task", id, "--key", other.Verifier()}, n.AdminToken, "does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TASKLEDGER_TOKEN", tc.env)
			r := reviewCLI(append([]string{"audit-bundle", "--server", n.URL, "--out", bad}, tc.args...)...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("%d %q, want exit 1 naming %q", r.code, r.stderr, tc.want)
			}
			if _, err := os.Stat(bad); !os.IsNotExist(err) {
				t.Fatalf("a refused bundle was written")
			}
		})
	}
	if r := n.Do("GET", "/api/v1/admin/tasks/"+id+"/audit-bundle?x=1", n.AdminToken, nil, nil); r.Status != 400 {
		t.Fatalf("a query parameter: %d", r.Status)
	}
}
