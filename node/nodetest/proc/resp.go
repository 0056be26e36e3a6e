package proc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"
)

// Resp is an HTTP answer (Err: the transport error, when there was one).
// nodetest.Resp is this type.
type Resp struct {
	Status int
	Header http.Header
	Body   []byte
	Err    error
}

// JSON decodes the body into a map.
func (r *Resp) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Code is the error code of an error answer.
func (r *Resp) Code() string {
	c, _ := r.JSON()["code"].(string)
	return c
}

// String is the status and body, for failure messages.
func (r *Resp) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// Client sends requests to a server process; it is safe for concurrent use
// and never fails the test itself (callers in goroutines report errors).
type Client struct {
	HTTP *http.Client
	// Seen, when set, receives every answer.
	Seen func(method, path string, r *Resp)
}

// NewClient returns a client with a pooled transport and a minute's timeout.
func NewClient() *Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second}
	return &Client{HTTP: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// Do sends method base+path with a bearer token, a JSON body (nil: none;
// []byte: raw) and headers; POST/PUT get a fresh Idempotency-Key unless
// headers name one ("" removes a header).
func (c *Client) Do(base, method, path, token string, body any, headers map[string]string) (*Resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == "POST" || method == "PUT" {
		req.Header.Set("Idempotency-Key", uuid.NewString())
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	a := &Resp{Status: res.StatusCode, Header: res.Header, Body: raw}
	if c.Seen != nil {
		c.Seen(method, path, a)
	}
	return a, nil
}
