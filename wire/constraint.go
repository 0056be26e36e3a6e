package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// Every body of the HTTP API is a Go type in this package (task.go,
// device.go, admin.go, history.go), and each field states, beside its
// json tag, the constraints the server enforces on it in a `wire` tag:
// items separated by ";", each one of
//
//	uuid            a canonical lowercase UUIDv4 (IsUUID)
//	time            an RFC 3339 UTC time, at most millisecond precision (TimePattern)
//	ascii           printable ASCII only (0x20 to 0x7e)
//	len=A..B        A to B characters (bytes: the values are ASCII or bounded in bytes)
//	range=A..B      an integer from A to B
//	min=A           an integer of at least A
//	items=A..B      an array of A to B items
//	keys=A..B       an object of A to B members
//	pattern=RE      a string matching RE (anchored); on a map, its keys
//	enum=a|b|c      one of the listed strings
//	unique          an array of distinct items
//	null            (on an optional pointer field) may also be null
//	object          (on json.RawMessage) any JSON object
//
// A pointer field without omitempty is always written and may be null; a
// field with omitempty is optional. Check (check.go) enforces the tags on
// a value; the OpenAPI document's body schemas are generated from them
// (api/internal/openapigen).

// UUIDPattern is what IsUUID accepts.
const UUIDPattern = `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`

// TimePattern is what the server accepts as a time: RFC 3339 UTC with at
// most millisecond precision (it writes TimeLayout).
const TimePattern = `^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?(Z|\+00:00|-00:00)$`

// Constraint is one field's parsed `wire` tag.
type Constraint struct {
	UUID, Time, ASCII, Null, Object, Unique bool
	// MinLen and MaxLen bound a string (-1: no bound); MinItems and
	// MaxItems an array; MinKeys and MaxKeys an object.
	MinLen, MaxLen, MinItems, MaxItems, MinKeys, MaxKeys int
	// Min and Max bound an integer (nil: no bound).
	Min, Max *int64
	// Pattern is the string's (or the map keys') pattern.
	Pattern string
	// Enum lists the allowed strings.
	Enum []string

	re *matcher // Pattern compiled (Check)
}

// ParseConstraint parses a `wire` tag.
func ParseConstraint(tag string) (Constraint, error) {
	c := Constraint{MinLen: -1, MaxLen: -1, MinItems: -1, MaxItems: -1, MinKeys: -1, MaxKeys: -1}
	if tag == "" {
		return c, nil
	}
	for _, item := range strings.Split(tag, ";") {
		name, val, _ := strings.Cut(item, "=")
		var err error
		switch name {
		case "uuid":
			c.UUID, c.Pattern = true, UUIDPattern
		case "time":
			c.Time, c.Pattern = true, TimePattern
		case "ascii":
			c.ASCII = true
		case "null":
			c.Null = true
		case "object":
			c.Object = true
		case "unique":
			c.Unique = true
		case "len":
			c.MinLen, c.MaxLen, err = span(val)
		case "items":
			c.MinItems, c.MaxItems, err = span(val)
		case "keys":
			c.MinKeys, c.MaxKeys, err = span(val)
		case "range":
			lo, hi, e := span64(val)
			c.Min, c.Max, err = &lo, &hi, e
		case "min":
			lo, e := strconv.ParseInt(val, 10, 64)
			c.Min, err = &lo, e
		case "pattern":
			c.Pattern = val
		case "enum":
			c.Enum = strings.Split(val, "|")
		default:
			err = fmt.Errorf("unknown item")
		}
		if err != nil {
			return c, fmt.Errorf("wire: constraint %q: %v", item, err)
		}
	}
	return c, nil
}

func span(v string) (int, int, error) {
	lo, hi, err := span64(v)
	return int(lo), int(hi), err
}

func span64(v string) (int64, int64, error) {
	a, b, ok := strings.Cut(v, "..")
	if !ok {
		return 0, 0, fmt.Errorf("want A..B")
	}
	lo, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, 0, err
	}
	hi, err := strconv.ParseInt(b, 10, 64)
	return lo, hi, err
}

// MaxSafeInt is the largest integer every JSON reader keeps exactly
// (2^53-1): the bound of versions, revisions and generations in requests.
const MaxSafeInt = 1<<53 - 1
