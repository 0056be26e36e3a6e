package node_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbiddenImports are capabilities neither the server nor the device
// client may use, with where an exception is allowed and why. Tokens,
// nonces and keys come only from crypto/rand, and no broken hash or cipher
// protects anything; nothing loads code or exposes a debug or RPC surface.
var forbiddenImports = map[string][]string{
	"math/rand": nil,
	// retry jitter only, never a secret; the power-cut test file system's
	// torn writes (a test harness, not linked into the binary).
	"math/rand/v2":   {"client/agent/run.go", "internal/powercut/"},
	"crypto/md5":     nil,
	"crypto/sha1":    nil,
	"crypto/des":     nil,
	"crypto/rc4":     nil,
	"plugin":         nil,
	"net/http/pprof": nil,
	"net/rpc":        nil,
	// Only the device agent runs a command (the work command); the server
	// never starts a process. The benchmark's cluster mode starts three
	// nats-server processes (bench --mode cluster), never on serve's path.
	"os/exec": {"client/agent/", "node/nodetest/proc/", "bench/natscluster.go", "cmd/taskledger/bench.go"},
	// unsafe: zero-copy strings of the snapshot decoder, the Windows call
	// boundaries (DPAPI; the agent's job object and suspended start), and
	// the 4 KiB alignment of the backup file's O_DIRECT buffer.
	"unsafe": {"projections/content.go", "client/secretstore/dpapi_windows.go", "client/agent/process_windows.go",
		"cmd/taskledger/directwrite_linux.go"},
}

// forbiddenText is source text no non-test file may hold.
var forbiddenText = []string{"InsecureSkipVerify"}

// TestNoForbiddenCapability parses every non-test Go file of the module
// (server and client, every build tag) and fails on a forbidden import
// outside its allowed files.
func TestNoForbiddenCapability(t *testing.T) {
	root := repoRoot(t)
	files := goFiles(t, root)
	if len(files) < 50 {
		t.Fatalf("only %d Go files found under %s", len(files), root)
	}
	fset := token.NewFileSet()
	for _, rel := range files {
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, rel, src, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			allow, forbidden := forbiddenImports[path]
			if forbidden && !allowed(rel, allow) {
				t.Errorf("%s imports %s, which the server and the client must not use", rel, path)
			}
		}
		for _, s := range forbiddenText {
			if strings.Contains(string(src), s) {
				t.Errorf("%s contains %s", rel, s)
			}
		}
	}
}

// TestForbiddenCapabilityCheckFires: the check above sees an import it
// forbids (so it cannot pass by parsing nothing).
func TestForbiddenCapabilityCheckFires(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package x\nimport _ \"math/rand\"\n", parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	path, _ := strconv.Unquote(f.Imports[0].Path.Value)
	if allow, forbidden := forbiddenImports[path]; !forbidden || allowed("commands/x.go", allow) {
		t.Fatalf("math/rand in commands/ is not caught")
	}
	if allow := forbiddenImports["os/exec"]; allowed("api/server.go", allow) || !allowed("client/agent/process.go", allow) {
		t.Fatalf("os/exec exceptions are wrong")
	}
}
