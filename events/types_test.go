package events

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// TestAllEventTypesIsComplete parses events.go: every constant of type
// Type is listed exactly once in AllEventTypes, every value is distinct,
// and every type has a codec (a new event type cannot be half added).
func TestAllEventTypesIsComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{} // name → value
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Type" {
				continue
			}
			for i, n := range vs.Names {
				v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				declared[n.Name] = v
			}
		}
	}
	if len(declared) < 20 {
		t.Fatalf("found only %d event type constants in events.go", len(declared))
	}
	listed := map[Type]int{}
	for _, typ := range AllEventTypes() {
		listed[typ]++
	}
	values := map[string]string{}
	for name, v := range declared {
		if prev, dup := values[v]; dup {
			t.Errorf("%s and %s share the value %q", name, prev, v)
		}
		values[v] = name
		if listed[Type(v)] != 1 {
			t.Errorf("%s (%q) is listed %d times in AllEventTypes, want once", name, v, listed[Type(v)])
		}
		if _, ok := codecs[Type(v)]; !ok {
			t.Errorf("%s (%q) has no codec", name, v)
		}
	}
	if len(listed) != len(declared) {
		t.Errorf("AllEventTypes has %d types, events.go declares %d", len(listed), len(declared))
	}
}
