package main_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"taskledger/node/nodetest/proc"
)

// The backup and restore commands, end to end through the real binary:
// an online backup taken while commands keep committing restores into a
// ledger holding every command acknowledged before the backup began, and
// none acknowledged after it ended; a damaged archive is refused with the
// reason and nothing is written.

// tinyImage is a real JPEG whose content depends on seed (a distinct blob).
func tinyImage(seed int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*7 + seed*13)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		panic(err) // encoding into memory does not fail
	}
	return buf.Bytes()
}

// tokenFile writes the server's admin token to a file for --token-file.
func tokenFile(t testing.TB, s *proc.Server) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(s.Admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// setImage puts a reference image on task id.
func setImage(c *proc.Client, s *proc.Server, id string, img []byte) error {
	r, err := c.Do(s.URL, "PUT", "/api/v1/admin/tasks/"+id+"/reference-image", s.Admin, img,
		map[string]string{"Content-Type": "image/jpeg"})
	if err == nil && r.Status != 200 {
		err = fmt.Errorf("reference image: %s", r)
	}
	return err
}

// createTask creates a task and returns its id.
func createTask(c *proc.Client, s *proc.Server, n int) (string, error) {
	r, err := c.Do(s.URL, "POST", "/api/v1/admin/tasks", s.Admin, map[string]any{"payload": map[string]any{"n": n}}, nil)
	if err != nil {
		return "", err
	}
	if r.Status != 201 {
		return "", fmt.Errorf("create task: %s", r)
	}
	return r.JSON()["id"].(string), nil
}

// ackLog records acknowledged task creations in order; reached(n) is
// closed once n are recorded.
type ackLog struct {
	mu      sync.Mutex
	ids     []string
	waiters map[int]chan struct{}
}

func (a *ackLog) add(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids = append(a.ids, id)
	for n, ch := range a.waiters {
		if len(a.ids) >= n {
			close(ch)
			delete(a.waiters, n)
		}
	}
}

func (a *ackLog) reached(n int) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{})
	if len(a.ids) >= n {
		close(ch)
		return ch
	}
	if a.waiters == nil {
		a.waiters = map[int]chan struct{}{}
	}
	if old, ok := a.waiters[n]; ok {
		return old
	}
	a.waiters[n] = ch
	return ch
}

func (a *ackLog) snapshot() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ids...)
}

