package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"

	"taskledger/commands"
	"taskledger/projections"
)

// pngHeadLen is how much of a PNG checkPNG reads: signature and IHDR.
const pngHeadLen = 33

// evidence: POST /device/tasks/{id}/evidence (one PNG).
//
// Nothing reaches the data directory before the claim is checked: the
// headers, then the call against the committed projections (claim, token,
// generation, lease, state, execution), then the device's upload quota;
// only then is the body streamed to a temporary file in blobs/, hashed as
// it comes and bounded by the route's limit, and renamed to its SHA-256
// once it is whole and the claim still holds. A refusal at any point
// removes the temporary file; a blob renamed for a command the sequencer
// then refuses is removed unless it existed before or another writer kept
// it (see ledger.BlobRef).
func (s *Server) evidence(c echo.Context) error {
	hd, err := checkHead(c, evidencePNG)
	if err != nil {
		return err
	}
	key, tok := hd.key, hd.token
	gen, err := generationHeader(c)
	if err != nil {
		return err
	}
	h := c.Request().Header
	exec := h.Get("X-Execution-Id")
	if !isUUIDv4(exec) {
		return invalid("X-Execution-Id must be a canonical lowercase UUIDv4")
	}
	kind := h.Get("X-Evidence-Kind")
	if kind != "screenshot" {
		return invalid("X-Evidence-Kind must be screenshot")
	}
	captured, err := parseTime(h.Get("X-Captured-At"))
	if err != nil {
		return invalid("X-Captured-At must be an RFC 3339 UTC time with at most millisecond precision")
	}
	taskID := c.Param("id")
	tokHash := commands.HashToken(tok)
	cmd := &commands.TaskCall{Op: commands.OpEvidence, Device: principal(c), TaskID: taskID, Key: key, TokenHash: tokHash,
		Generation: gen, ExecutionID: exec}
	finish := func(sha string, size int64) {
		cmd.Evidence = &projections.Evidence{SHA256: sha, Size: size, Kind: kind, CapturedAt: captured}
		cmd.Fingerprint = fingerprint(commands.OpEvidence, taskID, sha, strconv.FormatUint(gen, 10), exec, kind,
			strconv.FormatInt(captured, 10), tokHash)
	}
	recorded, err := s.evidenceAccess(cmd)
	if err != nil {
		// Body validation still comes before the state's refusal, but the
		// body is only read, never stored: its first bytes (the PNG
		// header) and, without a Content-Length, its size. The rest
		// (bounded by the limit) is read into nothing so that the client,
		// still sending, reads the answer instead of a reset.
		berr := refuseBody(c, evidencePNG.limit)
		_, _ = io.Copy(io.Discard, io.LimitReader(c.Request().Body, evidencePNG.limit+1))
		if berr != nil {
			return berr
		}
		return err
	}
	if recorded {
		// A replay or a conflict: the fingerprint needs the body's hash,
		// not its bytes on disk.
		sha, size, err := streamPNG(c, evidencePNG.limit, io.Discard)
		if err != nil {
			return err
		}
		finish(sha, size)
		cmd.RecordedOnly = true
		res, err := s.do(c, cmd)
		if err != nil {
			return err
		}
		return s.answerDevice(c, res)
	}
	release, err := s.uploads.reserve(c, cmd.Device.DeviceID, declaredSize(c, evidencePNG.limit))
	if err != nil {
		return err
	}
	defer release()
	up, err := s.blobs.Create()
	if err != nil {
		return s.blobFailed(err)
	}
	defer up.Abort()
	if _, _, err := streamPNG(c, evidencePNG.limit, up); err != nil {
		var se *storeError
		if errors.As(err, &se) {
			return s.blobFailed(se.err)
		}
		return err
	}
	// The claim may have ended while the body came: check again before the
	// blob takes its name (a key recorded meanwhile is decided below).
	if _, err := s.evidenceAccess(cmd); err != nil {
		return err
	}
	ref, err := up.Commit()
	if err != nil {
		return s.blobFailed(err)
	}
	finish(ref.SHA256(), ref.Size())
	res, err := s.do(c, cmd)
	if _, rerr := ref.Release(mayBeCommitted(err)); rerr != nil {
		s.log.Warn().Err(rerr).Msg("a refused upload's blob could not be removed; the next start collects it")
	}
	if err != nil {
		return err
	}
	return s.answerDevice(c, res)
}

// evidenceAccess is the read-only check of an upload against the
// committed projections (commands.TaskCall.Precheck).
func (s *Server) evidenceAccess(cmd *commands.TaskCall) (recorded bool, err error) {
	if !isUUIDv4(cmd.TaskID) {
		return false, commands.ErrClaimNotFound
	}
	s.eng.ReadNow(func(st *projections.State, now int64) {
		recorded, err = cmd.Precheck(st, now, s.eng.Config())
	})
	return recorded, err
}

