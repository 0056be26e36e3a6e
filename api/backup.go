package api

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// BackupFunc writes a backup archive (package backup) to w from one
// consistent read of the log; it calls started with the copy's head seq
// and the archive's expected size before its first byte, and may fail
// before that (an error answer) or after (the stream is cut short, which
// the client detects: the manifest comes last).
type BackupFunc func(w io.Writer, started func(headSeq uint64, size int64)) error

// backupWriteTimeout cuts off a client that stops reading, which also ends
// the read transaction the backup holds.
const backupWriteTimeout = 30 * time.Second

// backup: GET /admin/backup — the backup archive (application/x-tar),
// streamed from one read transaction while the server keeps serving. A
// node without a bbolt log (a cluster node) answers 404 like the other
// transparency routes.
func (s *Server) backup(c echo.Context) error {
	if s.backupFn == nil {
		return errNotFound
	}
	if len(c.QueryParams()) > 0 {
		return invalid("this route takes no query parameter")
	}
	w := c.Response()
	rc := http.NewResponseController(w.Writer)
	dw := &deadlineWriter{w: w, rc: rc}
	err := s.backupFn(dw, func(headSeq uint64, size int64) {
		h := w.Header()
		h.Set("Content-Type", "application/x-tar")
		h.Set("Content-Disposition", `attachment; filename="taskledger-backup-`+strconv.FormatUint(headSeq, 10)+`.tar"`)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		h.Set("X-Backup-Head-Seq", strconv.FormatUint(headSeq, 10))
		h.Set("X-Backup-Size", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
	})
	if err != nil && w.Committed {
		s.log.Error().Err(err).Msg("backup stream cut short")
		return nil
	}
	return err
}

// deadlineWriter extends the connection's write deadline before each
// write: a slow client is served, one that stops reading is cut off.
type deadlineWriter struct {
	w  *echo.Response
	rc *http.ResponseController
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(backupWriteTimeout)) // tl:wallclock (a network deadline, not ledger time)
	return d.w.Write(b)
}
