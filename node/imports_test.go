package node_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the module root, one level up from node/.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s", root)
	}
	return root
}

// goFiles returns every non-test Go file of the module, relative to root.
func goFiles(t *testing.T, root string) []string {
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func allowed(rel string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(rel, p) {
			return true
		}
	}
	return false
}

// TestPackageBoundaries keeps each dependency inside the package that owns
// it (STYLE.md §1): bbolt in ledger/ and snapshots/ (plus the benchmark's
// raw baseline and the device client's local state), Echo in api/, NATS in
// ledger/jetstream/.
func TestPackageBoundaries(t *testing.T) {
	root := repoRoot(t)
	rules := map[string][]string{
		"go.etcd.io/bbolt":            {"ledger/", "snapshots/", "bench/", "client/"},
		"github.com/labstack/echo/v4": {"api/"},
		// internal/oapiclient: the client oapi-codegen generates from the
		// OpenAPI document, for its own lifecycle test only (D350).
		"net/http":                   {"api/", "bench/", "client/", "cmd/", "node/", "internal/oapiclient/"},
		"github.com/nats-io/nats.go": {"ledger/jetstream/"},
		// The embedded NATS server runs in tests only: jstest is the test
		// helper that starts it (imported by _test files and the test
		// helper node/nodetest/proc only, checked by
		// TestBinaryDoesNotLinkNATSServer).
		"github.com/nats-io/nats-server/v2": {"ledger/jetstream/jstest/"},
	}
	fset := token.NewFileSet()
	for _, rel := range goFiles(t, root) {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for dep, owners := range rules {
				if (path == dep || strings.HasPrefix(path, dep+"/")) && !allowed(rel, owners) {
					t.Errorf("%s imports %s; only %v may", rel, path, owners)
				}
			}
		}
	}
}

// TestLedgerImportsNothingAboveIt keeps the storage layer at the bottom of
// the house: nothing under ledger/ (the bbolt log, the JetStream backend,
// their test helpers) may reach events, projections or anything built on
// them, directly or transitively. The audit packages that used to sit
// under ledger/ and import events live in audit/.
func TestLedgerImportsNothingAboveIt(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-deps", "-test=false", "-f", "{{.ImportPath}}", "./ledger/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{"events", "projections", "commands", "snapshots", "api", "node", "audit", "backup", "client", "cmd"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == "taskledger/"+f || strings.HasPrefix(dep, "taskledger/"+f+"/") {
				t.Errorf("ledger/... depends on %s; the storage layer must not import what is built on it", dep)
			}
		}
	}
}

// TestDomainHasNoHTTP keeps HTTP above the domain: the transitive imports
// (go list -deps) of the packages that decide, fold, store and encode
// contain neither net/http nor Echo; api/ maps domain outcomes to HTTP.
func TestDomainHasNoHTTP(t *testing.T) {
	root := repoRoot(t)
	core := []string{"./projections", "./commands", "./ledger", "./snapshots", "./events"}
	if _, err := os.Stat(filepath.Join(root, "wire")); err == nil {
		core = append(core, "./wire")
	}
	cmd := exec.Command("go", append([]string{"list", "-deps"}, core...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net/http" || strings.HasPrefix(dep, "net/http/") || strings.HasPrefix(dep, "github.com/labstack/") {
			t.Errorf("a core package depends on %s", dep)
		}
	}
}

// TestNothingImportsCmd keeps cmd/ a leaf: the node is the library
// (node/), and no package outside cmd/ imports one under it.
func TestNothingImportsCmd(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasPrefix(rel, "cmd/") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(path, "taskledger/cmd/") {
				t.Errorf("%s imports %s; only cmd/ may", rel, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoWallClock keeps time.Now() out of decisions (STYLE.md §4): the
// clock is injected. Allowed: the clock itself, measurements marked with a
// `tl:wallclock` comment on the same line, the benchmark and the device
// client (which has its own clock and never decides server state).
func TestNoWallClock(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	for _, rel := range goFiles(t, root) {
		if allowed(rel, []string{"commands/clock.go", "commands/clock_system.go", "commands/elapsed_linux.go", "commands/elapsed_other.go", "bench/", "client/"}) {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		lines := strings.Split(string(src), "\n")
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Now" {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" {
				line := fset.Position(sel.Pos()).Line
				if !strings.Contains(lines[line-1], "tl:wallclock") {
					t.Errorf("%s:%d calls time.Now(); use the injected clock", rel, line)
				}
			}
			return true
		})
	}
}

// TestBinaryDoesNotLinkNATSServer keeps the embedded NATS server (and the
// jstest helper that starts it) out of the taskledger binary: the cluster
// node is a NATS client only.
func TestBinaryDoesNotLinkNATSServer(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-deps", "./cmd/taskledger")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages", len(deps))
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "github.com/nats-io/nats-server/") || dep == "taskledger/ledger/jetstream/jstest" {
			t.Errorf("the binary links %s", dep)
		}
	}
}

// TestWireImportsOnlyTheStandardLibrary keeps wire/ a leaf: the vocabulary
// of the HTTP API that api/, client/, bench/ and the tests share imports
// nothing of the server and nothing outside the standard library.
func TestWireImportsOnlyTheStandardLibrary(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./wire")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep != "taskledger/wire" {
			t.Errorf("wire/ depends on %s; it may import the standard library only", dep)
		}
	}
}
