package client

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"taskledger/wire"
	"time"
)

// maxJSONDepth bounds nesting in responses.
const maxJSONDepth = 64

// TimeLayout is the wire format of every time the server writes: RFC 3339,
// UTC, exactly three fractional digits, "Z".
const TimeLayout = wire.TimeLayout

var (
	uuidRE   = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	timeRE   = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$`)
	hex64RE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	b64u43RE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	codeRE   = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)
	intRE    = regexp.MustCompile(`^(0|[1-9][0-9]{0,17})$`)
)

// IsUUID reports whether s is a canonical lowercase UUIDv4.
func IsUUID(s string) bool { return wire.IsUUID(s) }

// IsClientClaimToken reports whether s has the form of a client-issued claim
// token (43 characters of unpadded base64url).
func IsClientClaimToken(s string) bool { return b64u43RE.MatchString(s) }

// IsServerClaimToken reports whether s has the form of a server-issued claim
// token (64 lowercase hex characters).
func IsServerClaimToken(s string) bool { return hex64RE.MatchString(s) }

// ParseTime parses a wire time (RFC 3339 UTC with exactly milliseconds).
func ParseTime(s string) (time.Time, error) {
	if !timeRE.MatchString(s) {
		return time.Time{}, fmt.Errorf("not an RFC 3339 UTC millisecond time")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("not an RFC 3339 time")
	}
	return t.UTC(), nil
}

// FormatTime writes t in the wire format.
func FormatTime(t time.Time) string { return t.UTC().Truncate(time.Millisecond).Format(TimeLayout) }

// answerJSON is the strict reader of the server's answers (wire.Strict),
// nesting bounded at maxJSONDepth.
var answerJSON = wire.Strict{MaxDepth: maxJSONDepth}

// checkJSON verifies that data is exactly one JSON object in valid UTF-8,
// with no duplicate keys (also keys equal up to case) at any depth.
func checkJSON(data []byte) error {
	_, err := answerJSON.ParseStrict(data)
	return err
}

// obj reads the members of one JSON object with strict per-field checks;
// the first problem is kept in err and done reports it, together with any
// member that no getter asked for (an unknown field).
type obj struct {
	path string
	m    map[string]json.RawMessage
	used map[string]bool
	err  error
}

// parseObj parses a body already checked by checkJSON.
func parseObj(data []byte) (*obj, error) {
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	return newObj("", data)
}

func newObj(path string, data []byte) (*obj, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%s: not a JSON object", orRoot(path))
	}
	return &obj{path: path, m: m, used: map[string]bool{}}, nil
}

func orRoot(p string) string {
	if p == "" {
		return "body"
	}
	return p
}

func (o *obj) fail(name, format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("field %s%s: %s", o.path, name, fmt.Sprintf(format, args...))
	}
}

// has reports whether the member is present (and marks it known).
func (o *obj) has(name string) bool {
	_, ok := o.m[name]
	if ok {
		o.used[name] = true
	}
	return ok
}

func (o *obj) raw(name string) json.RawMessage {
	v, ok := o.m[name]
	o.used[name] = true
	if !ok {
		o.fail(name, "missing")
		return nil
	}
	return v
}

func (o *obj) str(name string) string {
	v := o.raw(name)
	if v == nil {
		return ""
	}
	if len(v) == 0 || v[0] != '"' {
		o.fail(name, "not a string")
		return ""
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		o.fail(name, "not a string")
	}
	return s
}

func (o *obj) match(name string, re *regexp.Regexp, what string) string {
	s := o.str(name)
	if o.err == nil && !re.MatchString(s) {
		o.fail(name, "not %s", what)
	}
	return s
}

func (o *obj) uuid(name string) string { return o.match(name, uuidRE, "a canonical UUIDv4") }

func (o *obj) time(name string) time.Time {
	s := o.str(name)
	if o.err != nil {
		return time.Time{}
	}
	t, err := ParseTime(s)
	if err != nil {
		o.fail(name, "%v", err)
	}
	return t
}

// integer reads a JSON integer (no fraction, no exponent, no sign) >= min.
func (o *obj) integer(name string, min int64) int64 {
	v := o.raw(name)
	if v == nil {
		return 0
	}
	if !intRE.Match(v) {
		o.fail(name, "not a non-negative integer")
		return 0
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < min {
		o.fail(name, "integer out of range")
	}
	return n
}

func (o *obj) object(name string) *obj {
	v := o.raw(name)
	if v == nil {
		return &obj{m: map[string]json.RawMessage{}, used: map[string]bool{}}
	}
	if len(v) == 0 || v[0] != '{' {
		o.fail(name, "not an object")
		return &obj{m: map[string]json.RawMessage{}, used: map[string]bool{}}
	}
	sub, err := newObj(o.path+name+".", v)
	if err != nil {
		o.fail(name, "%v", err)
		return &obj{m: map[string]json.RawMessage{}, used: map[string]bool{}}
	}
	return sub
}

// done returns the first field problem, or an unknown field, or a problem
// of a sub-object.
func (o *obj) done(subs ...*obj) error {
	if o.err != nil {
		return o.err
	}
	for _, s := range subs {
		if err := s.done(); err != nil {
			return err
		}
	}
	for k := range o.m {
		if !o.used[k] {
			return fmt.Errorf("unknown field %s%s", o.path, k)
		}
	}
	return nil
}
