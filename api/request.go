package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"mime"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// checkLength refuses a declared Content-Length over limit before anything
// is read.
func checkLength(c echo.Context, limit int64) error {
	if c.Request().ContentLength > limit {
		return errBodyTooLarge
	}
	return nil
}

// checkType requires the media type want (parameters: only charset=utf-8).
func checkType(c echo.Context, want string) error {
	mt, params, err := mime.ParseMediaType(c.Request().Header.Get("Content-Type"))
	if err != nil || mt != want {
		return errUnsupportedMedia
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") || want != "application/json" {
			return errUnsupportedMedia
		}
	}
	return nil
}

// readBody reads at most limit bytes; more → 413.
func readBody(c echo.Context, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	return readBodyInto(c, limit, &buf)
}

// readBodyInto reads at most limit bytes into buf; more → 413.
func readBodyInto(c echo.Context, limit int64, buf *bytes.Buffer) ([]byte, error) {
	if _, err := buf.ReadFrom(io.LimitReader(c.Request().Body, limit+1)); err != nil {
		return nil, invalid("could not read the body")
	}
	if int64(buf.Len()) > limit {
		return nil, errBodyTooLarge
	}
	return buf.Bytes(), nil
}

// jsonBodies are the buffers JSON bodies are read into: the strict reader
// copies what it keeps, so a buffer serves the next request.
var jsonBodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// idemKey returns the request's Idempotency-Key, which must be one
// canonical lowercase UUIDv4 (two keys are no key).
func idemKey(c echo.Context) (string, error) {
	vals := c.Request().Header.Values("Idempotency-Key")
	if len(vals) != 1 || !isUUIDv4(vals[0]) {
		return "", errIdemKey
	}
	return vals[0], nil
}

// Byte classes of the request checks (a table lookup per byte instead of
// a regular expression per value: every device request checks some).
var (
	base64URL = byteClass("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
	lowerHex  = byteClass("0123456789abcdef")
)

type class [256]bool

func byteClass(members string) *class {
	var c class
	for i := 0; i < len(members); i++ {
		c[members[i]] = true
	}
	return &c
}

// of reports whether s is lo to hi bytes, all of the class.
func (c *class) of(s string, lo, hi int) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !c[s[i]] {
			return false
		}
	}
	return true
}

// clientToken is a client-issued claim token: 43 base64url characters;
// serverToken a server-issued one: 64 lowercase hex.
func clientToken(s string) bool { return base64URL.of(s, 43, 43) }
func serverToken(s string) bool { return lowerHex.of(s, 64, 64) }

// claimToken returns X-Claim-Token ("" when absent and optional).
func claimToken(c echo.Context, required bool) (string, error) {
	vals := c.Request().Header.Values("X-Claim-Token")
	if len(vals) == 0 {
		if required {
			return "", errClaimToken
		}
		return "", nil
	}
	if len(vals) > 1 || !(clientToken(vals[0]) || serverToken(vals[0])) {
		return "", errClaimToken
	}
	return vals[0], nil
}

var decimal = regexp.MustCompile(`^[1-9][0-9]{0,18}$`)

// generationHeader reads X-Claim-Generation: a decimal integer ≥ 1.
func generationHeader(c echo.Context) (uint64, error) {
	v := c.Request().Header.Get("X-Claim-Generation")
	if !decimal.MatchString(v) {
		return 0, invalid("X-Claim-Generation must be a decimal integer ≥ 1")
	}
	g, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, invalid("X-Claim-Generation must be a decimal integer ≥ 1")
	}
	return g, nil
}

// Claim-token header rules of a route.
const (
	tokenNone = iota
	tokenOptional
	tokenRequired
)

// rules are the header and body rules of a route, checked in api.md's
// order: declared size, media type, Idempotency-Key, X-Claim-Token, then
// the body itself.
type rules struct {
	limit     int64
	mediaType string
	key       bool // Idempotency-Key required
	token     int  // tokenNone, tokenOptional or tokenRequired
}

// head is what the header rules extracted.
type head struct {
	key   string
	token string // "" when absent
}

var (
	deviceClaimJSON = rules{limit: DeviceJSONLimit, mediaType: "application/json", key: true, token: tokenOptional}
	deviceTaskJSON  = rules{limit: DeviceJSONLimit, mediaType: "application/json", key: true, token: tokenRequired}
	presenceJSON    = rules{limit: DeviceJSONLimit, mediaType: "application/json"}
	adminJSONRules  = rules{limit: AdminJSONLimit, mediaType: "application/json", key: true}
	clockJSON       = rules{limit: AdminJSONLimit, mediaType: "application/json"}
	evidencePNG     = rules{limit: EvidenceLimit, mediaType: "image/png", key: true, token: tokenRequired}
	referenceJPEG   = rules{limit: ImageLimit, mediaType: "image/jpeg", key: true}
)

// checkHead applies the header rules.
func checkHead(c echo.Context, r rules) (head, error) {
	var h head
	if err := checkLength(c, r.limit); err != nil {
		return h, err
	}
	if err := checkType(c, r.mediaType); err != nil {
		return h, err
	}
	var err error
	if r.key {
		if h.key, err = idemKey(c); err != nil {
			return h, err
		}
	}
	if r.token != tokenNone {
		if h.token, err = claimToken(c, r.token == tokenRequired); err != nil {
			return h, err
		}
	}
	return h, nil
}

// readRaw applies the header rules and reads the body within the limit.
func readRaw(c echo.Context, r rules) ([]byte, head, error) {
	h, err := checkHead(c, r)
	if err != nil {
		return nil, h, err
	}
	body, err := readBody(c, r.limit)
	return body, h, err
}

// readJSON applies the header rules, reads the body and parses it strictly.
func readJSON(c echo.Context, r rules) (map[string]any, head, error) {
	h, err := checkHead(c, r)
	if err != nil {
		return nil, h, err
	}
	buf := jsonBodies.Get().(*bytes.Buffer)
	defer jsonBodies.Put(buf)
	buf.Reset()
	body, err := readBodyInto(c, r.limit, buf)
	if err != nil {
		return nil, h, err
	}
	m, err := parseStrict(body)
	return m, h, err
}

// fingerprint hashes what makes two requests the same: the operation, path
// parameters, canonical body, the meaningful X- headers and the claim-token
// hash, each length-prefixed.
func fingerprint(parts ...string) []byte {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return h.Sum(nil)
}
