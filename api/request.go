package api

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"mime"
	"regexp"
	"strconv"
	"strings"

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
	b, err := io.ReadAll(io.LimitReader(c.Request().Body, limit+1))
	if err != nil {
		return nil, invalid("could not read the body")
	}
	if int64(len(b)) > limit {
		return nil, errBodyTooLarge
	}
	return b, nil
}

// idemKey returns the request's Idempotency-Key, which must be one
// canonical lowercase UUIDv4 (two keys are no key).
func idemKey(c echo.Context) (string, error) {
	vals := c.Request().Header.Values("Idempotency-Key")
	if len(vals) != 1 || !isUUIDv4(vals[0]) {
		return "", errIdemKey
	}
	return vals[0], nil
}

var (
	clientToken = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	serverToken = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// claimToken returns X-Claim-Token ("" when absent and optional).
func claimToken(c echo.Context, required bool) (string, error) {
	vals := c.Request().Header.Values("X-Claim-Token")
	if len(vals) == 0 {
		if required {
			return "", errClaimToken
		}
		return "", nil
	}
	if len(vals) > 1 || !(clientToken.MatchString(vals[0]) || serverToken.MatchString(vals[0])) {
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

// jsonRequest performs the request rules shared by JSON mutations, in
// order: declared size, media type, Idempotency-Key, body size, strict
// parse.
func jsonRequest(c echo.Context, limit int64, needKey bool) (map[string]any, string, error) {
	if err := checkLength(c, limit); err != nil {
		return nil, "", err
	}
	if err := checkType(c, "application/json"); err != nil {
		return nil, "", err
	}
	key := ""
	if needKey {
		var err error
		if key, err = idemKey(c); err != nil {
			return nil, "", err
		}
	}
	body, err := readBody(c, limit)
	if err != nil {
		return nil, "", err
	}
	m, err := parseStrict(body)
	return m, key, err
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
