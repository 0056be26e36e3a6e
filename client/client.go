package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"taskledger/wire"
)

// Size limits of requests and responses.
const (
	// MaxJSONRequest is the largest device JSON body the server accepts.
	MaxJSONRequest = 4096
	// MaxEvidence is the largest evidence PNG.
	MaxEvidence = 8 << 20
	// MaxJSONResponse bounds every JSON answer read from the server.
	MaxJSONResponse = 256 << 10
	// MaxReferenceImage bounds a reference image download.
	MaxReferenceImage = 5 << 20
	// MaxTokenLength bounds the device token (opaque printable ASCII).
	MaxTokenLength = 200
)

// Default timeouts.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultReadTimeout    = 30 * time.Second
)

// Config configures a Client.
type Config struct {
	// BaseURL is the server root, e.g. "https://ledger.example.com".
	BaseURL string
	// DeviceID is the canonical UUID of this device.
	DeviceID string
	// Token is the device bearer token; it is only ever put in the
	// Authorization header.
	Token string
	// ConnectTimeout bounds dialing and the TLS handshake.
	ConnectTimeout time.Duration
	// ReadTimeout bounds waiting for the response headers and reading the
	// body.
	ReadTimeout time.Duration
	// RootCAs, if set, replaces the system roots (tests, private CAs).
	// Certificate verification is always on.
	RootCAs *x509.CertPool
	// OnSend, if set, is called right before each request leaves (after all
	// local checks); used for failpoints and counting in tests.
	OnSend func(op string)
	// DialContext, if set, replaces the dialer (tests: reach a TLS test
	// server under a non-loopback name). It never adds a proxy.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Client is the device transport. It is safe for concurrent use.
type Client struct {
	base     *url.URL
	deviceID string
	token    string
	hc       *http.Client
	read     time.Duration
	onSend   func(string)
}

// New validates cfg and builds a Client. Nothing is contacted.
func New(cfg Config) (*Client, error) {
	base, err := ParseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if !IsUUID(cfg.DeviceID) {
		return nil, fmt.Errorf("%w: device id must be a canonical lowercase UUIDv4", ErrInvalidConfig)
	}
	if err := CheckDeviceToken(cfg.Token); err != nil {
		return nil, err
	}
	ct, rt := cfg.ConnectTimeout, cfg.ReadTimeout
	if ct <= 0 {
		ct = DefaultConnectTimeout
	}
	if rt <= 0 {
		rt = DefaultReadTimeout
	}
	dial := cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: ct, KeepAlive: 30 * time.Second}).DialContext
	}
	tr := &http.Transport{
		Proxy:                 nil, // never the system proxy (HTTPS_PROXY etc.)
		DialContext:           dial,
		TLSHandshakeTimeout:   ct,
		ResponseHeaderTimeout: rt,
		ExpectContinueTimeout: time.Second,
		// One connection per request: a request is never silently resent
		// on a stale reused connection.
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 64 << 10,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.RootCAs},
	}
	hc := &http.Client{
		Transport: tr,
		// Redirects are never followed: the 3xx itself is returned and
		// treated as an unknown outcome.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Client{base: base, deviceID: cfg.DeviceID, token: cfg.Token, hc: hc, read: rt, onSend: cfg.OnSend}, nil
}

// CheckDeviceToken checks the form of a device token (1–200 printable ASCII
// characters) without revealing it.
func CheckDeviceToken(tok string) error {
	if len(tok) == 0 || len(tok) > MaxTokenLength {
		return fmt.Errorf("%w: device token must be 1-%d characters", ErrInvalidConfig, MaxTokenLength)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return fmt.Errorf("%w: device token must be printable ASCII without spaces", ErrInvalidConfig)
		}
	}
	return nil
}

// DeviceID returns the configured device id.
func (c *Client) DeviceID() string { return c.deviceID }

// BaseURL returns the canonical server URL.
func (c *Client) BaseURL() string { return c.base.String() }

// CloseIdle closes idle connections.
func (c *Client) CloseIdle() { c.hc.CloseIdleConnections() }

// request is one prepared HTTP call.
type request struct {
	op          string
	method      string
	path        string // below /api/v1
	key         string
	claimToken  string
	contentType string
	body        []byte
	extra       map[string]string
}