func TestBackupUnderLoadRestoresEveryAcknowledgedCommand(t *testing.T) {
	bin := proc.Taskledger(t)
	s := proc.Serve(t, bin, "", "--device-rate", "0")
	c := proc.NewClient()
	for i := range 40 { // a log with blobs, one of them replaced (still referenced by its event)
		id, err := createTask(c, s, i)
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if err := setImage(c, s, id, tinyImage(i)); err != nil {
				t.Fatal(err)
			}
		}
		if i == 20 {
			if err := setImage(c, s, id, tinyImage(1000)); err != nil {
				t.Fatal(err)
			}
		}
	}

	var acks, late ackLog // late: commands sent after the backup ended
	var ended atomic.Bool
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				sentLate := ended.Load()
				id, err := createTask(c, s, w*1_000_000+n)
				if err == nil && n%5 == 0 {
					err = setImage(c, s, id, tinyImage(w*1_000_000+n))
				}
				if err != nil {
					errs <- err
					return
				}
				acks.add(id)
				if sentLate {
					late.add(id)
				}
			}
		}()
	}
	wait := func(ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case err := <-errs:
			t.Fatal(err)
		}
	}
	wait(acks.reached(20))    // the writers commit before the backup starts
	before := acks.snapshot() // acknowledged before the backup began
	out := filepath.Join(t.TempDir(), "ledger.tar")
	res := proc.Exec(t, bin, "backup", "--server", s.URL, "--token-file", tokenFile(t, s), "--out", out)
	if res.Code != 0 {
		t.Fatalf("backup: exit %d\n%s", res.Code, res.Stderr)
	}
	ended.Store(true)
	wait(late.reached(20)) // and keep committing after it
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := late.snapshot() // sent after the backup ended: committed after its read transaction
	if !strings.Contains(res.Stdout, "MB/s") || !strings.Contains(res.Stdout, "bytes in") {
		t.Fatalf("backup's closing line lacks bytes and MB/s: %q", res.Stdout)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	res = proc.Exec(t, bin, "restore", "--from", out, "--data", dir)
	if res.Code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	if v := proc.Exec(t, bin, "verify", "--data", dir); v.Code != 0 {
		t.Fatalf("verify on the restored data: exit %d\n%s", v.Code, v.Stderr)
	}
	admin := s.Admin
	if code := s.Stop(t); code != 0 {
		t.Fatalf("the source server exited %d", code)
	}
	r := proc.Serve(t, bin, dir, "--device-rate", "0")
	r.Admin = admin // the initial token's hash is in the restored log
	for _, id := range before {
		if st, _ := r.Do(t, "GET", "/admin/tasks/"+id, nil); st != 200 {
			t.Fatalf("task %s, acknowledged before the backup began, answers %d on the restored server", id, st)
		}
	}
	for _, id := range after {
		if st, _ := r.Do(t, "GET", "/admin/tasks/"+id, nil); st != 404 {
			t.Fatalf("task %s, acknowledged after the backup ended, answers %d on the restored server", id, st)
		}
	}
	// Every blob the restored log references is served intact.
	for _, id := range before {
		task := r.Task(t, id)
		if task["reference_image"] == nil {
			continue
		}
		got, err := c.Do(r.URL, "GET", "/api/v1/admin/tasks/"+id+"/reference-image", admin, nil, nil)
		if err != nil || got.Status != 200 || len(got.Body) == 0 {
			t.Fatalf("reference image of %s on the restored server: %v %v", id, got, err)
		}
	}
}

// archiveEntry is one tar entry of a backup.
type archiveEntry struct {
	name string
	data []byte
}

func readArchive(t testing.TB, path string) []archiveEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var out []archiveEntry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, archiveEntry{h.Name, b})
	}
}

