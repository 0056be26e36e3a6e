package api

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

//go:embed console/index.html
var consoleHTML []byte

// console serves the operator console: one static page. It holds no data
// and needs no credential; the operator's admin token stays in the
// browser tab and is sent only as a bearer header to the admin API.
func console(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	return c.HTMLBlob(http.StatusOK, consoleHTML)
}
