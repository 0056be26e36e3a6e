package main

import (
	"bufio"
	"github.com/spf13/pflag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/node/nodetest"
)

// netServer serves a test node through the serve command's listener and
// http.Server, configured by the serve flags args.
func netServer(t *testing.T, args ...string) (*nodetest.Node, string) {
	t.Helper()
	n := nodetest.Start(t)
	nc, err := parseNet(args, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, _, err := nc.listener("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.API.SetLimits(nc.limits())
	srv := nc.httpServer(n.API.Handler(), zerolog.Nop())
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return n, ln.Addr().String()
}

func parseNet(args []string, listen string) (netConfig, error) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f netFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return netConfig{}, err
	}
	return f.config(listen)
}

// rawRequest writes head on a new connection and returns the connection
// and a reader of the answer.
func rawRequest(t *testing.T, addr, head string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// An unauthenticated request with a body is answered 401 before the body
// is sent, and the connection is closed: the server reads none of it.
func TestUnauthenticatedBodyIsNotRead(t *testing.T) {
	_, addr := netServer(t)
	// 100,000 declared bytes (less than what Go's server would otherwise
	// read and discard to keep the connection), only 10 sent.
	c, rd := rawRequest(t, addr, "POST /api/v1/device/heartbeat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100000\r\n\r\n0123456789")
	c.SetReadDeadline(time.Now().Add(30 * time.Second)) //tl:wallclock a bound on a hung test, not a timing goal
	res, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	if res.StatusCode != http.StatusUnauthorized || !res.Close {
		t.Fatalf("answer %d (close %v), want 401 with the connection closed", res.StatusCode, res.Close)
	}
	io.Copy(io.Discard, res.Body)
	if _, err := rd.ReadByte(); err != io.EOF {
		t.Fatalf("connection left open after the 401: %v", err)
	}
}

// A body sent slower than the read timeout allows is cut off: the
// connection is closed and nothing is appended.
func TestSlowBodyIsCutOff(t *testing.T) {
	n, addr := netServer(t, "--read-timeout", "1s")
	d := n.RegisterDevice()
	before := n.Head()
	c, rd := rawRequest(t, addr, "POST /api/v1/device/heartbeat HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+d.Token+
		"\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{")
	c.SetReadDeadline(time.Now().Add(30 * time.Second)) //tl:wallclock a bound on a hung test, not a timing goal
	// The server gives up on the body: the connection ends with an error
	// answer or none at all, never a 200.
	res, err := http.ReadResponse(rd, nil)
	if err == nil {
		if res.StatusCode == http.StatusOK {
			t.Fatalf("a body that never arrived was answered 200")
		}
		io.Copy(io.Discard, res.Body)
	}
	var ne net.Error
	if _, err := rd.ReadByte(); err == nil || (errorAs(err, &ne) && ne.Timeout()) {
		t.Fatalf("connection still open after the read timeout: %v", err)
	}
	if n.Head() != before {
		t.Fatalf("something was appended")
	}
}

func errorAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

// Past --max-connections the server accepts no further connection until
// one closes.
func TestConnectionCap(t *testing.T) {
	_, addr := netServer(t, "--max-connections", "2")
	get := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	c1, r1 := rawRequest(t, addr, get)
	if res, err := http.ReadResponse(r1, nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("first connection: %v", err)
	}
	c2, r2 := rawRequest(t, addr, get)
	if res, err := http.ReadResponse(r2, nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("second connection: %v", err)
	}
	c3, r3 := rawRequest(t, addr, get)
	c3.SetReadDeadline(time.Now().Add(300 * time.Millisecond)) //tl:wallclock the third must not be served while two are open
	if _, err := r3.ReadByte(); err == nil {
		t.Fatalf("a third connection was served while --max-connections 2 were open")
	}
	c3.SetReadDeadline(time.Now().Add(30 * time.Second)) //tl:wallclock a bound on a hung test
	c1.Close()
	if res, err := http.ReadResponse(r3, nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("third connection after one closed: %v", err)
	}
	_ = c2
}

// The network flags: non-loopback plain HTTP only with --insecure-http,
// TLS files in pairs (flags or environment), bounds and rates checked.
func TestServeNetworkFlags(t *testing.T) {
	refused := map[string][]string{
		"plain HTTP off loopback":    {},
		"half a TLS pair":            {"--tls-cert", "c.pem"},
		"TLS and insecure":           {"--tls-cert", "c.pem", "--tls-key", "k.pem", "--insecure-http"},
		"bad rate":                   {"--insecure-http", "--device-rate", "20/d"},
		"negative rate":              {"--insecure-http", "--address-rate", "-1/s"},
		"zero connections":           {"--insecure-http", "--max-connections", "0"},
		"tiny header limit":          {"--insecure-http", "--max-header-bytes", "100"},
		"read timeout out of bounds": {"--insecure-http", "--read-timeout", "0s"},
		"upload quota below 8 MiB":   {"--insecure-http", "--device-upload-inflight", "4MiB"},
		"upload quota above 1 GiB":   {"--insecure-http", "--device-upload-inflight", "2GiB"},
		"upload quota not a size":    {"--insecure-http", "--device-upload-inflight", "16MB"},
		"upload quota huge number":   {"--insecure-http", "--device-upload-inflight", "99999999999999999999"},
	}
	for name, args := range refused {
		if _, err := parseNet(args, "0.0.0.0:8443"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	_, err := parseNet(nil, "0.0.0.0:8443")
	if err == nil || !strings.Contains(err.Error(), "--insecure-http") || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("non-loopback refusal does not say what to do: %v", err)
	}
	nc, err := parseNet([]string{"--insecure-http", "--device-rate", "600/m", "--address-rate", "0"}, "0.0.0.0:8443")
	if err != nil || !nc.insecureHTTP || nc.deviceRate != 10 || nc.addressRate != 0 {
		t.Fatalf("insecure: %+v %v", nc, err)
	}
	nc, err = parseNet(nil, "127.0.0.1:8080")
	if err != nil || nc.maxConnections != 4096 || nc.deviceRate != 20 || nc.deviceBurst != 40 || nc.idleTimeout != time.Minute ||
		nc.deviceUploadInflight != 16<<20 || nc.limits().DeviceUploadInflight != 16<<20 {
		t.Fatalf("defaults: %+v %v", nc, err)
	}
	nc, err = parseNet([]string{"--device-upload-inflight", "9437184"}, "127.0.0.1:8080")
	if err != nil || nc.deviceUploadInflight != 9<<20 {
		t.Fatalf("upload quota in bytes: %+v %v", nc, err)
	}
	t.Setenv("TASKLEDGER_DEVICE_UPLOAD_INFLIGHT", "1GiB")
	if nc, err = parseNet(nil, "127.0.0.1:8080"); err != nil || nc.deviceUploadInflight != 1<<30 {
		t.Fatalf("upload quota from the environment: %+v %v", nc, err)
	}
	t.Setenv("TASKLEDGER_TLS_CERT", "c.pem")
	t.Setenv("TASKLEDGER_TLS_KEY", "k.pem")
	nc, err = parseNet(nil, "0.0.0.0:8443")
	if err != nil || nc.tlsCert != "c.pem" || nc.tlsKey != "k.pem" {
		t.Fatalf("TLS from the environment: %+v %v", nc, err)
	}
}