// response is a received answer, body fully read within limits.
type response struct {
	status     int
	header     http.Header
	body       []byte
	retryAfter time.Duration
}

// do sends exactly one request. The only place where the bearer token,
// content type and standard headers are set.
func (c *Client) do(ctx context.Context, r request, limit int64) (*response, error) {
	u := *c.base
	u.Path = c.base.Path + "/api/v1" + r.path
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	ctx, cancel := context.WithTimeout(ctx, c.read*2)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCall, err)
	}
	// No hidden retries: net/http replays a request with a rewindable body
	// and an Idempotency-Key on a broken reused connection; without GetBody
	// (and without keep-alive, below) it never does.
	req.GetBody = nil
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "taskledger-agent/1")
	if r.body != nil {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	if r.claimToken != "" {
		req.Header.Set("X-Claim-Token", r.claimToken)
	}
	for k, v := range r.extra {
		req.Header.Set(k, v)
	}
	if c.onSend != nil {
		c.onSend(r.op)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &UnknownOutcomeError{Op: r.op, Err: scrub(err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &UnknownOutcomeError{Op: r.op, Status: resp.StatusCode, Err: fmt.Errorf("%w: body truncated: %v", ErrInvalidResponse, scrub(err))}
	}
	if int64(len(data)) > limit {
		return nil, unknown(r.op, resp.StatusCode, 0, "body larger than %d bytes", limit)
	}
	out := &response{status: resp.StatusCode, header: resp.Header, body: data}
	if ra := resp.Header.Values("Retry-After"); len(ra) > 0 {
		d, err := parseRetryAfter(ra)
		if err != nil {
			return nil, unknown(r.op, resp.StatusCode, 0, "%v", err)
		}
		out.retryAfter = d
	}
	return out, nil
}

// scrub removes the URL from a *url.Error (it carries no secret, but keep
// errors short and uniform) and keeps the cause.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

func parseRetryAfter(vals []string) (time.Duration, error) {
	if len(vals) != 1 {
		return 0, errors.New("several Retry-After headers")
	}
	v := strings.TrimSpace(vals[0])
	if !intRE.MatchString(v) {
		return 0, errors.New("Retry-After is not a number of seconds")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n > 86400 {
		return 0, errors.New("Retry-After out of range")
	}
	return time.Duration(n) * time.Second, nil
}

// isJSON checks the Content-Type of a JSON answer.
func isJSON(h http.Header) bool {
	vals := h.Values("Content-Type")
	if len(vals) != 1 {
		return false
	}
	mt, params, err := mime.ParseMediaType(vals[0])
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}

// classify turns a non-success answer into the error the caller acts on.
// allowed lists the statuses the contract names for the route.
func classify(op string, r *response, allowed []int) error {
	st := r.status
	if st >= 500 {
		return &UnknownOutcomeError{Op: op, Status: st, RetryAfter: r.retryAfter, Err: fmt.Errorf("server error")}
	}
	if st >= 300 && st < 400 {
		return unknown(op, st, 0, "redirect refused (%d)", st)
	}
	if st == http.StatusUnauthorized {
		return fmt.Errorf("%s: %w", op, ErrUnauthorized)
	}
	listed := false
	for _, a := range allowed {
		listed = listed || a == st
	}
	if !listed || st < 400 {
		return unknown(op, st, r.retryAfter, "status %d is not allowed for this route", st)
	}
	if !isJSON(r.header) {
		return unknown(op, st, r.retryAfter, "error body is not application/json")
	}
	var e wire.Error
	if err := answerJSON.Decode(r.body, &e); err != nil {
		return unknown(op, st, r.retryAfter, "error body: %v", err)
	}
	code, msg := e.Code, e.Message
	if !codeRE.MatchString(code) {
		return unknown(op, st, r.retryAfter, "error body: code %q is not a stable code", code)
	}
	if want, ok := errorCodes[code]; ok && want != st {
		return unknown(op, st, r.retryAfter, "error code %q does not go with status %d", code, st)
	}
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	return &APIError{Op: op, Status: st, Code: code, Message: msg, RetryAfter: r.retryAfter}
}
