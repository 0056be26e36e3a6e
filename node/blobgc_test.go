package node_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

func gcImage(t *testing.T, seed uint8, asPNG bool) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for x := range 4 {
		for y := range 4 {
			img.Set(x, y, color.RGBA{R: seed * 60, G: 3, B: 9, A: 255})
		}
	}
	var b bytes.Buffer
	var err error
	if asPNG {
		err = png.Encode(&b, img)
	} else {
		err = jpeg.Encode(&b, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gcSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// syncBuffer is a log sink safe for the node's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func blobNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, ledger.BlobDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// Start removes what crashed or refused uploads left in blobs/ (temporary
// files, blobs no committed event references) and logs how many; every
// blob an event references stays, a replaced reference image included,
// and verify still passes.
func TestStartCollectsOrphanedBlobs(t *testing.T) {
	n := nodetest.Start(t)
	id := n.CreateTask(map[string]any{"k": 1})
	old, current := gcImage(t, 1, false), gcImage(t, 2, false)
	for _, img := range [][]byte{old, current} {
		nodetest.Must(t, n.Do("PUT", "/api/v1/admin/tasks/"+id+"/reference-image", n.AdminToken, img,
			map[string]string{"Content-Type": "image/jpeg"}), 200)
	}
	d := n.RegisterDevice()
	run := n.StartTask(t, d, map[string]any{"k": 2})
	shot := gcImage(t, 3, true)
	up := n.Do("POST", "/api/v1/device/tasks/"+run.TaskID+"/evidence", d.Token, shot, map[string]string{
		"Content-Type": "image/png", "X-Claim-Token": run.Token, "X-Claim-Generation": "1",
		"X-Execution-Id": run.ExecutionID, "X-Evidence-Kind": "screenshot", "X-Captured-At": "2026-03-01T10:00:00.000Z"})
	nodetest.Must(t, up, 201)

	// What a crash leaves: temporary files, and a blob renamed into place
	// whose event was never committed.
	blobs := filepath.Join(n.Dir, ledger.BlobDir)
	orphan := gcImage(t, 4, true)
	files := map[string][]byte{".upload-123.tmp": make([]byte, 100), gcSHA(orphan) + ".456.tmp": orphan,
		gcSHA(orphan): orphan, "README": []byte("not a blob")}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(blobs, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	m := n.Restart(func(c *node.Config) { c.Logger = zerolog.New(&logs) })
	want := []string{gcSHA(old), gcSHA(current), gcSHA(shot), "README"}
	sort.Strings(want)
	if got := blobNames(t, m.Dir); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("blobs after start: %v, want %v", got, want)
	}
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "collected orphaned blobs") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line == nil || line["temporary"] != 2.0 || line["unreferenced"] != 1.0 || line["bytes"] != float64(100+2*len(orphan)) {
		t.Fatalf("log line %v in %s", line, logs.String())
	}
	// The survivors are served.
	img := m.Do("GET", "/api/v1/admin/tasks/"+id+"/reference-image", m.AdminToken, nil, nil)
	if img.Status != 200 || !bytes.Equal(img.Body, current) {
		t.Fatalf("reference image after start: %d", img.Status)
	}
	ev := m.Task(run.TaskID)["evidence"].([]any)[0].(map[string]any)
	got := m.Do("GET", "/api/v1/admin/tasks/"+run.TaskID+"/evidence/"+nodetest.Str(ev, "evidence_id"), m.AdminToken, nil, nil)
	if got.Status != 200 || !bytes.Equal(got.Body, shot) {
		t.Fatalf("evidence after start: %d", got.Status)
	}
	// A second start finds nothing more to collect.
	logs = syncBuffer{}
	m = m.Restart(func(c *node.Config) { c.Logger = zerolog.New(&logs) })
	if !strings.Contains(logs.String(), `"temporary":0,"unreferenced":0,"bytes":0`) {
		t.Fatalf("second start: %s", logs.String())
	}
	m.Close()
	store, err := ledger.Open(m.Dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := node.Verify(store, projections.Config{IdempotencyRetentionMs: 72 * 3600 * 1000}, nil); err != nil {
		t.Fatalf("verify after the collection: %v", err)
	}
}
