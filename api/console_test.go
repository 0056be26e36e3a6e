package api_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

// The console's files are served without data, under a CSP that allows
// only the page's own files (no inline script or style, no framing), and
// the page itself holds no inline script or style.
func TestConsoleServesItsFilesUnderAStrictPolicy(t *testing.T) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	id := n.CreateTask(map[string]any{"secret_marker": "x"})
	for path, typ := range map[string]string{"/console/": "text/html", "/console/app.js": "text/javascript",
		"/console/style.css": "text/css", "/console/favicon.svg": "image/svg+xml"} {
		r := n.Do("GET", path, "", nil, nil)
		nodetest.Must(t, r, http.StatusOK)
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, typ) {
			t.Errorf("%s: content type %q", path, ct)
		}
		csp := r.Header.Get("Content-Security-Policy")
		if strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			!strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: policy %q", path, csp)
		}
		for _, leak := range []string{id, d.ID, d.Token, n.AdminToken, "secret_marker"} {
			if strings.Contains(string(r.Body), leak) {
				t.Errorf("%s contains %q", path, leak)
			}
		}
	}
	page := string(n.Do("GET", "/console/", "", nil, nil).Body)
	if regexp.MustCompile(`<script[^>]*>\s*[^<\s]`).MatchString(page) || strings.Contains(page, "<style") ||
		regexp.MustCompile(`\son[a-z]+=`).MatchString(page) || strings.Contains(page, "style=") {
		t.Error("the page holds inline script or style")
	}
	if js := string(n.Do("GET", "/console/app.js", "", nil, nil).Body); strings.Contains(js, "innerHTML") ||
		strings.Contains(js, "localStorage") || strings.Contains(js, "insertAdjacentHTML") {
		t.Error("app.js inserts HTML or uses localStorage")
	}
}

// / redirects to the console; unknown or traversing console paths are 404.
func TestConsoleRoutes(t *testing.T) {
	n := nodetest.Start(t)
	client := *n.HTTP
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for path, want := range map[string]string{"/": "/console/", "/console": "/console/", "/favicon.ico": "/console/favicon.svg"} {
		res, err := client.Get(n.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode/100 != 3 || res.Header.Get("Location") != want {
			t.Errorf("%s: %d → %q, want a redirect to %s", path, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
	for _, path := range []string{"/console/nope.js", "/console/../console.go", "/console/console/app.js", "/console/index.txt"} {
		if r := n.Do("GET", path, "", nil, nil); r.Status != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, r.Status)
		}
	}
}
