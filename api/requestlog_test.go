package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
)

// Writing the request line allocates nothing: a request logged at info
// costs the same allocations as one with logging off (the request id
// and its header are the only ones requestLog makes).
func TestRequestLogLineAllocatesNothing(t *testing.T) {
	allocs := func(log zerolog.Logger) float64 {
		s := &Server{log: log}
		e := echo.New()
		h := s.requestLog(func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
		req := httptest.NewRequest("POST", "/api/v1/device/heartbeat", nil)
		rec := httptest.NewRecorder()
		c := e.NewContext(req, rec)
		return testing.AllocsPerRun(200, func() {
			c.Reset(req, rec)
			rec.Header().Del("X-Request-Id")
			_ = h(c)
		})
	}
	var out bytes.Buffer
	logged := zerolog.New(&out).With().Timestamp().Logger()
	on, off := allocs(logged), allocs(zerolog.Nop())
	if on != off {
		t.Errorf("a logged request makes %.0f allocations, an unlogged one %.0f", on, off)
	}
	if !bytes.Contains(out.Bytes(), []byte(`"message":"request"`)) || !bytes.Contains(out.Bytes(), []byte(`"status":204`)) {
		t.Errorf("no request line written: %q", out.String())
	}
}
