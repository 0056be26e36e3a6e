package device

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"taskledger/client"
	"taskledger/client/localstate"
	"taskledger/client/secretstore"
)

// A 409 with a fixed code goes to a person; no new key is ever tried.
func TestClaimRequiresManualGoesToAPerson(t *testing.T) {
	r := newRig(t)
	task := r.srv.NewTask(t, map[string]any{"n": 5})
	if out, err := r.dev.Claim(ctx); err != nil || out.Active.TaskID != task {
		t.Fatalf("%+v %v", out, err)
	}
	if _, err := r.dev.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// A second state for the same device (another session) asks for work:
	// the device holds a started task → claim_requires_manual.
	dir2 := t.TempDir()
	tf := filepath.Join(dir2, "tok")
	os.WriteFile(tf, []byte(r.token), 0o600)
	if err := Enroll(EnrollOptions{StateDir: filepath.Join(dir2, "s"), ServerURL: r.proxy.URL, DeviceID: r.deviceID,
		TokenFile: tf, KeyFile: filepath.Join(dir2, "k")}); err != nil {
		t.Fatal(err)
	}
	dev2, err := Open(Options{StateDir: filepath.Join(dir2, "s")})
	if err != nil {
		t.Fatal(err)
	}
	defer dev2.Close()
	_, err = dev2.Claim(ctx)
	var np *NeedsPersonError
	if !errors.As(err, &np) || np.Code != client.CodeClaimRequiresManual {
		t.Fatalf("%v", err)
	}
	before := len(r.claims())
	for i := 0; i < 3; i++ {
		if _, err := dev2.Claim(ctx); !errors.Is(err, ErrNeedsPerson) {
			t.Fatalf("%v", err)
		}
	}
	if len(r.claims()) != before {
		t.Fatal("a claim was sent after claim_requires_manual")
	}
	if st := dev2.State(); len(st.Manual) != 1 || st.Pending != nil {
		t.Fatalf("%+v", st)
	}
}

// 401 stops and keeps the key; enrolling new credentials for the same
// identity is allowed while the claim is pending, another server is not.
func TestUnauthorizedKeepsKeyAndIdentityIsLocked(t *testing.T) {
	r := newRig(t)
	r.srv.NewTask(t, map[string]any{"n": 6})
	r.srv.MustDo(t, "POST", "/admin/devices/"+r.deviceID+"/revoke", map[string]any{"reason": "test"})
	_, err := r.dev.Claim(ctx)
	if !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("%v", err)
	}
	key := r.dev.State().Pending.Key
	_, err = r.dev.Claim(ctx)
	if !errors.Is(err, client.ErrUnauthorized) || r.dev.State().Pending.Key != key {
		t.Fatalf("%v", err)
	}
	sameKey(t, r.claims(), 2)
	r.dev.Close()
	tf := filepath.Join(t.TempDir(), "tok")
	os.WriteFile(tf, []byte("tldev_other"), 0o600)
	err = Enroll(EnrollOptions{StateDir: r.dir, ServerURL: "http://127.0.0.1:1", DeviceID: r.deviceID, TokenFile: tf})
	if !errors.Is(err, localstate.ErrIdentityLocked) {
		t.Fatalf("server switch with a pending claim: %v", err)
	}
	err = Enroll(EnrollOptions{StateDir: r.dir, ServerURL: r.proxy.URL, DeviceID: "7d1b2c3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d", TokenFile: tf})
	if !errors.Is(err, localstate.ErrIdentityLocked) {
		t.Fatalf("device switch with a pending claim: %v", err)
	}
	if err := Enroll(EnrollOptions{StateDir: r.dir, ServerURL: r.proxy.URL, DeviceID: r.deviceID, TokenFile: tf}); err != nil {
		t.Fatalf("new token, same identity: %v", err)
	}
	r.open(t)
	if st := r.dev.State(); st.Pending == nil || st.Pending.Key != key {
		t.Fatal("re-enrollment lost the pending claim")
	}
}

