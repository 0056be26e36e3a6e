package agent

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"taskledger/client"
)

// stderrTailSize is how much of the work command's stderr the agent keeps
// for a failure: the last 4 KiB.
const stderrTailSize = 4096

// maxDetail is the server's bound on a failure detail (bytes).
const maxDetail = 256

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String is the kept tail as one line of printable text: valid UTF-8,
// control characters as spaces, runs of spaces collapsed.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.ToValidUTF8(string(t.b), "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// failureDetail is base followed by as much of the end of the stderr
// tail as fits the server's bound, cut at a character boundary.
func failureDetail(base, tail string) string {
	if tail == "" {
		return truncate(base, maxDetail)
	}
	room := maxDetail - len(base) - len("; stderr: …")
	if room <= 0 {
		return truncate(base, maxDetail)
	}
	if len(tail) <= room {
		return base + "; stderr: " + tail
	}
	cut := len(tail) - room
	for cut < len(tail) && !utf8.RuneStart(tail[cut]) {
		cut++
	}
	return base + "; stderr: …" + tail[cut:]
}

// clearEvidence removes a file left at the evidence path before a run, so
// only a file the work command wrote is uploaded.
func (r *runner) clearEvidence() error {
	if r.evidence == "" {
		return nil
	}
	if err := os.Remove(r.evidence); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// uploadEvidence uploads the PNG the work command left at the evidence
// path, if any, to the running execution. A file that is not a PNG (or is
// too large) is logged and not sent; an outcome not yet known keeps the
// upload pending, replayed before the task's next call.
func (r *runner) uploadEvidence(ctx context.Context, taskID string) {
	if r.evidence == "" {
		return
	}
	st, err := os.Stat(r.evidence)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		r.log.Warn("evidence not readable", "task", taskID, "err", err.Error())
		return
	}
	res, err := r.sink.UploadEvidence(ctx, r.evidence, st.ModTime())
	if err != nil {
		if errors.Is(err, client.ErrUnknownOutcome) {
			r.log.Warn("evidence upload outcome unknown, kept for replay", "task", taskID)
			return
		}
		r.log.Warn("evidence not uploaded", "task", taskID, "err", err.Error())
		return
	}
	r.log.Info("evidence uploaded", "task", taskID, "evidence", res.EvidenceID, "sha256", res.SHA256, "size", res.Size)
}
