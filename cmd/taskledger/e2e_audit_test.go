package main_test

// The auditor's and operator's offline commands against the real binary:
// history, export, snapshot create/list, projections rebuild, and a
// SIGKILL in the middle of a snapshot write (failpoints).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/internal/failpoint"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/node/nodetest/proc"
	"taskledger/projections"
	"taskledger/snapshots"
)

// fastNode starts an in-process node (manual clock) without fsync: these
// tests only need a log to audit.
func fastNode(t *testing.T, dir string, opts ...nodetest.Option) *nodetest.Node {
	return nodetest.Start(t, append([]nodetest.Option{nodetest.WithDir(dir), func(c *node.Config) { c.NoSync = true }}, opts...)...)
}

// lifecycle runs one task through claim (server-issued token when the
// device sends none), start, heartbeat and complete; it returns the task
// id and the claim token.
func lifecycle(t *testing.T, n *nodetest.Node, d *nodetest.Device, serverToken bool) (string, string) {
	t.Helper()
	id := n.CreateTask(map[string]any{"job": "audit"})
	nodetest.Must(t, d.Ready(), 200)
	var tok string
	var r *nodetest.Resp
	if serverToken {
		r = d.ClaimWith(nodetest.NewKey(), "")
		nodetest.Must(t, r, 200)
		tok = nodetest.Str(r.JSON()["claim"].(map[string]any), "token")
	} else {
		r, tok = d.Claim()
		nodetest.Must(t, r, 200)
	}
	s := d.Call(id, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, "")
	nodetest.Must(t, s, 200)
	ex := nodetest.Str(s.JSON(), "execution_id")
	nodetest.Must(t, d.Call(id, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "typing"}, ""), 200)
	nodetest.Must(t, d.Call(id, "complete", tok, map[string]any{"claim_generation": 1, "execution_id": ex,
		"expected_version": 3, "result": map[string]any{"ok": true}}, ""), 200)
	return id, tok
}

var secretHex = strings.Repeat("ab", 32)

