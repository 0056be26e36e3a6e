package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"taskledger/api"
)

// The contract check of every test node: each answer the server gives is
// validated against the OpenAPI document (api.OpenAPI) with kin-openapi's
// openapi3filter, and so is each request the server accepted (2xx; the
// tests send malformed requests on purpose, and their refusals are checked
// as answers). A route, status, header, field or code the document does
// not declare fails the test that caused it.

var (
	docOnce   sync.Once
	docRouter routers.Router
	docErr    error
)

// OpenAPIRouter loads the document once and returns its router.
func OpenAPIRouter() (routers.Router, error) {
	docOnce.Do(func() {
		for _, ct := range []string{"text/html", "text/css", "text/javascript", "image/svg+xml"} {
			openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
		}
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(api.OpenAPI)
		if err != nil {
			docErr = fmt.Errorf("load openapi.json: %w", err)
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			docErr = fmt.Errorf("openapi.json is not a valid OpenAPI document: %w", err)
			return
		}
		doc.Servers = nil // match any host (httptest picks a port)
		docRouter, docErr = gorillamux.NewRouter(doc)
	})
	return docRouter, docErr
}

// validating wraps h: every exchange is checked and a violation reported
// through report.
func validating(h http.Handler, report func(string, ...any)) http.Handler {
	router, err := OpenAPIRouter()
	if err != nil {
		report("nodetest: %v", err)
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events/stream") {
			h.ServeHTTP(w, r) // a stream that does not end: not buffered, not validated
			return
		}
		// The handler reads the body as it comes (uploads stream it); the
		// copy of what it read is validated afterwards.
		var seen bytes.Buffer
		r.Body = teeBody{io.TeeReader(r.Body, &seen), r.Body}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := seen.Bytes()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())

		check := r.Clone(context.Background())
		check.Body = io.NopCloser(bytes.NewReader(body))
		route, params, err := router.FindRoute(check)
		if err != nil {
			if rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed {
				return // an undeclared path or method, refused as it should be
			}
			report("openapi: %s %s answered %d but the document has no such operation: %v", r.Method, r.URL.Path, rec.Code, err)
			return
		}
		in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
		if rec.Code/100 == 2 {
			if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
				report("openapi: %s %s was accepted (%d) but the request does not conform: %v", r.Method, r.URL.Path, rec.Code, err)
			}
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
		out.SetBodyBytes(rec.Body.Bytes())
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			report("openapi: %s %s answered %d %s which does not conform: %v", r.Method, r.URL.Path, rec.Code, truncate(rec.Body.Bytes()), err)
		}
	})
}

// teeBody is a request body that keeps a copy of what was read.
type teeBody struct {
	io.Reader
	io.Closer
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
