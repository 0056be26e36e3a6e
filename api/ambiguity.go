package api

import (
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"taskledger/wire"
)

var errAmbiguous = newErr(http.StatusBadRequest, "ambiguous_request",
	"the request is ambiguous: a header that must appear once appears more than once, or a query parameter is repeated")

// singleHeaders must appear at most once: two values could be read
// differently by a proxy in front and by this server. (Two Idempotency-Key
// or X-Claim-Token headers keep their own codes: invalid_idempotency_key,
// invalid_claim_token.)
var singleHeaders = []string{"Authorization", "Content-Type", "Content-Length",
	"X-Claim-Generation", "X-Execution-Id", "X-Evidence-Kind", "X-Captured-At"}

// refuseAmbiguous answers 400 ambiguous_request to a request with a
// repeated single header or a repeated query parameter, before
// authentication.
func (s *Server) refuseAmbiguous(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		for _, h := range singleHeaders {
			if vs := r.Header.Values(h); len(vs) > 1 || (len(vs) == 1 && strings.Contains(vs[0], ",") && h == "Authorization") {
				closeIfBody(c)
				return errAmbiguous
			}
		}
		if r.URL.RawQuery != "" {
			if err := parseQueryStrict(r.URL.RawQuery); err != nil {
				closeIfBody(c)
				return err
			}
		}
		return next(c)
	}
}

// parseQueryStrict refuses a repeated parameter (also when its name is
// written with other escapes) or a malformed query.
func parseQueryStrict(raw string) error {
	seen := map[string]bool{}
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		name, _, _ := strings.Cut(part, "=")
		n, err := unescapeQuery(name)
		if err != nil {
			return invalid("malformed query string")
		}
		if seen[n] {
			return errAmbiguous
		}
		seen[n] = true
	}
	return nil
}

func unescapeQuery(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			b.WriteByte(' ')
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", errAmbiguous
			}
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// loneSurrogate reports whether a JSON text holds a lone UTF-16
// surrogate escape (wire.HasLoneSurrogate).
func loneSurrogate(b []byte) bool { return wire.HasLoneSurrogate(b) }

// methodTable answers 405 with Allow for a path the router knows under
// other methods, before authentication (HEAD included: no route answers
// HEAD).
type methodTable struct {
	once   sync.Once
	routes []methodRoute
}

type methodRoute struct {
	segs    []string // ":x" matches one segment, "*" the rest
	wild    bool     // segs holds a "*"
	methods []string
}

func (t *methodTable) build(e *echo.Echo) {
	byPath := map[string]map[string]bool{}
	for _, r := range e.Routes() {
		if !strings.HasPrefix(r.Path, "/") || strings.HasPrefix(r.Method, "echo_") {
			continue
		}
		if byPath[r.Path] == nil {
			byPath[r.Path] = map[string]bool{}
		}
		byPath[r.Path][r.Method] = true
	}
	for p, ms := range byPath {
		if len(ms) >= 8 { // Any(): answered by its own handler
			continue
		}
		var list []string
		for m := range ms {
			list = append(list, m)
		}
		sort.Strings(list)
		segs := strings.Split(p, "/")
		t.routes = append(t.routes, methodRoute{segs: segs, wild: slices.Contains(segs, "*"), methods: list})
	}
}

// allowed returns the methods of the routes matching path (nil: no route).
func (t *methodTable) allowed(path string) []string {
	set := map[string]bool{}
	for _, r := range t.routes {
		if matchPath(r.segs, path) {
			for _, m := range r.methods {
				set[m] = true
			}
		}
	}
	if len(set) == 0 {
		return nil
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// permits reports whether method may reach path: no route has the path,
// or one that has it takes the method. It allocates nothing (every
// request asks).
func (t *methodTable) permits(path, method string) bool {
	matched, n := false, strings.Count(path, "/")+1
	for _, r := range t.routes {
		if (r.wild || len(r.segs) == n) && matchPath(r.segs, path) { // without a "*", only as many segments match
			if slices.Contains(r.methods, method) {
				return true
			}
			matched = true
		}
	}
	return !matched
}

// matchPath matches path's "/"-separated segments against a route's.
func matchPath(pat []string, path string) bool {
	rest, end := path, false
	for _, p := range pat {
		if p == "*" {
			return true
		}
		if end {
			return false
		}
		seg, after, found := strings.Cut(rest, "/")
		rest, end = after, !found
		if strings.HasPrefix(p, ":") {
			if seg == "" {
				return false
			}
			continue
		}
		if p != seg {
			return false
		}
	}
	return end
}

// refuseMethod answers 405 method_not_allowed with Allow when the path is
// a route's but the method is not one of its methods.
func (s *Server) refuseMethod(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		s.methods.once.Do(func() { s.methods.build(s.echo) })
		r := c.Request()
		if s.methods.permits(r.URL.Path, r.Method) {
			return next(c)
		}
		allow := s.methods.allowed(r.URL.Path)
		c.Response().Header().Set("Allow", strings.Join(allow, ", "))
		closeIfBody(c)
		return errMethod
	}
}
