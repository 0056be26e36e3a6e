package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestAllStatesIsComplete parses wire.go: every State… constant is listed
// exactly once in AllStates and every value is distinct.
func TestAllStatesIsComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "wire.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if strings.HasPrefix(name.Name, "State") && i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
					v, _ := strconv.Unquote(lit.Value)
					declared[name.Name] = v
				}
			}
		}
		return true
	})
	if len(declared) != 7 {
		t.Fatalf("found %d State constants in wire.go, the state machine has 7", len(declared))
	}
	listed := map[string]int{}
	for _, s := range AllStates() {
		listed[string(s)]++
	}
	values := map[string]string{}
	for name, v := range declared {
		if prev, dup := values[v]; dup {
			t.Errorf("%s and %s share the value %q", name, prev, v)
		}
		values[v] = name
		if listed[v] != 1 {
			t.Errorf("%s (%q) is listed %d times in AllStates, want once", name, v, listed[v])
		}
	}
	if len(listed) != len(declared) {
		t.Errorf("AllStates has %d states, wire.go declares %d", len(listed), len(declared))
	}
}
