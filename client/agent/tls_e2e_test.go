//go:build unix

package agent

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"taskledger/node/nodetest/proc"
)

// The agent runs a task against `serve` over HTTPS with a private CA given
// by --ca-file; without it the system roots refuse the server and nothing
// is claimed. SIGHUP reloads the server certificate without dropping the
// ledger: new handshakes see the new certificate, the task is still there.
func TestAgentOverTLSWithPrivateCA(t *testing.T) {
	ca := proc.NewTestCA(t)
	certFile, keyFile := filepath.Join(ca.Dir, "server.pem"), filepath.Join(ca.Dir, "server.key")
	first := ca.Issue(t, certFile, keyFile)
	srv := proc.StartServerTLS(t, bins.Server, ca, certFile, keyFile)
	id, tok := srv.NewDevice(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	tf := filepath.Join(dir, "token")
	os.WriteFile(tf, []byte(tok+"\n"), 0o600)
	if code, out, errs := proc.Run(t, bins.Agent, "enroll", "--state", state, "--server", srv.URL, "--device-id", id,
		"--token-file", tf, "--key-file", filepath.Join(dir, "agent.key")); code != 0 {
		t.Fatalf("enroll: %d %s %s", code, out, errs)
	}
	runs := filepath.Join(dir, "runs")
	task := srv.NewTask(t, map[string]any{"mode": "ok", "n": 1, "code": 0, "runs": runs})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exec := strconv.Quote(self) + " " + helperArg

	// Without --ca-file: the certificate is not trusted, the agent stops.
	a := proc.Start(t, nil, bins.Agent, "run", "--state", state, "--exec", exec, "--poll", "50ms")
	a.WaitLine(t, 0, "certificate")
	a.Signal(syscall.SIGTERM)
	a.Wait(t)
	if d := srv.Task(t, task); d["state"] != "PENDING" {
		t.Fatalf("untrusted server: task is %v, want PENDING", d["state"])
	}

	// A --ca-file without a certificate is refused before any request.
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("not a certificate\n"), 0o600)
	if code, _, errs := proc.Run(t, bins.Agent, "run", "--state", state, "--exec", exec, "--ca-file", bad); code == 0 {
		t.Fatalf("run with a bad --ca-file succeeded: %s", errs)
	}

	a = proc.Start(t, nil, bins.Agent, "run", "--state", state, "--exec", exec, "--poll", "50ms", "--heartbeat", "100ms",
		"--ca-file", ca.CAFile)
	a.WaitLine(t, 0, "task finished", "task="+task)
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(t); code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, a.Stderr())
	}
	if d := srv.Task(t, task); d["state"] != "SUCCEEDED" {
		t.Fatalf("task %v, want SUCCEEDED", d["state"])
	}

	addr := srv.URL[len("https://"):]
	if got := serial(t, addr, ca, tls.VersionTLS12); got != first {
		t.Fatalf("serving certificate serial %d, want %d", got, first)
	}
	// TLS 1.1 and older are refused.
	if c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, MaxVersion: tls.VersionTLS11}); err == nil {
		c.Close()
		t.Fatalf("a TLS 1.1 handshake succeeded")
	}

	second := ca.Issue(t, certFile, keyFile)
	from := srv.Proc.Lines()
	srv.Proc.Signal(syscall.SIGHUP)
	srv.Proc.WaitLine(t, from, "TLS certificate reloaded")
	if got := serial(t, addr, ca, tls.VersionTLS12); got != second {
		t.Fatalf("after SIGHUP the serving certificate serial is %d, want %d", got, second)
	}
	srv.CloseIdle()
	if d := srv.Task(t, task); d["state"] != "SUCCEEDED" {
		t.Fatalf("after reload the task is %v, want SUCCEEDED (the ledger stays)", d["state"])
	}

	// A broken certificate file is not taken: the previous one stays.
	os.WriteFile(certFile, []byte("garbage"), 0o600)
	from = srv.Proc.Lines()
	srv.Proc.Signal(syscall.SIGHUP)
	srv.Proc.WaitLine(t, from, "TLS certificate not reloaded")
	if got := serial(t, addr, ca, tls.VersionTLS12); got != second {
		t.Fatalf("after a failed reload the serial is %d, want %d", got, second)
	}
}

func serial(t *testing.T, addr string, ca *proc.TestCA, minVersion uint16) int64 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, MinVersion: minVersion})
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}
