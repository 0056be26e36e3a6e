package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"taskledger/api/internal/openapigen"
	"taskledger/wire"
)

// wireBodies maps every JSON body of the document to its wire type (the
// generator's table).
var wireBodies = openapigen.Bodies

// TestOpenAPIDocumentIsGenerated fails when api/openapi.json is not what
// `go generate ./api/` writes from the wire types.
func TestOpenAPIDocumentIsGenerated(t *testing.T) {
	out, err := openapigen.Generate(OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, OpenAPI) {
		t.Fatal("api/openapi.json is stale: run go generate ./api/ (then regenerate internal/oapiclient)")
	}
}

// TestOpenAPISchemasAreTheWireTypes holds the hand-kept document to the
// wire vocabulary, field by field and constraint by constraint: every
// property of a body is a field of its type (and the reverse), required
// exactly when the field has no omitempty, nullable exactly when the type
// says so, with the type's enum, pattern, format and bounds and no other.
// Every named enum of the document lists what wire.Enums lists.
func TestOpenAPISchemasAreTheWireTypes(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	ops := map[string]map[string]any{}
	for _, item := range doc["paths"].(map[string]any) {
		for _, op := range item.(map[string]any) {
			if o, ok := op.(map[string]any); ok && o["operationId"] != nil {
				ops[o["operationId"].(string)] = o
			}
		}
	}
	c := &schemaCheck{t: t, schemas: schemas}
	for _, b := range wireBodies {
		f := strings.Fields(b.Where)
		var s map[string]any
		switch f[0] {
		case "schema":
			s, _ = schemas[f[1]].(map[string]any)
		case "answer":
			s = dig(ops[f[1]], "responses", f[2], "content", "application/json", "schema")
		case "request":
			s = dig(ops[f[1]], "requestBody", "content", "application/json", "schema")
		}
		if s == nil {
			t.Errorf("%s: no such schema in the document", b.Where)
			continue
		}
		c.object(b.Where, s, reflect.TypeOf(b.Type))
	}
	for name, values := range wire.Enums() {
		s, _ := schemas[name].(map[string]any)
		if got := strList(s["enum"]); !slices.Equal(got, values) {
			t.Errorf("schema %s: enum %v, wire has %v", name, got, values)
		}
	}
}

func dig(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		if m == nil {
			return nil
		}
		m, _ = m[p].(map[string]any)
	}
	return m
}