// A flipped byte in the sealed device token, in a sealed claim token, or in
// the key file: a clear error and not a single request.
func TestDamagedSecretsSendNothing(t *testing.T) {
	r := newRig(t)
	r.srv.NewTask(t, map[string]any{"n": 7})
	if _, err := r.dev.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	r.dev.Close()
	keyFile := filepath.Join(filepath.Dir(r.dir), "agent.key")
	flip := []func(*testing.T) func(){
		func(t *testing.T) func() {
			return mutate(t, r.dir, func(st *localstate.Change, s *localstate.State) {
				s.Identity.SealedToken[10] ^= 1
				st.Identity = s.Identity
			})
		},
		func(t *testing.T) func() {
			return mutate(t, r.dir, func(st *localstate.Change, s *localstate.State) { s.Active.SealedToken[20] ^= 1; st.Active = s.Active })
		},
		func(t *testing.T) func() {
			orig, _ := os.ReadFile(keyFile)
			bad := bytes.Replace(orig, orig[len(orig)-5:len(orig)-4], []byte{orig[len(orig)-5] ^ 1}, 1)
			os.WriteFile(keyFile, bad, 0o600)
			return func() { os.WriteFile(keyFile, orig, 0o600) }
		},
	}
	for i, f := range flip {
		undo := f(t)
		before := len(r.proxy.Seen())
		var sent int
		d, err := Open(Options{StateDir: r.dir, OnSend: func(string) { sent++ }})
		if err == nil {
			d.Close()
			t.Fatalf("case %d: damaged secret accepted", i)
		}
		if !errors.Is(err, secretstore.ErrDecrypt) && !errors.Is(err, secretstore.ErrBadKeyFile) {
			t.Fatalf("case %d: unclear error %v", i, err)
		}
		if strings.Contains(err.Error(), r.token) || sent != 0 || len(r.proxy.Seen()) != before {
			t.Fatalf("case %d: %v, %d sent", i, err, sent)
		}
		undo()
	}
	r.open(t)
}

// mutate edits the stored state directly and returns an undo.
func mutate(t *testing.T, dir string, f func(*localstate.Change, *localstate.State)) func() {
	t.Helper()
	s, err := localstate.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, _ := s.Load()
	orig, _ := s.Load()
	var ch localstate.Change
	f(&ch, st)
	if err := s.Apply(ch); err != nil {
		t.Fatal(err)
	}
	return func() {
		s, err := localstate.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.Apply(localstate.Change{Identity: orig.Identity, Active: orig.Active})
	}
}

// writePNG writes a minimal valid PNG (1×1) with extra bytes in a tEXt
// chunk so files differ.
func writePNG(t *testing.T, path, text string) {
	t.Helper()
	var b bytes.Buffer
	b.Write([]byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'})
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	chunk("IHDR", []byte{0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0})
	chunk("tEXt", []byte("c\x00"+text))
	chunk("IDAT", []byte{0x78, 0x9c, 0x62, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01})
	chunk("IEND", nil)
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEvidence(t *testing.T) {
	r := newRig(t, rule{"/evidence", 0, 1 /* Drop */})
	task := r.srv.NewTask(t, map[string]any{"n": 8})
	if _, err := r.dev.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.dev.Start(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	png := filepath.Join(dir, "shot.png")
	writePNG(t, png, "one")
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	_, err := r.dev.UploadEvidence(ctx, png, at)
	mustUnknown(t, err)
	p := r.dev.State().Pending
	if p == nil || p.SHA256 == "" || p.Size == 0 || p.Path != png {
		t.Fatalf("evidence not recorded before upload: %+v", p)
	}
	res, err := r.dev.UploadEvidence(ctx, png, at)
	if err != nil || res.SHA256 != p.SHA256 || res.Size != p.Size {
		t.Fatalf("%+v %v", res, err)
	}
	sameKey(t, r.seen("/evidence"), 2)
	ev := r.srv.Task(t, task)["evidence"].([]any)
	if len(ev) != 1 {
		t.Fatalf("server evidence %v", ev)
	}
	// Only .png, only regular files, no directories.
	for _, bad := range []string{filepath.Join(dir, "x.jpg"), dir, filepath.Join(dir, "missing.png")} {
		os.WriteFile(filepath.Join(dir, "x.jpg"), []byte("x"), 0o600)
		if _, err := r.dev.UploadEvidence(ctx, bad, at); !errors.Is(err, ErrEvidence) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
	notPNG := filepath.Join(dir, "fake.png")
	os.WriteFile(notPNG, bytes.Repeat([]byte("x"), 100), 0o600)
	if _, err := r.dev.UploadEvidence(ctx, notPNG, at); !errors.Is(err, ErrEvidence) {
		t.Fatal(err)
	}
	if n := len(r.seen("/evidence")); n != 2 {
		t.Fatalf("refused files were sent: %d", n)
	}
}

// A file that changes between recording and a replay stops the upload.
func TestEvidenceChangedFileStops(t *testing.T) {
	r := newRig(t, rule{"/evidence", 0, 4 /* Unavailable */})
	r.srv.NewTask(t, map[string]any{"n": 9})
	if _, err := r.dev.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.dev.Start(ctx); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(t.TempDir(), "shot.png")
	writePNG(t, png, "before")
	_, err := r.dev.UploadEvidence(ctx, png, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	mustUnknown(t, err)
	writePNG(t, png, "after!")
	if _, err := r.dev.UploadEvidence(ctx, png, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)); !errors.Is(err, ErrEvidence) {
		t.Fatalf("%v", err)
	}
	if n := len(r.seen("/evidence")); n != 1 || r.dev.State().Pending != nil {
		t.Fatalf("changed file uploaded (%d) or left pending", n)
	}
}
