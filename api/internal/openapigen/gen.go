// Package openapigen derives the body schemas of api/openapi.json from the
// wire types: every property of a body, its type, nullability,
// required-ness, format, pattern, enum and bounds come from the type's
// json and wire tags (wire/constraint.go). The rest of the document
// (routes, operationIds, security, answers and their codes, roles,
// descriptions, examples) is kept as written: Generate rewrites the
// document in place, member order kept, and changes only what the types
// say. `go generate ./api/` runs it (api/openapi.go);
// TestOpenAPIDocumentIsGenerated fails when the committed document is
// stale.
package openapigen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"taskledger/wire"
)

// Body names one JSON body of the document and its wire type: "schema
// Name" (a component), "answer operationId status" or "request
// operationId".
type Body struct {
	Where string
	Type  any
}

// Bodies lists every JSON body of the document the wire types describe.
var Bodies = []Body{
	{"schema TaskDetail", wire.TaskDetail{}},
	{"schema LateReport", wire.LateReport{}},
	{"schema Evidence", wire.Evidence{}},
	{"schema Device", wire.Device{}},
	{"schema DeviceTaskAnswer", wire.DeviceTaskAnswer{}},
	{"schema ClaimAnswer", wire.ClaimAnswer{}},
	{"schema PresenceAnswer", wire.PresenceAnswer{}},
	{"schema AdminToken", wire.AdminToken{}},
	{"schema Event", wire.Event{}},
	{"schema Actor", wire.Actor{}},
	{"schema Error", wire.Error{}},
	{"schema Status", wire.Status{}},
	{"schema NotReady", wire.NotReady{}},
	{"answer listTasks 200", wire.TaskPage{}},
	{"answer listDevices 200", wire.DevicePage{}},
	{"answer getTaskEvents 200", wire.TaskEvents{}},
	{"answer listEvents 200", wire.EventPage{}},
	{"answer whoAmI 200", wire.WhoAmI{}},
	{"answer listAdminTokens 200", wire.AdminTokenList{}},
	{"answer advanceTestClock 200", wire.ServerTime{}},
	{"request reportPresence", wire.PresenceRequest{}},
	{"request claimNextTask", wire.ClaimRequest{}},
	{"request renewClaimLease", wire.RenewRequest{}},
	{"request releaseTask", wire.ClaimVersionRequest{}},
	{"request startTask", wire.ClaimVersionRequest{}},
	{"request heartbeatTask", wire.HeartbeatRequest{}},
	{"request awaitConfirmation", wire.AwaitConfirmationRequest{}},
	{"request resumeTask", wire.ExecutionRequest{}},
	{"request acknowledgeCancel", wire.ExecutionRequest{}},
	{"request completeTask", wire.CompleteRequest{}},
	{"request failTask", wire.FailRequest{}},
	{"request registerDevice", wire.RegisterDeviceRequest{}},
	{"request revokeDevice", wire.ReasonRequest{}},
	{"request revokeAuthorization", wire.ReasonRequest{}},
	{"request revokeAdminToken", wire.ReasonRequest{}},
	{"request createTask", wire.CreateTaskRequest{}},
	{"request amendTask", wire.AmendRequest{}},
	{"request authorizeTask", wire.AuthorizeRequest{}},
	{"request cancelTask", wire.CancelRequest{}},
	{"request recoverTask", wire.RecoverRequest{}},
	{"request advanceTestClock", wire.AdvanceClockRequest{}},
	{"request createAdminToken", wire.CreateAdminTokenRequest{}},
}

// timeDescription is every time property's description.
const timeDescription = "RFC 3339 UTC with at most millisecond precision (the server writes exactly three fractional digits and Z)"

