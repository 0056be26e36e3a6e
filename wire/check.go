package wire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// CheckError is a value that breaks its field's constraint; Msg names the
// field as the body spells it.
type CheckError struct{ Field, Msg string }

func (e *CheckError) Error() string { return e.Msg }

// Check checks every field of the struct v (or *v) against its `wire`
// tag, in declaration order, and returns the first value that breaks it;
// with names, only the fields of those JSON names. Presence and JSON
// types are the decoder's business: Check sees values only (a nil
// pointer, or the zero value of an omitempty field — an absent member —
// is not checked).
func Check(v any, names ...string) error {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return fmt.Errorf("wire: Check of %s", rv.Type())
	}
	plan, err := planOf(rv.Type())
	if err != nil {
		return err
	}
	for _, f := range plan {
		if len(names) > 0 && !slices.Contains(names, f.name) {
			continue
		}
		fv := rv.Field(f.index)
		if f.omit && fv.IsZero() {
			continue
		}
		for fv.Kind() == reflect.Pointer && !fv.IsNil() {
			fv = fv.Elem()
		}
		switch {
		case fv.Kind() == reflect.Pointer:
		case fv.Kind() == reflect.Struct:
			if err := Check(fv.Interface()); err != nil {
				return err
			}
		case f.enum != nil && !slices.Contains(f.enum, fv.String()):
			return &CheckError{Field: f.name, Msg: fmt.Sprintf("field %q must be one of %s", f.name, strings.Join(f.enum, ", "))}
		case f.c != nil:
			if msg := f.c.check(fv); msg != "" {
				return &CheckError{Field: f.name, Msg: fmt.Sprintf("field %q must %s", f.name, msg)}
			}
		}
	}
	return nil
}

// fieldPlan is one field Check looks at: its index, JSON name and parsed
// tag (nil: no tag).
type fieldPlan struct {
	index int
	name  string
	omit  bool // omitempty: a zero value is an absent member
	c     *Constraint
	enum  []string // the values of a named enum type of this package (Enums)
}

var plans sync.Map // reflect.Type → []fieldPlan

func planOf(typ reflect.Type) ([]fieldPlan, error) {
	if p, ok := plans.Load(typ); ok {
		return p.([]fieldPlan), nil
	}
	var plan []fieldPlan
	for i := 0; i < typ.NumField(); i++ {
		fl := typ.Field(i)
		name, opts, _ := strings.Cut(fl.Tag.Get("json"), ",")
		f := fieldPlan{index: i, name: name, omit: strings.Contains(opts, "omitempty")}
		et := fl.Type
		for et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if et.Kind() == reflect.String && et.PkgPath() == typ.PkgPath() {
			f.enum = Enums()[et.Name()]
		}
		if tag := fl.Tag.Get("wire"); tag != "" {
			c, err := constraintOf(tag)
			if err != nil {
				return nil, err
			}
			f.c = c
		}
		plan = append(plan, f)
	}
	plans.Store(typ, plan)
	return plan, nil
}

var constraints sync.Map // tag → *Constraint

func constraintOf(tag string) (*Constraint, error) {
	if c, ok := constraints.Load(tag); ok {
		return c.(*Constraint), nil
	}
	c, err := ParseConstraint(tag)
	if err != nil {
		return nil, err
	}
	if c.Pattern != "" {
		c.re = newMatcher(c.Pattern)
	}
	constraints.Store(tag, &c)
	return &c, nil
}

// check returns what v must be, or "" when it keeps c.
func (c *Constraint) check(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return c.checkString(v.String())
	case reflect.Int, reflect.Int32, reflect.Int64:
		return c.checkInt(v.Int(), false)
	case reflect.Uint, reflect.Uint32, reflect.Uint64:
		if v.Uint() > 1<<63-1 {
			return c.checkInt(1<<63-1, false)
		}
		return c.checkInt(int64(v.Uint()), false)
	case reflect.Map:
		if (c.MinKeys >= 0 && v.Len() < c.MinKeys) || (c.MaxKeys >= 0 && v.Len() > c.MaxKeys) {
			return fmt.Sprintf("have %d to %d members", max(c.MinKeys, 0), c.MaxKeys)
		}
		if c.re != nil {
			for it := v.MapRange(); it.Next(); {
				if !c.re.MatchString(it.Key().String()) {
					return "have member names matching " + strings.Trim(c.Pattern, "^$")
				}
			}
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeOf(json.RawMessage(nil)) {
			if b := v.Bytes(); c.Object && (len(b) == 0 || b[0] != '{') {
				return "be a JSON object"
			}
			return ""
		}
		if (c.MinItems >= 0 && v.Len() < c.MinItems) || (c.MaxItems >= 0 && v.Len() > c.MaxItems) {
			return fmt.Sprintf("have %d to %d items", max(c.MinItems, 0), c.MaxItems)
		}
		seen := map[any]bool{}
		for i := 0; i < v.Len(); i++ {
			e := v.Index(i)
			if e.Kind() == reflect.String && c.re != nil && !c.re.MatchString(e.String()) {
				return "hold items matching " + strings.Trim(c.Pattern, "^$")
			}
			if c.Unique {
				if seen[e.Interface()] {
					return "hold distinct items"
				}
				seen[e.Interface()] = true
			}
		}
	}
	return ""
}

