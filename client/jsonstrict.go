package client

import (
	"fmt"
	"regexp"
	"taskledger/wire"
	"time"
)

// maxJSONDepth bounds nesting in responses.
const maxJSONDepth = 64

// TimeLayout is the wire format of every time the server writes: RFC 3339,
// UTC, exactly three fractional digits, "Z".
const TimeLayout = wire.TimeLayout

var (
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
// nesting bounded at maxJSONDepth: every answer is read as its wire type
// with answerJSON.Decode (members, types and the type's tags), then held
// to the exact time layout (ParseTime) and to the call.
var answerJSON = wire.Strict{MaxDepth: maxJSONDepth}
