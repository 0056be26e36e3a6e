package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"taskledger/ledger/jetstream/jstest"
)

// TestReadmeQuickStart runs the README's quick start as it stands (bash -e,
// from the repository root), on a free loopback port given through the
// environment variables the block honours, and checks it ends with a
// SUCCEEDED task and its history.
func TestReadmeQuickStart(t *testing.T) {
	root, _ := filepath.Abs("../..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	a := strings.Index(s, "<!-- quickstart -->\n```sh\n")
	b := strings.Index(s, "```\n<!-- /quickstart -->")
	if a < 0 || b < a {
		t.Fatal("README.md has no quick start block")
	}
	script := s[a+len("<!-- quickstart -->\n```sh\n") : b]
	addr := fmt.Sprintf("127.0.0.1:%d", jstest.FreePorts(t, 1)[0])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = root
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKLEDGER_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "TASKLEDGER_LISTEN="+addr, "TASKLEDGER_SERVER=http://"+addr)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the quick start failed: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"SUCCEEDED", "task.created", "task.claimed", "task.started", "task.completed"} {
		if !strings.Contains(text, want) {
			t.Errorf("the quick start's output lacks %q:\n%s", want, text)
		}
	}
}