func strList(v any) []string {
	var out []string
	for _, x := range asList(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func asList(v any) []any {
	switch x := v.(type) {
	case []any:
		return x
	case nil:
		return nil
	}
	return []any{v}
}

type schemaCheck struct {
	t       *testing.T
	schemas map[string]any
}

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

// resolve follows a $ref; name is the referenced schema's name.
func (c *schemaCheck) resolve(s map[string]any) (map[string]any, string) {
	ref, _ := s["$ref"].(string)
	if ref == "" {
		return s, ""
	}
	name := strings.TrimPrefix(ref, "#/components/schemas/")
	r, _ := c.schemas[name].(map[string]any)
	return r, name
}

// object checks a struct type against an object schema.
func (c *schemaCheck) object(where string, s map[string]any, typ reflect.Type) {
	s, _ = c.resolve(s)
	if s["additionalProperties"] != false {
		c.t.Errorf("%s: additionalProperties must be false", where)
	}
	props, _ := s["properties"].(map[string]any)
	var required []string
	seen := map[string]bool{}
	for i := 0; i < typ.NumField(); i++ {
		fl := typ.Field(i)
		name, opts, _ := strings.Cut(fl.Tag.Get("json"), ",")
		omit := strings.Contains(opts, "omitempty")
		if !omit {
			required = append(required, name)
		}
		seen[name] = true
		p, ok := props[name].(map[string]any)
		if !ok {
			c.t.Errorf("%s: field %s is not in the document", where, name)
			continue
		}
		con, err := wire.ParseConstraint(fl.Tag.Get("wire"))
		if err != nil {
			c.t.Fatalf("%s.%s: %v", where, name, err)
		}
		nullable := con.Null || (fl.Type.Kind() == reflect.Pointer && !omit)
		c.value(where+"."+name, p, fl.Type, con, nullable)
	}
	for name := range props {
		if !seen[name] {
			c.t.Errorf("%s: property %s is not a field of %s", where, name, typ)
		}
	}
	got := strList(s["required"])
	sort.Strings(got)
	sort.Strings(required)
	if !slices.Equal(got, required) {
		c.t.Errorf("%s: required %v, the type requires %v", where, got, required)
	}
}

// jsonType is the JSON type a Go type encodes as.
func jsonType(typ reflect.Type, con wire.Constraint) string {
	if typ == rawMessage || con.Object {
		return "object"
	}
	switch typ.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Uint32, reflect.Int32:
		return "integer"
	case reflect.Slice:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return "?" + typ.String()
}

// value checks one property against its field's type and constraint.
func (c *schemaCheck) value(where string, p map[string]any, typ reflect.Type, con wire.Constraint, nullable bool) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	// A named enum or object: a $ref (nullable: anyOf [$ref, null]).
	if alts, ok := p["anyOf"].([]any); ok && len(alts) == 2 && dig(alts[1].(map[string]any)) != nil && alts[1].(map[string]any)["type"] == "null" {
		if !nullable {
			c.t.Errorf("%s: the document allows null, the type does not", where)
		}
		p, nullable = alts[0].(map[string]any), false
	}
	if ref, _ := p["$ref"].(string); ref != "" {
		if nullable {
			c.t.Errorf("%s: the type allows null, the document's $ref does not", where)
		}
		r, name := c.resolve(p)
		if typ.Kind() == reflect.Struct {
			c.object(where, r, typ)
		} else if typ.Name() != name {
			c.t.Errorf("%s: $ref %s, the type is %s", where, name, typ)
		}
		return
	}
	want := []string{jsonType(typ, con)}
	if nullable {
		want = append(want, "null")
	}
	if got := strList(p["type"]); !slices.Equal(got, want) {
		c.t.Errorf("%s: type %v, the field is %v", where, got, want)
	}
	if typ.Kind() == reflect.Struct {
		c.object(where, p, typ)
		return
	}
	c.constraints(where, p, typ, con, nullable)
}

// constraints compares the constraint keywords of p with con.
func (c *schemaCheck) constraints(where string, p map[string]any, typ reflect.Type, con wire.Constraint, nullable bool) {
	want := map[string]any{}
	pattern := con.Pattern
	if con.ASCII {
		pattern = "^[ -~]*$"
	}
	bound := func(key string, v int) {
		if v > 0 || (v == 0 && !strings.HasPrefix(key, "min")) {
			want[key] = float64(v)
		}
	}
	switch {
	case typ.Kind() == reflect.Map:
		bound("minProperties", con.MinKeys)
		bound("maxProperties", con.MaxKeys)
		if pattern != "" {
			want["propertyNames"] = map[string]any{"pattern": pattern}
		}
		elem := map[string]any{"type": jsonType(typ.Elem(), wire.Constraint{})}
		if k := typ.Elem().Kind(); k == reflect.Uint64 || k == reflect.Uint32 {
			elem["minimum"] = float64(0)
		}
		want["additionalProperties"] = elem
	case typ.Kind() == reflect.Slice && typ != rawMessage:
		bound("minItems", con.MinItems)
		bound("maxItems", con.MaxItems)
		if con.Unique {
			want["uniqueItems"] = true
		}
		item := map[string]any{"type": jsonType(typ.Elem(), wire.Constraint{})}
		if pattern != "" {
			item["pattern"] = pattern
		}
		want["items"] = item
		if typ.Elem().Kind() == reflect.Struct {
			want["items"] = "$ref" // checked through the $ref
		}
	case jsonType(typ, con) == "object":
		want["additionalProperties"] = true
	default:
		if pattern != "" {
			want["pattern"] = pattern
		}
		bound("minLength", con.MinLen)
		bound("maxLength", con.MaxLen)
		if con.Min != nil {
			want["minimum"] = float64(*con.Min)
		}
		if con.Max != nil {
			want["maximum"] = float64(*con.Max)
		}
		if con.UUID {
			want["format"] = "uuid"
		}
		if con.Time {
			want["format"] = "date-time"
		}
		if slices.Equal(con.Enum, []string{"*"}) {
			codes, got := errorCodes(), strList(p["enum"])
			sort.Strings(got)
			if !slices.Equal(got, codes) {
				c.t.Errorf("%s: enum %v, api's error table has %v", where, got, codes)
			}
			delete(p, "enum")
		} else if con.Enum != nil {
			e := []any{}
			for _, v := range con.Enum {
				e = append(e, v)
			}
			if nullable {
				e = append(e, nil)
			}
			want["enum"] = e
		}
	}
	for _, k := range []string{"pattern", "minLength", "maxLength", "minimum", "maximum", "format", "enum",
		"minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "propertyNames", "additionalProperties", "items"} {
		got, ok := p[k]
		w, wok := want[k]
		if k == "items" && w == "$ref" {
			if items, _ := got.(map[string]any); items == nil {
				c.t.Errorf("%s: items missing", where)
			} else {
				c.value(where+"[]", items, typ.Elem(), wire.Constraint{MinLen: -1, MaxLen: -1, MinItems: -1, MaxItems: -1, MinKeys: -1, MaxKeys: -1}, false)
			}
			continue
		}
		if ok != wok || (ok && fmt.Sprint(got) != fmt.Sprint(w)) {
			c.t.Errorf("%s: %s is %v in the document, the wire type says %v", where, k, show(got, ok), show(w, wok))
		}
	}
}

func show(v any, ok bool) string {
	if !ok {
		return "(none)"
	}
	return fmt.Sprint(v)
}

// errorCodes lists every code api answers in an error body, sorted: the
// request-level errors and the error table.
func errorCodes() []string {
	out := []string{"invalid_request", "internal"}
	add := func(code string) {
		if !slices.Contains(out, code) {
			out = append(out, code)
		}
	}
	for _, e := range []*apiError{errUnsupportedMedia, errBodyTooLarge, errIdemKey, errClaimToken, errWrongKind,
		errDeviceMismatch, errInvalidTTL, errInvalidJPEG, errInvalidPNG, errNotFound, errMethod, errAmbiguous,
		errProofParam, errProofRange, errTreeSize, errCheckpointNone, errRateLimited, errInsufficientRole} {
		add(e.Code)
	}
	for _, e := range errorTable {
		add(e.code)
	}
	sort.Strings(out)
	return out
}

// TestWireFieldsAreInNameOrder: every body type declares its fields in the
// order of their JSON names, so encoding/json writes the keys sorted, as
// the hand writers and the earlier map answers do, and request bodies are
// deterministic bytes.
func TestWireFieldsAreInNameOrder(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(typ reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		prev := ""
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name < prev {
				t.Errorf("%s: field %s comes after %s", typ, name, prev)
			}
			prev = name
			walk(typ.Field(i).Type)
		}
	}
	for _, b := range wireBodies {
		walk(reflect.TypeOf(b.Type))
	}
}
