package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The client side of the operator commands: one HTTP client per
// invocation, the admin token from --token-file or TASKLEDGER_TOKEN (never
// a flag value), a fresh Idempotency-Key per invocation unless
// --idempotency-key retries one.

const defaultServer = "http://127.0.0.1:8080"

// remoteFlags are the connection flags of every remote command.
type remoteFlags struct {
	server, tokenFile, caFile, idemKey string
	json                               bool
}

func (r *remoteFlags) register(fs *pflag.FlagSet) {
	r.registerConn(fs, false)
	fs.StringVar(&r.idemKey, "idempotency-key", "", "retry a command with the key of an earlier invocation (default: a fresh UUIDv4)")
	fs.BoolVar(&r.json, "json", false, "print the API's JSON answer instead of text")
}

// registerConn defines --server, --token-file and --ca-file. For a
// command that reads a stopped ledger unless --server is given (offline),
// --server has no default.
func (r *remoteFlags) registerConn(fs *pflag.FlagSet, offline bool) {
	if offline {
		envStringVar(fs, &r.server, "server", "", "base URL of a running server: go through its API instead of the stopped ledger")
	} else {
		envStringVar(fs, &r.server, "server", defaultServer, "base URL of the running server")
	}
	envStringVar(fs, &r.tokenFile, "token-file", "", "file holding the admin token (without it: env TASKLEDGER_TOKEN)")
	envStringVar(fs, &r.caFile, "ca-file", "", "PEM file of the CA that signed the server's TLS certificate")
}

func (r *remoteFlags) serverURL() string {
	if r.server != "" {
		return strings.TrimSuffix(r.server, "/")
	}
	if v := os.Getenv("TASKLEDGER_SERVER"); v != "" {
		return strings.TrimSuffix(v, "/")
	}
	return defaultServer
}

// apiError is a refusal of the API: its status and stable code.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("the server answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Code, e.Message, e.Status)
}

// client talks to one server with one admin token.
type client struct {
	base, token, key string
	http             *http.Client
}

func (r *remoteFlags) client() (*client, error) {
	tokFile := r.tokenFile
	var token string
	if tokFile != "" {
		b, err := os.ReadFile(tokFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	} else {
		token = strings.TrimSpace(os.Getenv("TASKLEDGER_TOKEN"))
	}
	if token == "" {
		return nil, usageErr{Err: errors.New("no admin token: give --token-file FILE or set TASKLEDGER_TOKEN")}
	}
	base := r.serverURL()
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErr{Err: fmt.Errorf("--server %q is not an http(s) URL", base)}
	}
	key := r.idemKey
	if key == "" {
		key = uuid.NewString()
	} else if p, err := uuid.Parse(key); err != nil || p.String() != key || p.Version() != 4 {
		return nil, usageErr{Err: errors.New("--idempotency-key must be a canonical lowercase UUIDv4")}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	caFile := r.caFile
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &client{base: base, token: token, key: key, http: &http.Client{Transport: tr, Timeout: time.Minute}}, nil
}

// do sends one request to /api/v1+path; body is JSON (any) or raw bytes
// with ctype. A 2xx answer's body is returned; anything else is an
// *apiError.
func (c *client) do(method, path string, body any, ctype string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		if b, ok := body.([]byte); ok {
			rd = bytes.NewReader(b)
		} else {
			b, err := json.Marshal(body)
			if err != nil {
				return 0, nil, err
			}
			rd = bytes.NewReader(b)
			ctype = "application/json"
		}
	}
	req, err := http.NewRequest(method, c.base+"/api/v1"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if method == http.MethodPost || method == http.MethodPut {
		req.Header.Set("Idempotency-Key", c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("server %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode/100 != 2 {
		ae := &apiError{Status: resp.StatusCode}
		_ = json.Unmarshal(b, ae)
		var doc struct{ Code, Message string }
		if json.Unmarshal(b, &doc) == nil {
			ae.Code, ae.Message = doc.Code, doc.Message
		}
		if resp.StatusCode == http.StatusUnauthorized {
			ae.Code, ae.Message = "unauthorized", "the admin token is missing, unknown or revoked"
		}
		return resp.StatusCode, b, ae
	}
	return resp.StatusCode, b, nil
}

// show GETs one document at path and writes it with answer (human text,
// or the JSON with --json).
func (r *remoteFlags) show(stdout io.Writer, path string, answer func(io.Writer, *remoteFlags, []byte) error) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	_, raw, err := c.do(http.MethodGet, path, nil, "")
	if err != nil {
		return err
	}
	return answer(stdout, r, raw)
}

// getJSON GETs path into v.
func (c *client) getJSON(path string, v any) error {
	_, b, err := c.do(http.MethodGet, path, nil, "")
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// printJSON writes raw JSON indented.
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

func versionString() string {
	v, commit := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	return v + " (commit " + commit + ")"
}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the module version and commit",
		Long:  "Print taskledger's module version and the commit it was built from (from the build information).",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(stdout, "taskledger %s\n", versionString())
			return nil
		},
	}
}