// Generate returns doc with every body of Bodies derived from its type.
func Generate(doc []byte) ([]byte, error) {
	v, err := parse(doc)
	if err != nil {
		return nil, err
	}
	root, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("openapigen: the document is not an object")
	}
	g := &gen{schemas: root.obj("components").obj("schemas"), ops: map[string]*object{}}
	if g.schemas == nil {
		return nil, fmt.Errorf("openapigen: no components.schemas")
	}
	paths := root.obj("paths")
	for _, p := range paths.keys {
		item := paths.obj(p)
		for _, m := range item.keys {
			if op := item.obj(m); op != nil {
				if id, ok := op.get("operationId").(string); ok {
					g.ops[id] = op
				}
			}
		}
	}
	for _, b := range Bodies {
		f := strings.Fields(b.Where)
		var s *object
		name := ""
		switch f[0] {
		case "schema":
			name = f[1]
			if s = g.schemas.obj(name); s == nil {
				s = newObject()
				s.set("type", "object")
				g.schemas.set(name, s)
			}
		case "answer":
			s, name = dig(g.ops[f[1]], "responses", f[2], "content", "application/json", "schema"), camel(f[1])
		case "request":
			s, name = dig(g.ops[f[1]], "requestBody", "content", "application/json", "schema"), camel(f[1])+"Request"
		}
		if s == nil {
			return nil, fmt.Errorf("openapigen: %s: no such body in the document", b.Where)
		}
		if err := g.object(name, s, reflect.TypeOf(b.Type)); err != nil {
			return nil, fmt.Errorf("openapigen: %s: %w", b.Where, err)
		}
	}
	for name, values := range wire.Enums() {
		s := g.schemas.obj(name)
		if s == nil {
			s = newObject()
			s.set("type", "string")
			g.schemas.set(name, s)
		}
		g.enum(name, s, values, false)
	}
	var out bytes.Buffer
	write(&out, root, 0)
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func dig(o *object, path ...string) *object {
	for _, p := range path {
		if o == nil {
			return nil
		}
		o = o.obj(p)
	}
	return o
}

// camel writes a snake_case or camelCase name in CamelCase.
func camel(s string) string {
	var b strings.Builder
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == '_' || r == '-' || r == ' ' || r == '.' }) {
		b.WriteString(strings.ToUpper(w[:1]) + strings.ToLower(w[1:]))
		if w != strings.ToLower(w) && w != strings.ToUpper(w) { // camelCase: keep its humps
			b.Reset()
			b.WriteString(strings.ToUpper(s[:1]) + s[1:])
			return b.String()
		}
	}
	return b.String()
}

type gen struct {
	schemas *object
	ops     map[string]*object
}

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

// object derives an object schema from a struct type.
func (g *gen) object(name string, s *object, typ reflect.Type) error {
	props := s.obj("properties")
	if props == nil {
		props = newObject()
		s.set("properties", props)
	}
	var required []string
	fields := map[string]bool{}
	for i := 0; i < typ.NumField(); i++ {
		fl := typ.Field(i)
		pname, opts, _ := strings.Cut(fl.Tag.Get("json"), ",")
		omit := strings.Contains(opts, "omitempty")
		if !omit {
			required = append(required, pname)
		}
		fields[pname] = true
		con, err := wire.ParseConstraint(fl.Tag.Get("wire"))
		if err != nil {
			return err
		}
		p := props.obj(pname)
		if p == nil {
			p = newObject()
		}
		nullable := con.Null || (fl.Type.Kind() == reflect.Pointer && !omit)
		if err := g.value(name+camel(pname), p, fl.Type, con, nullable); err != nil {
			return fmt.Errorf("%s: %w", pname, err)
		}
		props.set(pname, p)
	}
	for _, k := range slices.Clone(props.keys) {
		if !fields[k] {
			props.del(k)
		}
	}
	// required: the order already written, then the new names.
	var req []any
	for _, r := range asStrings(s.get("required")) {
		if slices.Contains(required, r) && !slices.Contains(req, any(r)) {
			req = append(req, r)
		}
	}
	for _, r := range required {
		if !slices.Contains(req, any(r)) {
			req = append(req, r)
		}
	}
	if len(req) > 0 {
		s.set("required", req)
	} else {
		s.del("required")
	}
	s.set("additionalProperties", false)
	return nil
}