func writeArchive(t testing.TB, entries []archiveEntry) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Size: int64(len(e.data)), Mode: 0o600}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "damaged.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// editManifest rewrites the manifest's JSON through edit.
func editManifest(t testing.TB, entries []archiveEntry, edit func(m map[string]any)) []archiveEntry {
	t.Helper()
	out := append([]archiveEntry(nil), entries...)
	last := &out[len(out)-1]
	var m map[string]any
	if err := json.Unmarshal(last.data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ := json.Marshal(m)
	last.data = b
	return out
}

func flip(b []byte, at int) []byte {
	c := append([]byte(nil), b...)
	c[at] ^= 0x01
	return c
}

func TestRestoreRefusesADamagedArchiveAndWritesNothing(t *testing.T) {
	bin := proc.Taskledger(t)
	s := proc.Serve(t, bin, "", "--device-rate", "0")
	c := proc.NewClient()
	for i := range 6 {
		id, err := createTask(c, s, i)
		if err != nil {
			t.Fatal(err)
		}
		if err := setImage(c, s, id, tinyImage(i)); err != nil {
			t.Fatal(err)
		}
	}
	good := filepath.Join(t.TempDir(), "good.tar")
	if res := proc.Exec(t, bin, "backup", "--server", s.URL, "--token-file", tokenFile(t, s), "--out", good); res.Code != 0 {
		t.Fatalf("backup: exit %d\n%s", res.Code, res.Stderr)
	}
	s.Stop(t)
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	entries := readArchive(t, good)
	if entries[0].name != "taskledger.db" || entries[len(entries)-1].name != "manifest.json" {
		t.Fatalf("entries %v", entries)
	}
	blob := 1 // the first blob entry
	if !strings.HasPrefix(entries[blob].name, "blobs/") {
		t.Fatalf("entry 1 is %s", entries[blob].name)
	}
	otherKey := proc.Exec(t, bin, "checkpoint-key", "export", "--data", func() string {
		d := t.TempDir()
		if r := proc.Exec(t, bin, "admin-token", "create", "x", "--data", d); r.Code != 0 {
			t.Fatal(r.Stderr)
		}
		if r := proc.Exec(t, bin, "backup", "--data", d, "--out", filepath.Join(t.TempDir(), "x.tar")); r.Code != 0 { // creates its key
			t.Fatal(r.Stderr)
		}
		return d
	}())
	if otherKey.Code != 0 {
		t.Fatal(otherKey.Stderr)
	}
	writeRaw := func(b []byte) string {
		p := filepath.Join(t.TempDir(), "damaged.tar")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, file string
		extra      []string
		want       string
	}{
		{"truncated", writeRaw(raw[:len(raw)/2]), nil, "truncated"},
		{"truncated before the manifest", writeRaw(raw[:len(raw)-3*512]), nil, "truncated"},
		{"a flipped byte in the log", writeRaw(flip(raw, 512+4096+100)), nil, "taskledger.db holds"},
		{"a blob changed", writeArchive(t, func() []archiveEntry {
			e := append([]archiveEntry(nil), entries...)
			e[blob].data = flip(e[blob].data, len(e[blob].data)/2)
			return e
		}()), nil, "blobs/"},
		{"a blob missing", writeArchive(t, append(append([]archiveEntry(nil), entries[:blob]...), entries[blob+1:]...)), nil, "no such entry"},
		{"an entry outside the layout", writeArchive(t, append([]archiveEntry{{"../evil", []byte("x")}}, entries...)), nil, "unexpected entry"},
		{"the manifest lies about the head", writeArchive(t, editManifest(t, entries, func(m map[string]any) {
			m["head_seq"] = m["head_seq"].(float64) + 1
		})), nil, "the checkpoint is of size"},
		{"the manifest lies about the root", writeArchive(t, editManifest(t, entries, func(m map[string]any) {
			r := m["merkle_root"].(string)
			m["merkle_root"] = strings.Repeat("0", 8) + r[8:]
		})), nil, "root"},
		{"the manifest lies about a blob's size", writeArchive(t, editManifest(t, entries, func(m map[string]any) {
			b := m["blobs"].([]any)[0].(map[string]any)
			b["size"] = b["size"].(float64) + 1
		})), nil, "the manifest names"},
		{"the manifest's checkpoint is not signed by its key", writeArchive(t, editManifest(t, entries, func(m map[string]any) {
			cp := m["checkpoint"].(string)
			i := strings.LastIndex(cp, " ") + 5
			m["checkpoint"] = cp[:i] + string(rune(cp[i]^1)) + cp[i+1:]
		})), nil, "checkpoint"},
		{"another format", writeArchive(t, editManifest(t, entries, func(m map[string]any) { m["format"] = 2 })), nil, "format 2"},
		{"signed by another key than --key", good, []string{"--key", strings.TrimSpace(otherKey.Stdout)}, "not by the --key given"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "data")
			res := proc.Exec(t, bin, append([]string{"restore", "--from", tc.file, "--data", dir}, tc.extra...)...)
			if res.Code == 0 || !strings.Contains(res.Stderr, tc.want) || !strings.Contains(res.Stderr, "nothing was written") {
				t.Fatalf("restore: exit %d, stderr %q; want a refusal naming %q", res.Code, res.Stderr, tc.want)
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Fatalf("a refused restore left %v behind", left)
			}
		})
	}
	t.Run("a non-empty target", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		res := proc.Exec(t, bin, "restore", "--from", good, "--data", dir)
		if res.Code == 0 || !strings.Contains(res.Stderr, "not empty") {
			t.Fatalf("restore into a non-empty dir: exit %d %q", res.Code, res.Stderr)
		}
		if left, _ := os.ReadDir(dir); len(left) != 1 {
			t.Fatalf("the target holds %v", left)
		}
	})
	t.Run("the intact archive into an empty target", func(t *testing.T) {
		dir := t.TempDir()
		res := proc.Exec(t, bin, "restore", "--from", good, "--data", dir)
		if res.Code != 0 {
			t.Fatalf("restore: exit %d %q", res.Code, res.Stderr)
		}
		if v := proc.Exec(t, bin, "verify", "--data", dir); v.Code != 0 {
			t.Fatalf("verify: %s", v.Stderr)
		}
	})
}

