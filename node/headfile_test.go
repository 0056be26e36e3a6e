package node_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
)

func openAt(dir string) (*node.Node, error) {
	return node.Open(node.Config{DataDir: dir, Manual: true, Commands: commands.DefaultConfig(),
		SnapshotEvery: 100000, Logger: zerolog.Nop()})
}

func readHead(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, node.HeadFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A head record torn by a power cut (the new record's first k bytes over
// the old one's, cut short, or zeros) never refuses the intact log it
// sits beside: the node starts on every such record and holds every
// acknowledged event.
func TestTornHeadNeverRefusesAnIntactLog(t *testing.T) {
	n := nodetest.Start(t)
	n.CreateTask(nil)
	n.Close()
	older := readHead(t, n.Dir)
	n = nodetest.Start(t, nodetest.WithDir(n.Dir))
	for range 3 {
		n.CreateTask(nil)
	}
	head := n.Head()
	n.Close()
	newer := readHead(t, n.Dir)
	var torn [][]byte
	for k := 1; k < len(newer); k++ {
		mixed := append(append([]byte(nil), newer[:k]...), older[min(k, len(older)):]...)
		torn = append(torn, mixed, append([]byte(nil), newer[:k]...))
	}
	torn = append(torn, make([]byte, len(newer)), nil)
	refused := 0
	for _, rec := range torn {
		if err := os.WriteFile(filepath.Join(n.Dir, node.HeadFile), rec, 0o600); err != nil {
			t.Fatal(err)
		}
		nd, err := openAt(n.Dir)
		if err != nil {
			refused++
			if refused <= 3 {
				t.Errorf("torn head %q refused the intact log: %v", rec, err)
			}
			continue
		}
		got := nd.Loaded.State.Head.Seq
		nd.Close()
		if got != head {
			t.Fatalf("started at seq %d, want %d", got, head)
		}
	}
	if refused > 0 {
		t.Fatalf("%d of %d torn head records refused an intact log", refused, len(torn))
	}
	if got := readHead(t, n.Dir); string(got) != string(newer) {
		t.Fatalf("start did not rewrite the head record whole: %q, want %q", got, newer)
	}
}

// A whole (checksum-valid) head record that the log does not reach still
// refuses the start: it is evidence of loss, not a torn write.
func TestWholeHeadBeyondTheLogRefuses(t *testing.T) {
	n := nodetest.Start(t)
	n.CreateTask(nil)
	n.Close()
	older, err := os.ReadFile(filepath.Join(n.Dir, ledger.FileName))
	if err != nil {
		t.Fatal(err)
	}
	n = nodetest.Start(t, nodetest.WithDir(n.Dir))
	n.CreateTask(nil)
	n.Close()
	if err := os.WriteFile(filepath.Join(n.Dir, ledger.FileName), older, 0o600); err != nil {
		t.Fatal(err)
	}
	nd, err := openAt(n.Dir)
	if err == nil {
		nd.Close()
		t.Fatal("a log behind its whole head record was served")
	}
	if !errors.Is(err, node.ErrLogBehindHead) {
		t.Fatalf("refusal %v, want %v", err, node.ErrLogBehindHead)
	}
}

// A ledger whose first start was cut after the bbolt file was created and
// before the initial token's hash was committed gets its initial token at
// the next start: it is never left without a usable admin token.
func TestCutFirstStartStillGetsAnInitialToken(t *testing.T) {
	dir := t.TempDir()
	st, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	n := nodetest.Start(t, nodetest.WithDir(dir))
	if n.AdminToken == "" {
		t.Fatal("no initial admin token was written")
	}
	if r := n.Do("GET", "/api/v1/admin/tasks", n.AdminToken, nil, nil); r.Status != 200 {
		t.Fatalf("the initial token does not work: %d %s", r.Status, strings.TrimSpace(string(r.Body)))
	}
}
