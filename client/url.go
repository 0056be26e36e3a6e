package client

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ParseBaseURL validates a server URL and returns it in canonical form
// (no trailing slash). Allowed: https to any host, or http to 127.0.0.1,
// [::1] or localhost. Refused: user info, query, fragment, other schemes,
// and plain http to any other host. Nothing is resolved or contacted.
func ParseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot parse", ErrInvalidBaseURL)
	}
	if u.User != nil || strings.Contains(u.Host, "@") {
		return nil, fmt.Errorf("%w: user info is not allowed in the URL", ErrInvalidBaseURL)
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, fmt.Errorf("%w: an absolute http(s) URL with a host is required", ErrInvalidBaseURL)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(raw, "?#") {
		return nil, fmt.Errorf("%w: query and fragment are not allowed", ErrInvalidBaseURL)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("%w: missing host", ErrInvalidBaseURL)
	}
	if p := u.Port(); p != "" {
		if strings.TrimLeft(p, "0123456789") != "" {
			return nil, fmt.Errorf("%w: bad port", ErrInvalidBaseURL)
		}
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopbackName(host) {
			return nil, fmt.Errorf("%w: plain http is allowed only to 127.0.0.1, [::1] or localhost; use https", ErrInvalidBaseURL)
		}
	default:
		return nil, fmt.Errorf("%w: scheme must be https (or http to loopback)", ErrInvalidBaseURL)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// isLoopbackName accepts exactly the loopback names of the contract.
func isLoopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)) && !strings.Contains(host, "%")
}