func TestBackupRefusesWhatItCannotCopy(t *testing.T) {
	bin := proc.Taskledger(t)
	s := proc.Serve(t, bin, "", "--device-rate", "0")
	out := filepath.Join(t.TempDir(), "b.tar")
	exists := filepath.Join(t.TempDir(), "exists.tar")
	if err := os.WriteFile(exists, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	badToken := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(badToken, []byte("tl_admin_not-a-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a cluster ledger", []string{"--ledger", "nats://127.0.0.1:4222", "--out", out}, "nats stream backup"},
		{"an existing file", []string{"--data", s.Data, "--out", exists}, "exists"},
		{"a running server's data offline", []string{"--data", s.Data, "--out", out}, "in use by another process"},
		{"no ledger", []string{"--data", t.TempDir(), "--out", out}, "no ledger"},
		{"an unknown token", []string{"--server", s.URL, "--token-file", badToken, "--out", out}, "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := proc.Exec(t, bin, append([]string{"backup"}, tc.args...)...)
			if res.Code != 1 || !strings.Contains(res.Stderr, tc.want) {
				t.Fatalf("backup %v: exit %d, stderr %q; want exit 1 naming %q", tc.args, res.Code, res.Stderr, tc.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("a refused backup left %s", out)
			}
			if _, err := os.Stat(out + ".partial"); !os.IsNotExist(err) {
				t.Fatalf("a refused backup left %s.partial", out)
			}
		})
	}
	if res := proc.Exec(t, bin, "restore", "--from", out, "--data", filepath.Join(t.TempDir(), "d"), "--ledger", "nats://x:1"); res.Code != 1 || !strings.Contains(res.Stderr, "migrate") {
		t.Fatalf("restore --ledger: exit %d %q", res.Code, res.Stderr)
	}
	if res := proc.Exec(t, bin, "restore", "--from", out, "--data", filepath.Join(t.TempDir(), "no", "such", "parent")); res.Code != 1 || !strings.Contains(res.Stderr, "parent directory") {
		t.Fatalf("restore under a missing parent: exit %d %q", res.Code, res.Stderr)
	}
}

func TestServeRefusesABadBackupSchedule(t *testing.T) {
	bin := proc.Taskledger(t)
	data := t.TempDir()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backup-dir", t.TempDir(), "--backup-every", "30s"}, "--backup-every: 30s is outside its bounds 1m0s – 720h0m0s"},
		{[]string{"--backup-dir", t.TempDir(), "--backup-every", "often"}, "--backup-every: \"often\" is not a duration"},
		{[]string{"--backup-dir", t.TempDir(), "--backup-keep", "0"}, "--backup-keep: \"0\" is outside its bounds 1 – 1000"},
		{[]string{"--backup-dir", filepath.Join(data, "backups")}, "is inside the data directory"},
		{[]string{"--backup-dir", filepath.Join(file, "sub")}, "--backup-dir"},
		{[]string{"--backup-dir", t.TempDir(), "--ledger", "nats://127.0.0.1:4222", "--advertise", "http://127.0.0.1:1"}, "--backup-dir is refused with --ledger"},
	} {
		res := proc.Exec(t, bin, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0"}, tc.args...)...)
		if res.Code != 1 || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want exit 1 naming %q", tc.args, res.Code, res.Stderr, tc.want)
		}
	}
	if ents, _ := os.ReadDir(data); len(ents) != 0 {
		t.Fatalf("a refused start wrote %v", ents)
	}
}