func asStrings(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// jsonType is the JSON type a Go type encodes as.
func jsonType(typ reflect.Type, con wire.Constraint) (string, error) {
	if typ == rawMessage || con.Object {
		return "object", nil
	}
	switch typ.Kind() {
	case reflect.String:
		return "string", nil
	case reflect.Bool:
		return "boolean", nil
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint32, reflect.Uint64:
		return "integer", nil
	case reflect.Slice:
		return "array", nil
	case reflect.Map, reflect.Struct:
		return "object", nil
	}
	return "", fmt.Errorf("no JSON type for %s", typ)
}

// managed are the keywords the types decide; any other member of a
// property (description, example, x-…) is kept.
var managed = []string{"type", "format", "pattern", "minLength", "maxLength", "minimum", "maximum", "enum",
	"x-enum-varnames", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "propertyNames",
	"additionalProperties", "items", "properties", "required", "$ref"}

// value derives one property's schema p from its field.
func (g *gen) value(name string, p *object, typ reflect.Type, con wire.Constraint, nullable bool) error {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	// A named enum, or a struct with a component of its name: a $ref.
	if _, isEnum := wire.Enums()[typ.Name()]; (isEnum || (typ.Kind() == reflect.Struct && g.schemas.has(typ.Name()))) && !nullable &&
		typ.PkgPath() != "" && con.Enum == nil {
		for _, k := range managed {
			p.del(k)
		}
		p.set("$ref", "#/components/schemas/"+typ.Name())
		return nil
	}
	p.del("$ref")
	t, err := jsonType(typ, con)
	if err != nil {
		return err
	}
	var keep []string
	if nullable {
		p.set("type", []any{t, "null"})
	} else {
		p.set("type", t)
	}
	keep = append(keep, "type")
	set := func(k string, v any) {
		p.set(k, v)
		keep = append(keep, k)
	}
	bound := func(k string, n int) {
		if n > 0 || (n == 0 && !strings.HasPrefix(k, "min")) {
			set(k, int64(n))
		}
	}
	pattern := con.Pattern
	if con.ASCII {
		pattern = "^[ -~]*$"
	}
	switch {
	case typ == rawMessage || con.Object:
		set("additionalProperties", true)
	case typ.Kind() == reflect.Struct:
		if err := g.object(name, p, typ); err != nil {
			return err
		}
		keep = append(keep, "properties", "required", "additionalProperties")
	case typ.Kind() == reflect.Map:
		et, err := jsonType(typ.Elem(), wire.Constraint{})
		if err != nil {
			return err
		}
		elem := newObject()
		elem.set("type", et)
		if k := typ.Elem().Kind(); k == reflect.Uint64 || k == reflect.Uint32 {
			elem.set("minimum", int64(0))
		}
		set("additionalProperties", elem)
		bound("minProperties", con.MinKeys)
		bound("maxProperties", con.MaxKeys)
		if pattern != "" {
			pn := newObject()
			pn.set("pattern", pattern)
			set("propertyNames", pn)
		}
	case typ.Kind() == reflect.Slice:
		bound("minItems", con.MinItems)
		bound("maxItems", con.MaxItems)
		if con.Unique {
			set("uniqueItems", true)
		}
		items := p.obj("items")
		if items == nil {
			items = newObject()
		}
		if err := g.value(name+"Item", items, typ.Elem(), wire.Constraint{Pattern: pattern, MinLen: -1, MaxLen: -1,
			MinItems: -1, MaxItems: -1, MinKeys: -1, MaxKeys: -1}, false); err != nil {
			return err
		}
		set("items", items)
	default:
		if con.UUID {
			set("format", "uuid")
		}
		if con.Time {
			set("format", "date-time")
			if !p.has("description") {
				p.set("description", timeDescription)
			}
		}
		if pattern != "" {
			set("pattern", pattern)
		}
		bound("minLength", con.MinLen)
		bound("maxLength", con.MaxLen)
		if con.Min != nil {
			set("minimum", *con.Min)
		}
		if con.Max != nil {
			set("maximum", *con.Max)
		}
		if slices.Equal(con.Enum, []string{"*"}) {
			keep = append(keep, "enum", "x-enum-varnames") // listed by api's error table
		} else if con.Enum != nil {
			g.enum(name, p, con.Enum, nullable)
			keep = append(keep, "enum", "x-enum-varnames")
		}
	}
	for _, k := range managed {
		if !slices.Contains(keep, k) {
			p.del(k)
		}
	}
	return nil
}

// enum sets p's enum to values (and null when nullable), naming each
// constant (x-enum-varnames) name+Value unless the list is unchanged.
func (g *gen) enum(name string, p *object, values []string, nullable bool) {
	var want []any
	for _, v := range values {
		want = append(want, v)
	}
	if nullable {
		want = append(want, nil)
	}
	if old, _ := p.get("enum").([]any); slices.Equal(old, want) && p.has("x-enum-varnames") {
		return
	}
	var names []any
	for _, v := range want {
		s, _ := v.(string)
		if v == nil {
			s = "null"
		}
		names = append(names, name+camel(s))
	}
	p.set("enum", want)
	p.set("x-enum-varnames", names)
}
