package node_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// maxFuncLines bounds a function of the core packages, its signature and
// closing brace included.
const maxFuncLines = 80

// coreDirs are the core packages (and their sub-packages) the bound holds
// for.
var coreDirs = []string{"commands/", "projections/", "events/", "ledger/", "snapshots/", "wire/", "audit/", "internal/msgpack/"}

// longFuncExemptions are the functions allowed past the bound, each with
// why a split would hurt more than help.
var longFuncExemptions = map[string]string{
	// The snapshot codec mirrors the record format of content.go field by
	// field, in the order the decoder reads it back; split, the order that
	// must match is no longer readable in one place.
	"projections/content.go encodeTaskChunk": "format mirror",
	"projections/content.go decodeTaskChunk": "format mirror",
	"projections/contentidem.go encodeIdem":  "format mirror",
}

// TestNoLongFunctionInCorePackages keeps every function of the core
// packages (non-test files) within maxFuncLines lines.
func TestNoLongFunctionInCorePackages(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	seen, exempted := 0, map[string]bool{}
	for _, rel := range goFiles(t, root) {
		if !allowed(rel, coreDirs) {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, 0)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			seen++
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			key := rel + " " + fd.Name.Name
			if _, ok := longFuncExemptions[key]; ok {
				exempted[key] = true
				continue
			}
			if n > maxFuncLines {
				t.Errorf("%s is %d lines long, more than %d: split it into named helpers", key, n, maxFuncLines)
			}
		}
	}
	if seen < 200 {
		t.Fatalf("only %d functions found in the core packages", seen)
	}
	for key := range longFuncExemptions {
		if !exempted[key] {
			t.Errorf("exemption %q names no function: remove it", key)
		}
	}
}
