package events

import (
	"reflect"
	"strings"
	"sync"

	"taskledger/internal/msgpack/mpread"
)

// Event bodies of the current schema decode by hand (mpread) through a
// plan built once per body type from its msgpack tags, instead of the
// generic decoder's reflection per value: replay decodes a million. A
// plan covers strings, integers, booleans, nested structs and pointers to
// them, *int64, []string and map[string]bool, read as the generic decoder
// reads them; a body it cannot read (an unknown key, another type, a nil
// struct) goes to the generic decoder, so both decode every input alike
// (TestBodyFastMatchesGeneric, FuzzBodyFast).

type fieldDec func(r *bodyReader, v reflect.Value) bool

// bodyReader reads a body, sharing strings through strs when set.
type bodyReader struct {
	mpread.Reader
	strs *Strings
}

// str reads a string, shared through r.strs.
func (r *bodyReader) str() (string, bool) {
	if r.strs == nil {
		return r.Str()
	}
	b, ok := r.StrBytes()
	if !ok {
		return "", false
	}
	return r.strs.share(b), true
}

// Strings shares the short strings that the bodies of events read one
// after the other repeat — a task's id in each of its events, the device
// and execution ids of a run, the names of checks — instead of
// allocating each again (a replay decodes millions of bodies). It holds
// the last few strings read. One goroutine uses it; the zero value is
// ready.
type Strings struct {
	recent [8]string
	next   int
}

// shareMax is the longest string Strings shares: ids and hashes, not
// payloads or results.
const shareMax = 64

// share returns b as a string: one of the recent ones when equal.
func (c *Strings) share(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > shareMax {
		return string(b)
	}
	for _, s := range c.recent {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	c.add(s)
	return s
}

func (c *Strings) add(s string) {
	c.recent[c.next] = s
	c.next = (c.next + 1) % len(c.recent)
}

// Offer makes s, a string the caller already holds (an event's stream id
// or actor), one that bodies read next share, unless it is one already.
func (c *Strings) Offer(s string) {
	if s == "" || len(s) > shareMax {
		return
	}
	for _, r := range c.recent {
		if r == s {
			return
		}
	}
	c.add(s)
}

type structPlan struct {
	fields map[string]structField
	order  []structField // in declaration order, the order Marshal writes
}

type structField struct {
	name  string
	index int
	dec   fieldDec
}

var bodyPlans = sync.OnceValue(func() map[reflect.Type]*structPlan {
	plans := map[reflect.Type]*structPlan{}
	for _, c := range codecs {
		t := reflect.TypeOf(c.new()).Elem()
		if p := planStruct(t, 0); p != nil {
			plans[t] = p
		}
	}
	return plans
})

// decodeBodyFast decodes raw into v (a pointer to a body struct), sharing
// strings through strs (nil: none shared), and reports whether it could.
func decodeBodyFast(raw []byte, v any, strs *Strings) bool {
	rv := reflect.ValueOf(v).Elem()
	p := bodyPlans()[rv.Type()]
	if p == nil {
		return false
	}
	r := bodyReader{Reader: mpread.Reader{B: raw}, strs: strs}
	return p.decode(&r, rv)
}

func (p *structPlan) decode(r *bodyReader, v reflect.Value) bool {
	n, ok := r.MapLen()
	if !ok {
		return false
	}
	next := 0 // the field expected next: keys come in declaration order
	for range n {
		key, ok := r.Key()
		if !ok {
			return false
		}
		var f structField
		if next < len(p.order) && p.order[next].name == string(key) {
			f = p.order[next]
			next++
		} else if f, ok = p.fields[string(key)]; !ok {
			return false
		}
		if !f.dec(r, v.Field(f.index)) {
			return false
		}
	}
	return true
}

// planStruct returns the plan of a struct type, or nil when a field is
// of a kind the fast path does not read (or fields are embedded).
func planStruct(t reflect.Type, depth int) *structPlan {
	if t.Kind() != reflect.Struct || depth > 4 {
		return nil
	}
	p := &structPlan{fields: map[string]structField{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			return nil
		}
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		dec := planField(f.Type, depth)
		if dec == nil {
			return nil
		}
		p.fields[name] = structField{name: name, index: i, dec: dec}
		p.order = append(p.order, p.fields[name])
	}
	return p
}

func planField(t reflect.Type, depth int) fieldDec {
	switch t.Kind() {
	case reflect.String:
		return func(r *bodyReader, v reflect.Value) bool {
			s, ok := r.str()
			v.SetString(s)
			return ok
		}
	case reflect.Int, reflect.Int64:
		return func(r *bodyReader, v reflect.Value) bool {
			u, ok := r.Uint()
			v.SetInt(int64(u))
			return ok
		}
	case reflect.Uint64:
		return func(r *bodyReader, v reflect.Value) bool {
			u, ok := r.Uint()
			v.SetUint(u)
			return ok
		}
	case reflect.Bool:
		return func(r *bodyReader, v reflect.Value) bool {
			b, ok := r.Bool()
			v.SetBool(b)
			return ok
		}
	case reflect.Struct:
		p := planStruct(t, depth+1)
		if p == nil {
			return nil
		}
		return func(r *bodyReader, v reflect.Value) bool {
			return !r.PeekNil() && p.decode(r, v) // nil into a struct: generic decoder
		}
	case reflect.Pointer:
		elem := planField(t.Elem(), depth+1)
		if elem == nil || (t.Elem().Kind() != reflect.Struct && t.Elem().Kind() != reflect.Int64) {
			return nil
		}
		return func(r *bodyReader, v reflect.Value) bool {
			if r.Nil() {
				v.SetZero()
				return true
			}
			p := reflect.New(t.Elem())
			if !elem(r, p.Elem()) {
				return false
			}
			v.Set(p)
			return true
		}
	case reflect.Slice:
		return planStringSlice(t)
	case reflect.Map:
		return planBoolMap(t)
	}
	return nil
}

// planStringSlice decodes a slice of strings (nil: another element type).
func planStringSlice(t reflect.Type) fieldDec {
	if t.Elem().Kind() != reflect.String {
		return nil
	}
	return func(r *bodyReader, v reflect.Value) bool {
		n, ok := r.ArrayLen()
		if !ok || n < 0 {
			return ok // nil leaves the slice as it is
		}
		s := make([]string, 0, min(n, 1<<16))
		for range n {
			x, ok := r.str()
			if !ok {
				return false
			}
			s = append(s, x)
		}
		v.Set(reflect.ValueOf(s).Convert(t))
		return true
	}
}

// planBoolMap decodes a map of string to bool (nil: another map type).
func planBoolMap(t reflect.Type) fieldDec {
	if t.Key().Kind() != reflect.String || t.Elem().Kind() != reflect.Bool {
		return nil
	}
	return func(r *bodyReader, v reflect.Value) bool {
		if r.Nil() {
			v.SetZero()
			return true
		}
		n, ok := r.MapLen()
		if !ok {
			return false
		}
		m := reflect.MakeMapWithSize(t, min(n, 1<<16))
		for range n {
			k, ok := r.str()
			if !ok {
				return false
			}
			b, ok := r.Bool()
			if !ok {
				return false
			}
			m.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), reflect.ValueOf(b).Convert(t.Elem()))
		}
		v.Set(m)
		return true
	}
}