func (c *Constraint) checkString(s string) string {
	switch {
	case c.UUID:
		if !IsUUID(s) {
			return "be a canonical lowercase UUIDv4"
		}
		return ""
	case c.Time:
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil || !c.re.MatchString(s) {
			return "be an RFC 3339 UTC time with at most millisecond precision"
		}
		return ""
	}
	if c.ASCII {
		ok := (c.MinLen < 0 || len(s) >= c.MinLen) && (c.MaxLen < 0 || len(s) <= c.MaxLen)
		for i := 0; ok && i < len(s); i++ {
			ok = s[i] >= 0x20 && s[i] <= 0x7e
		}
		if !ok {
			return fmt.Sprintf("be %d to %d printable ASCII characters", max(c.MinLen, 0), c.MaxLen)
		}
	} else if (c.MinLen > 0 && len(s) < c.MinLen) || (c.MaxLen >= 0 && len(s) > c.MaxLen) {
		if c.MinLen > 0 {
			return fmt.Sprintf("be %d to %d bytes", c.MinLen, c.MaxLen)
		}
		return fmt.Sprintf("be at most %d bytes", c.MaxLen)
	}
	if c.re != nil && !c.re.MatchString(s) {
		return "match " + strings.Trim(c.Pattern, "^$")
	}
	if c.Enum != nil && c.Enum[0] != "*" {
		for _, e := range c.Enum {
			if s == e {
				return ""
			}
		}
		return "be one of " + strings.Join(c.Enum, ", ")
	}
	return ""
}

// matcher matches a pattern: a byte table for the patterns of one
// character class and a length range (`^[a-z0-9_]{1,32}$`, the most
// frequent, on every presence report), a regexp for the others.
type matcher struct {
	re       *regexp.Regexp
	class    [256]bool
	min, max int
}

var classPattern = regexp.MustCompile(`^\^\[([A-Za-z0-9_.\-]+)\]\{(\d+)(?:,(\d+))?\}\$$`)

func newMatcher(pattern string) *matcher {
	m := &matcher{}
	sub := classPattern.FindStringSubmatch(pattern)
	if sub == nil {
		m.re = regexp.MustCompile(pattern)
		return m
	}
	class := sub[1]
	for i := 0; i < len(class); i++ {
		if i+2 < len(class) && class[i+1] == '-' {
			for c := class[i]; c <= class[i+2]; c++ {
				m.class[c] = true
			}
			i += 2
			continue
		}
		m.class[class[i]] = true
	}
	fmt.Sscan(sub[2], &m.min)
	m.max = m.min
	if sub[3] != "" {
		fmt.Sscan(sub[3], &m.max)
	}
	return m
}

// MatchString reports whether s matches the pattern.
func (m *matcher) MatchString(s string) bool {
	if m.re != nil {
		return m.re.MatchString(s)
	}
	if len(s) < m.min || len(s) > m.max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !m.class[s[i]] {
			return false
		}
	}
	return true
}

func (c *Constraint) checkInt(n int64, _ bool) string {
	if (c.Min != nil && n < *c.Min) || (c.Max != nil && n > *c.Max) {
		switch {
		case c.Min != nil && c.Max != nil:
			return fmt.Sprintf("be an integer from %d to %d", *c.Min, *c.Max)
		case c.Min != nil:
			return fmt.Sprintf("be an integer of at least %d", *c.Min)
		}
		return fmt.Sprintf("be an integer of at most %d", *c.Max)
	}
	return ""
}
