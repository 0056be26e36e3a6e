package api

import (
	"bytes"
	"net/http"

	"github.com/labstack/echo/v4"

	"taskledger/ledger"
)

// rawLog: GET /admin/log?after=&limit= — the stored envelopes of the log
// in seq order, each the exact bytes its hash was computed over (base64),
// so that a client checks the whole hash chain, the canonical encoding
// and every invariant itself (`taskledger verify --server`) without
// trusting this server for anything but availability. Envelopes carry
// token and fingerprint hashes, never a token.
func (s *Server) rawLog(c echo.Context) error {
	after, limit, err := logPage(c, 1000)
	if err != nil {
		return err
	}
	type entry struct {
		Seq      uint64 `json:"seq"`
		Envelope []byte `json:"envelope"`
	}
	out := make([]entry, 0, min(limit, 64))
	next := uint64(after)
	err = s.events.RangeRaw(uint64(after), func(seq uint64, raw []byte) error {
		out = append(out, entry{Seq: seq, Envelope: bytes.Clone(raw)})
		next = seq
		if len(out) == int(limit) {
			return ledger.ErrStop
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"envelopes": out, "next_after": next})
}