func TestAuditHistoryAndExport(t *testing.T) {
	dir := t.TempDir()
	n := fastNode(t, dir, nodetest.WithConfig(func(c *commands.Config) { c.ClaimSecret = bytes.Repeat([]byte{0xab}, 32) }))
	d := n.RegisterDevice()
	id, serverTok := lifecycle(t, n, d, true)
	_, clientTok := lifecycle(t, n, d, false)
	head := n.Head()
	n.Close()

	// history, human readable: a title line and one line per event.
	h := proc.CLI(t, "history", id, "--data", dir)
	if h.Code != 0 {
		t.Fatalf("history: %d %s", h.Code, h.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(h.Stdout), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "task "+id+": 5 events") {
		t.Fatalf("history:\n%s", h.Stdout)
	}
	for i, typ := range []string{"task.created", "task.claimed", "task.started", "task.heartbeat (schema 2)", "task.completed"} {
		if !strings.Contains(lines[i+1], typ) {
			t.Errorf("history line %d %q lacks %s", i+1, lines[i+1], typ)
		}
	}
	// history --json (flags after or before the id).
	hj := proc.CLI(t, "history", "--json", "--data", dir, id)
	var doc struct {
		TaskID string           `json:"task_id"`
		Events []map[string]any `json:"events"`
	}
	if hj.Code != 0 || json.Unmarshal([]byte(hj.Stdout), &doc) != nil || doc.TaskID != id || len(doc.Events) != 5 {
		t.Fatalf("history --json: %d %s %s", hj.Code, hj.Stdout, hj.Stderr)
	}
	if doc.Events[1]["type"] != "task.claimed" || doc.Events[1]["stream"] != "task/"+id {
		t.Fatalf("history --json event: %v", doc.Events[1])
	}
	if res := proc.CLI(t, "history", "00000000-0000-4000-8000-000000000000", "--data", dir); res.Code != 1 ||
		!strings.Contains(res.Stderr, "no task") {
		t.Fatalf("history of an unknown task: %d %q", res.Code, res.Stderr)
	}
	if res := proc.CLI(t, "history", "--data", dir); res.Code != 2 {
		t.Fatalf("history without an id: %d", res.Code)
	}

	// export: one event a line, seq ascending from 1, stable field names.
	ex := proc.CLI(t, "export", "--format", "ndjson", "--data", dir)
	if ex.Code != 0 {
		t.Fatalf("export: %d %s", ex.Code, ex.Stderr)
	}
	var seqs []uint64
	sc := bufio.NewScanner(strings.NewReader(ex.Stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		var keys []string
		for k := range ev {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if strings.Join(keys, ",") != "actor,at,body,schema,seq,stream,stream_version,type" {
			t.Fatalf("export fields %v", keys)
		}
		seqs = append(seqs, uint64(ev["seq"].(float64)))
	}
	if uint64(len(seqs)) != head {
		t.Fatalf("export has %d lines, the log %d events", len(seqs), head)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("export line %d has seq %d", i, s)
		}
	}
	after := proc.CLI(t, "export", "--after", strconv.FormatUint(head-2, 10), "--format", "ndjson", "--data", dir)
	if after.Code != 0 || strings.Count(after.Stdout, "\n") != 2 || !strings.HasPrefix(after.Stdout, `{"seq":`+strconv.FormatUint(head-1, 10)+",") {
		t.Fatalf("export --after: %d %q", after.Code, after.Stdout)
	}
	if res := proc.CLI(t, "export", "--format", "csv", "--data", dir); res.Code != 2 {
		t.Fatalf("export --format csv: %d", res.Code)
	}

	// No secret: no token, token hash, nonce or idempotency fingerprint.
	all := ex.Stdout + h.Stdout + hj.Stdout
	for _, secret := range []string{serverTok, clientTok, commands.HashToken(serverTok), commands.HashToken(clientTok),
		"token_sha256", "nonce", "fingerprint", n.AdminToken, d.Token, commands.HashToken(d.Token)} {
		if strings.Contains(all, secret) {
			t.Errorf("the audit output contains %q", secret)
		}
	}
}

func TestOfflineAuditCommandsRefuseWhileServing(t *testing.T) {
	dir := t.TempDir()
	srv := startServer(t, dir)
	for _, args := range [][]string{
		{"history", "00000000-0000-4000-8000-000000000000", "--data", dir},
		{"export", "--format", "ndjson", "--data", dir},
		{"snapshot", "create", "--data", dir},
		{"snapshot", "list", "--data", dir},
		{"projections", "rebuild", "--data", dir},
	} {
		res := proc.CLI(t, args...)
		if res.Code == 0 || !strings.Contains(res.Stderr, "in use") {
			t.Errorf("%v while a server runs: exit %d, stderr %q", args, res.Code, res.Stderr)
		}
	}
	if code := srv.Stop(t); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
}

var rebuildLine = regexp.MustCompile(`^rebuilt projections from the log: (\d+) events read in [0-9.]+s \((\d+) events/s\); snapshot (\S+) \(seq (\d+)\)\n$`)

func TestProjectionsRebuildAndSnapshotCommands(t *testing.T) {
	dir := t.TempDir()
	n := fastNode(t, dir, nodetest.WithConfig(func(c *commands.Config) { c.ClaimSecret = bytes.Repeat([]byte{0xab}, 32) }))
	d := n.RegisterDevice()
	lifecycle(t, n, d, true)
	head := n.Head()
	n.Close()

	if res := proc.CLI(t, "snapshot", "list", "--data", dir); res.Code != 0 || res.Stdout != "no snapshots\n" {
		t.Fatalf("snapshot list: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	cr := proc.CLI(t, "snapshot", "create", "--data", dir)
	if cr.Code != 0 || !strings.Contains(cr.Stdout, "snapshot-"+strconv.FormatUint(head, 10)+".tlsnap") {
		t.Fatalf("snapshot create: %d %q %q", cr.Code, cr.Stdout, cr.Stderr)
	}
	// Without the secret the snapshot does not vouch for the claims.
	s, err := snapshots.Read(filepath.Join(snapshots.Dir(dir), snapshots.FileName(head)))
	if err != nil || s.KeyCheck != nil {
		t.Fatalf("offline snapshot without secret: %v %x", err, s.KeyCheck)
	}
	if res := proc.CLI(t, "projections", "rebuild", "--data", dir, "--claim-token-secret", strings.Repeat("cd", 32)); res.Code == 0 {
		t.Fatalf("rebuild with a wrong secret succeeded: %q", res.Stdout)
	}
	// A read model of an older build (here: none at all) is rewritten by
	// the same replay, so that the next start need not replay again.
	dropReadModel(t, dir)
	rb := proc.CLI(t, "projections", "rebuild", "--data", dir, "--claim-token-secret", secretHex)
	m := rebuildLine.FindStringSubmatch(rb.Stdout)
	if rb.Code != 0 || m == nil || m[1] != strconv.FormatUint(head, 10) || m[4] != m[1] {
		t.Fatalf("projections rebuild: %d %q %q", rb.Code, rb.Stdout, rb.Stderr)
	}
	if docs := currentReadModelTasks(t, dir, head); docs == 0 {
		t.Fatal("the rebuilt read model holds no finished task")
	}
	if rb.Stderr != "" {
		t.Fatalf("rebuild wrote to a stderr that is not a terminal: %q", rb.Stderr)
	}
	s, err = snapshots.Read(m[3])
	if err != nil || !bytes.Equal(s.KeyCheck, commands.SecretCheck(bytes.Repeat([]byte{0xab}, 32))) {
		t.Fatalf("rebuild snapshot: %v %x", err, s.KeyCheck)
	}
	ls := proc.CLI(t, "snapshot", "list", "--data", dir)
	if ls.Code != 0 || !strings.HasPrefix(ls.Stdout, "snapshot-"+m[4]+".tlsnap  seq="+m[4]+"  schema="+strconv.Itoa(projections.SchemaVersion)) || !strings.Contains(ls.Stdout, " ok\n") {
		t.Fatalf("snapshot list: %q", ls.Stdout)
	}
	if res := proc.CLI(t, "verify", "--data", dir); res.Code != 0 || !strings.Contains(res.Stdout, "1 snapshots checked") {
		t.Fatalf("verify: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}

	// A snapshot edited by hand: verify fails naming it and its checksum,
	// list shows it refused, and it never loads.
	raw, _ := os.ReadFile(m[3])
	i := bytes.Index(raw, []byte("SUCCEEDED"))
	if i < 0 {
		t.Fatal("no task state in the snapshot")
	}
	copy(raw[i:], "CANCELED!")
	if err := os.WriteFile(m[3], raw, 0o600); err != nil {
		t.Fatal(err)
	}
	v := proc.CLI(t, "verify", "--data", dir)
	if v.Code != 1 || !strings.Contains(v.Stderr, "snapshot-"+m[4]+".tlsnap") || !strings.Contains(v.Stderr, "checksum") ||
		!strings.Contains(v.Stderr, "seq "+m[4]) {
		t.Fatalf("verify of an edited snapshot: %d %q %q", v.Code, v.Stdout, v.Stderr)
	}
	if ls := proc.CLI(t, "snapshot", "list", "--data", dir); !strings.Contains(ls.Stdout, "refused: snapshots: checksum mismatch") {
		t.Fatalf("snapshot list of an edited snapshot: %q", ls.Stdout)
	}
}

// runWithEnv runs the binary with extra environment and reports how it
// ended (bounded by a minute).
func runWithEnv(t *testing.T, env []string, args ...string) (*os.ProcessState, string) {
	t.Helper()
	cmd := exec.Command(proc.Taskledger(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not end within a minute:\n%s", args, errb.String())
	}
	return cmd.ProcessState, errb.String()
}

func killed(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// newestValid is the seq of the newest snapshot start-up would load.
func newestValid(t *testing.T, dir string) uint64 {
	t.Helper()
	list, _ := snapshots.List(snapshots.Dir(dir))
	for _, e := range list {
		if _, err := snapshots.Read(e.Path); err == nil {
			return e.Seq
		}
	}
	return 0
}

// TestSnapshotSIGKILLMidWrite: a process SIGKILLed while it writes a
// snapshot (offline `snapshot create` half-way through the content; the
// server's own periodic snapshot after the .tmp was written, before the
// rename) leaves the previous snapshot loadable, and the server then
// starts from it with the right projections.
func TestSnapshotSIGKILLMidWrite(t *testing.T) {
	dir := t.TempDir()
	n := fastNode(t, dir)
	d := n.RegisterDevice()
	lifecycle(t, n, d, false)
	n.Close()
	if res := proc.CLI(t, "snapshot", "create", "--data", dir); res.Code != 0 {
		t.Fatalf("snapshot create: %s", res.Stderr)
	}
	first := newestValid(t, dir)

	// More than --snapshot-every (its minimum, 1000) events after it.
	n = fastNode(t, dir)
	for i := 0; i < 1000; i++ { // not authorized: never claimable
		nodetest.Must(t, n.Do("POST", "/api/v1/admin/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"i": i}}, nil), 201)
	}
	d2 := *d
	d2.N = n
	lifecycle(t, n, &d2, false)
	head := n.Head()
	want := n.Do("GET", "/api/v1/admin/tasks?limit=500", n.AdminToken, nil, nil)
	nodetest.Must(t, want, 200)
	n.Close()

	ps, stderr := runWithEnv(t, []string{failpoint.Env + "=" + failpoint.SnapshotMidWrite}, "snapshot", "create", "--data", dir)
	if !killed(ps) {
		t.Fatalf("snapshot create with the mid-write failpoint was not killed: %v\n%s", ps, stderr)
	}
	tmp := filepath.Join(snapshots.Dir(dir), snapshots.FileName(head)+".tmp")
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("no torn .tmp file: %v", err)
	}
	if got := newestValid(t, dir); got != first {
		t.Fatalf("newest valid snapshot %d after the kill, want %d", got, first)
	}

	ps, stderr = runWithEnv(t, []string{failpoint.Env + "=" + failpoint.SnapshotAfterTmpWrite},
		"serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual", "--snapshot-every", "1000")
	if !killed(ps) {
		t.Fatalf("serve with the after-tmp-write failpoint was not killed: %v\n%s", ps, stderr)
	}
	if got := newestValid(t, dir); got != first {
		t.Fatalf("newest valid snapshot %d after the server was killed, want %d", got, first)
	}
	if _, err := snapshots.Read(tmp); err != nil {
		t.Fatalf("the server's .tmp file was not complete before the rename: %v", err)
	}

	srv := startServer(t, dir, "--snapshot-every", "1000")
	admin := srv.Admin
	got, err := proc.NewClient().Do(srv.URL, "GET", "/api/v1/admin/tasks?limit=500", admin, nil, nil)
	if err != nil || got.Status != 200 || !bytes.Equal(got.Body, want.Body) {
		t.Fatalf("tasks after the restart differ: %v", err)
	}
	loaded := regexp.MustCompile(`"snapshot_seq":(\d+),"tail_events":(\d+)`).FindStringSubmatch(srv.Stderr())
	if loaded == nil || loaded[1] != strconv.FormatUint(first, 10) || loaded[2] != strconv.FormatUint(head-first, 10) {
		t.Fatalf("the server did not start from snapshot %d + %d events:\n%s", first, head-first, srv.Stderr())
	}
	if code := srv.Stop(t); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	if res := proc.CLI(t, "verify", "--data", dir); res.Code != 0 {
		t.Fatalf("verify: %s %s", res.Stdout, res.Stderr)
	}
}

// dropReadModel empties the read model of the ledger in dir (closed).
func dropReadModel(t *testing.T, dir string) {
	t.Helper()
	store, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.ResetReadModel(nil); err != nil {
		t.Fatal(err)
	}
}

// currentReadModelTasks fails unless the read model of the ledger in dir
// is current at head for the default retention, and counts its tasks.
func currentReadModelTasks(t *testing.T, dir string, head uint64) int {
	t.Helper()
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rmHead, _ := store.ReadModelGet(projections.RMMeta, projections.RMHeadKey())
	version, _ := store.ReadModelGet(projections.RMMeta, projections.RMVersionKey())
	cfg := projections.Config{IdempotencyRetentionMs: commands.DefaultConfig().IdempotencyRetention.Milliseconds()}
	if !projections.ReadModelCurrentAt(cfg, head, rmHead, version) {
		t.Fatalf("the read model is not current at seq %d: head %x, version %x", head, rmHead, version)
	}
	n := 0
	if err := store.ReadModelScan(projections.RMTasks, nil, nil, false, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
