package nodetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"taskledger/api"
)

func TestOpenAPIDocumentIsValid31(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document does not validate: %v", err)
	}
	for _, p := range []string{"/api/v1/admin/events/stream", "/api/v1/device/tasks/{task_id}/evidence", "/healthz", "/metrics",
		"/api/v1/admin/tasks/{task_id}/reference-image", "/api/v1/openapi.json"} {
		if doc.Paths.Find(p) == nil {
			t.Errorf("the document lacks %s", p)
		}
	}
}

func TestOpenAPIServedWithoutToken(t *testing.T) {
	n := Start(t)
	r := n.Do("GET", "/api/v1/openapi.json", "", nil, nil)
	if r.Status != 200 || !bytes.Equal(r.Body, api.OpenAPI) || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/v1/openapi.json: %d %q", r.Status, r.Header.Get("Content-Type"))
	}
}

// The validator must catch what the document does not declare.
func TestValidatorRefusesUndeclaredAnswers(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"undeclared field", "GET", "/healthz", `{"status":"ok","extra":1}`, 200, "extra"},
		{"undeclared status", "GET", "/healthz", `{"status":"ok"}`, 418, "418"},
		{"undeclared code", "GET", "/api/v1/admin/tasks/x", `{"code":"made_up","message":"m"}`, 404, "made_up"},
		{"undeclared operation", "DELETE", "/healthz", `{}`, 200, "no such operation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			h := validating(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			}), func(f string, a ...any) { got = append(got, fmt.Sprintf(f, a...)) })
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, c.path, nil))
			if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), c.want) {
				t.Fatalf("reports %q, want one naming %q", got, c.want)
			}
		})
	}
	// A conforming answer reports nothing.
	var got []string
	h := validating(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`)
	}), func(f string, a ...any) { got = append(got, fmt.Sprintf(f, a...)) })
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	if len(got) != 0 {
		t.Fatalf("a conforming answer was reported: %q", got)
	}
}

// TestOpenAPIDocumentServesGenerators holds what third-party generators
// need of the document: every operation has a unique, stable operationId
// and says its security (public routes `security: []`), and every enum
// names its constants (x-enum-varnames) so no generator derives a bare
// name that collides with one of its own (oapi-codegen's `Client`).
func TestOpenAPIDocumentServesGenerators(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			switch {
			case op.OperationID == "":
				t.Errorf("%s has no operationId", where)
			case ids[op.OperationID] != "":
				t.Errorf("%s and %s share the operationId %q", where, ids[op.OperationID], op.OperationID)
			}
			ids[op.OperationID] = where
			if op.Security == nil {
				t.Errorf("%s does not declare its security (public: security: [])", where)
			}
			has4xx := false
			for code := range op.Responses.Map() {
				has4xx = has4xx || strings.HasPrefix(code, "4")
			}
			if !has4xx {
				t.Errorf("%s lists no 4xx answer", where)
			}
		}
	}
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["enum"].([]any); ok && len(e) > 0 {
				if names, ok := v["x-enum-varnames"].([]any); !ok || len(names) != len(e) {
					t.Errorf("%s: an enum without x-enum-varnames for each value", where)
				}
			}
			for k, x := range v {
				walk(where+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s/%d", where, i), x)
			}
		}
	}
	var raw map[string]any
	if err := json.Unmarshal(api.OpenAPI, &raw); err != nil {
		t.Fatal(err)
	}
	walk("#", raw)
}