// mayBeCommitted says whether a command that answered err may have
// appended its event: yes when it was accepted, and when its outcome is
// not known (a failed commit, an internal error); no for a refusal.
func mayBeCommitted(err error) bool {
	if err == nil {
		return true
	}
	return isUnavailable(err) || toAPIError(err).Status >= 500
}

// storeError is a failed write of the blob (not of the request).
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }

var errBodyRead = invalid("could not read the body")

// streamPNG copies the request body into w, at most limit bytes: the PNG
// header is checked before the first byte is written, the SHA-256 and
// size are computed on the way. A body over the limit is
// body_too_large (found before anything else when the body is not a PNG
// and has no Content-Length, as readBody would), a body that is not a PNG
// invalid_png; a failed write of w is a *storeError.
func streamPNG(c echo.Context, limit int64, w io.Writer) (string, int64, error) {
	body := io.LimitReader(c.Request().Body, limit+1)
	head := make([]byte, pngHeadLen)
	n, err := io.ReadFull(body, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", 0, errBodyRead
	}
	if perr := checkPNG(head[:n]); perr != nil {
		if n == pngHeadLen && c.Request().ContentLength < 0 {
			if tooLarge, rerr := drainOver(body, limit-int64(n)); rerr != nil {
				return "", 0, errBodyRead
			} else if tooLarge {
				return "", 0, errBodyTooLarge
			}
		}
		return "", 0, perr
	}
	h := sha256.New()
	if _, err := w.Write(head); err != nil {
		return "", 0, &storeError{err}
	}
	h.Write(head)
	size := int64(n)
	buf := make([]byte, 64<<10)
	for {
		m, rerr := body.Read(buf)
		if m > 0 {
			if size+int64(m) > limit {
				return "", 0, errBodyTooLarge
			}
			if _, err := w.Write(buf[:m]); err != nil {
				return "", 0, &storeError{err}
			}
			h.Write(buf[:m])
			size += int64(m)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return "", 0, errBodyRead
		}
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}

// drainOver reads r to its end, keeping nothing, and reports whether it
// held more than room bytes (it stops reading past room).
func drainOver(r io.Reader, room int64) (bool, error) {
	n, err := io.Copy(io.Discard, io.LimitReader(r, room+1))
	if err != nil {
		return false, err
	}
	return n > room, nil
}

// refuseBody finds the body's own refusal of a request refused by state
// (body validation comes first) without storing it: the PNG header, and,
// when there is no Content-Length, whether the body is over the limit.
func refuseBody(c echo.Context, limit int64) error {
	r := c.Request()
	if r.ContentLength >= 0 {
		head := make([]byte, pngHeadLen)
		n, err := io.ReadFull(io.LimitReader(r.Body, pngHeadLen), head)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return errBodyRead
		}
		return checkPNG(head[:n])
	}
	_, _, err := streamPNG(c, limit, io.Discard)
	return err
}

// declaredSize is what an upload reserves of the device's quota: its
// Content-Length, or the route's limit when the body is chunked.
func declaredSize(c echo.Context, limit int64) int64 {
	if n := c.Request().ContentLength; n >= 0 && n <= limit {
		return n
	}
	return limit
}

// uploadQuota bounds the bytes each device has in flight to the data
// directory (uploads between their reservation and their answer).
type uploadQuota struct {
	mu       sync.Mutex
	limit    int64 // 0: off
	inflight map[string]int64
	limiter  *limiter
}

// reserve takes n bytes of the device's quota, or refuses with 429
// rate_limited and Retry-After when they are not free; release gives them
// back.
func (q *uploadQuota) reserve(c echo.Context, device string, n int64) (release func(), err error) {
	q.mu.Lock()
	limit := q.limit
	if limit <= 0 {
		q.mu.Unlock()
		return func() {}, nil
	}
	if q.inflight[device]+n > limit {
		q.mu.Unlock()
		return nil, q.limiter.refuse(c, LimitUpload, 0)
	}
	q.inflight[device] += n
	q.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			if q.inflight[device] -= n; q.inflight[device] <= 0 {
				delete(q.inflight, device)
			}
		})
	}, nil
}

// setLimit changes the quota (SetLimits).
func (q *uploadQuota) setLimit(n int64) {
	q.mu.Lock()
	q.limit = n
	q.mu.Unlock()
}

// serveBlob answers a stored blob. A blob the log references that is
// missing, damaged (it no longer hashes to its name) or unreadable is a
// storage fault: 503 with Retry-After and an empty body, never a 500 and
// never the damaged bytes; the log names the blob for the operator.
func (s *Server) serveBlob(c echo.Context, sha, contentType string) error {
	data, err := s.blobs.Get(sha)
	if err != nil {
		s.log.Error().Err(err).Str("blob", sha).Str("route", c.Path()).
			Msg("a referenced blob is missing or damaged: answering 503 (restore blobs/ from a backup; taskledger verify names every damaged blob)")
		return commands.ErrUnavailable
	}
	c.Response().Header().Set("Cache-Control", "private, no-store")
	return c.Blob(http.StatusOK, contentType, data)
}
