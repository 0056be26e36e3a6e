package wire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Decode reads data into the wire type v (a pointer) as strictly as
// the other side wrote it: one strict JSON object (s.ParseStrict: UTF-8,
// no duplicate keys, nothing after it), no member v's type does not name,
// every member without omitempty present and, unless it is a pointer,
// not null; then encoding/json's types, then Check.
func (s Strict) Decode(data []byte, v any) error {
	m, err := s.ParseStrict(data)
	if err != nil {
		return err
	}
	typ := reflect.TypeOf(v)
	if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("wire: Decode into %s", typ)
	}
	if err := members("", m, typ.Elem()); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return &StrictError{Msg: err.Error()}
	}
	return Check(v)
}

// members checks the member names of the object m against the struct typ,
// and the objects nested in it against their types.
func members(path string, m map[string]any, typ reflect.Type) error {
	known := map[string]bool{}
	for i := 0; i < typ.NumField(); i++ {
		fl := typ.Field(i)
		name, opts, _ := strings.Cut(fl.Tag.Get("json"), ",")
		known[name] = true
		val, ok := m[name]
		ft := fl.Type
		switch {
		case !ok && !strings.Contains(opts, "omitempty"):
			return strictErr("member %s%s is missing", path, name)
		case ok && val == nil && ft.Kind() != reflect.Pointer:
			return strictErr("member %s%s is null", path, name)
		}
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch sub := val.(type) {
		case map[string]any:
			if ft.Kind() == reflect.Struct {
				if err := members(path+name+".", sub, ft); err != nil {
					return err
				}
			}
		case []any:
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				for i, e := range sub {
					if o, ok := e.(map[string]any); ok {
						if err := members(fmt.Sprintf("%s%s[%d].", path, name, i), o, ft.Elem()); err != nil {
							return err
						}
					}
				}
			}
		}
	}
	for k := range m {
		if !known[k] {
			return strictErr("unknown member %s%s", path, k)
		}
	}
	return nil
}
