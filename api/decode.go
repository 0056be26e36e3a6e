package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"taskledger/wire"
	"time"
)

// errInvalid is a request that is not valid JSON of the expected shape; it
// answers 400 invalid_request with its message.
type errInvalid struct{ msg string }

func (e *errInvalid) Error() string { return e.msg }

func invalid(format string, args ...any) error { return &errInvalid{fmt.Sprintf(format, args...)} }

// requestJSON is the strict reader of request bodies (wire.Strict): a
// size limit bounds their depth, and lone surrogate escapes are refused.
var requestJSON = wire.Strict{RefuseLoneSurrogates: true}

// parseStrict parses a request body strictly (wire.Strict.ParseStrict);
// a refusal is 400 invalid_request with the reader's message.
func parseStrict(body []byte) (map[string]any, error) {
	m, err := requestJSON.ParseStrict(body)
	var se *wire.StrictError
	if errors.As(err, &se) {
		return nil, invalid("%s", se.Msg)
	}
	return m, err
}

// fields reads a parsed object field by field; every key must be read by
// name (exact case), and done() refuses the rest as unknown fields.
type fields struct {
	m    map[string]any
	seen []string // the names read (few: a list, not a map)
	arr  [16]string
	err  error
}

func newFields(m map[string]any) *fields {
	f := &fields{m: m}
	f.seen = f.arr[:0]
	return f
}

func (f *fields) fail(err error) {
	if f.err == nil && err != nil {
		f.err = err
	}
}

// get returns the raw value; present is false for an absent key.
func (f *fields) get(name string, required bool) (any, bool) {
	if !slices.Contains(f.seen, name) {
		f.seen = append(f.seen, name)
	}
	v, ok := f.m[name]
	if !ok && required {
		f.fail(invalid("missing field %q", name))
	}
	return v, ok
}

func (f *fields) str(name string, required bool) string {
	v, ok := f.get(name, required)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		f.fail(invalid("field %q must be a string", name))
	}
	return s
}

// optStr returns nil for an absent or null field.
func (f *fields) optStr(name string) *string {
	v, ok := f.get(name, false)
	if !ok || v == nil {
		return nil
	}
	s, isStr := v.(string)
	if !isStr {
		f.fail(invalid("field %q must be a string or null", name))
		return nil
	}
	return &s
}

func (f *fields) integer(name string, required bool, lo, hi int64) int64 {
	v, ok := f.get(name, required)
	if !ok {
		return 0
	}
	n, isNum := v.(json.Number)
	if !isNum {
		f.fail(invalid("field %q must be an integer", name))
		return 0
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || i < lo || i > hi {
		f.fail(invalid("field %q must be an integer from %d to %d", name, lo, hi))
		return 0
	}
	return i
}

func (f *fields) object(name string, required bool) map[string]any {
	v, ok := f.get(name, required)
	if !ok {
		return nil
	}
	o, isObj := v.(map[string]any)
	if !isObj {
		f.fail(invalid("field %q must be an object", name))
	}
	return o
}

func (f *fields) array(name string, required bool) ([]any, bool) {
	v, ok := f.get(name, required)
	if !ok {
		return nil, false
	}
	a, isArr := v.([]any)
	if !isArr {
		f.fail(invalid("field %q must be an array", name))
		return nil, false
	}
	return a, true
}

func (f *fields) uuid(name string, required bool) string {
	s := f.str(name, required)
	if f.err == nil && (required || s != "") && !isUUIDv4(s) {
		f.fail(invalid("field %q must be a canonical lowercase UUIDv4", name))
	}
	return s
}

// timeMs reads a required RFC 3339 UTC time with at most ms precision.
func (f *fields) timeMs(name string) int64 {
	s := f.str(name, true)
	if f.err != nil {
		return 0
	}
	t, err := parseTime(s)
	if err != nil {
		f.fail(invalid("field %q must be an RFC 3339 UTC time with at most millisecond precision", name))
	}
	return t
}

// optTimeMs reads an optional (absent or null) time.
func (f *fields) optTimeMs(name string) *int64 {
	s := f.optStr(name)
	if s == nil || f.err != nil {
		return nil
	}
	t, err := parseTime(*s)
	if err != nil {
		f.fail(invalid("field %q must be an RFC 3339 UTC time with at most millisecond precision", name))
		return nil
	}
	return &t
}

// checkBody checks a request body's values against the constraints of its
// wire type (wire.Check); a refusal is 400 invalid_request with the
// check's message. Only the fields set are checked: a handler fills the
// ones the reader has not checked already.
func checkBody(body any, names ...string) error {
	if err := wire.Check(body, names...); err != nil {
		return invalid("%s", err.Error())
	}
	return nil
}

// done reports the first error, or an unknown field.
func (f *fields) done() error {
	if f.err != nil {
		return f.err
	}
	for k := range f.m {
		if !slices.Contains(f.seen, k) {
			return invalid("unknown field %q", k)
		}
	}
	return nil
}

// rfc3339UTC is the time form the server reads: wire.TimePattern, the
// pattern every time of the OpenAPI document carries.
var rfc3339UTC = regexp.MustCompile(wire.TimePattern)

// parseTime parses an RFC 3339 UTC time with at most ms precision.
func parseTime(s string) (int64, error) {
	if !rfc3339UTC.MatchString(s) {
		return 0, errors.New("not an RFC 3339 UTC time")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, err
	}
	return t.UnixMilli(), nil
}

// formatTime writes ms as RFC 3339 UTC with exactly three fractional digits.
func formatTime(ms int64) string { return wire.FormatMillis(ms) }

// isUUIDv4 reports whether s is a canonical lowercase UUIDv4.
func isUUIDv4(s string) bool { return wire.IsUUID(s) }

// The names of presence checks, reason codes and the printable-ASCII
// fields are checked by wire.Check from the wire types' tags (checkBody).
