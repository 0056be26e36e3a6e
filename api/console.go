package api

import (
	"embed"
	"net/http"
	"path"

	"github.com/labstack/echo/v4"
)

// consoleFiles is the operator console: static files, no build step, no
// dependency (decision D61). The page holds no data and needs no
// credential; the operator's admin token stays in the tab's
// sessionStorage and is sent only as a bearer header to the admin API.
//
//go:embed console/index.html console/app.js console/style.css console/favicon.svg
var consoleFiles embed.FS

// consoleCSP allows the page's own files and nothing else: no inline
// script or style, no other origin, no framing.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var consoleTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// console serves GET /console/ and /console/{file}.
func console(c echo.Context) error {
	name := c.Param("*")
	if name == "" {
		name = "index.html"
	}
	data, err := consoleFiles.ReadFile("console/" + name)
	typ, known := consoleTypes[path.Ext(name)]
	if err != nil || !known || path.Clean(name) != name {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	return c.Blob(http.StatusOK, typ, data)
}
