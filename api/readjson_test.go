package api

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// A parsed body keeps its values after its pooled buffer reads the next
// request's body.
func TestReadJSONValuesOutliveTheirBuffer(t *testing.T) {
	e := echo.New()
	read := func(body string) map[string]any {
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		m, _, err := readJSON(e.NewContext(req, httptest.NewRecorder()), presenceJSON)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := read(`{"device_id":"aaaaaaaa","n":12345,"e":"x\u0041y"}`)
	for range 20 {
		read(`{"device_id":"bbbbbbbb","n":99999,"e":"zzzzz"}`)
	}
	if first["device_id"] != "aaaaaaaa" || first["n"].(interface{ String() string }).String() != "12345" || first["e"] != "xAy" {
		t.Errorf("the first body's values changed: %v", first)
	}
	// Over the limit: 413 from the pooled path too.
	req := httptest.NewRequest("POST", "/", strings.NewReader(`{"a":"`+strings.Repeat("x", DeviceJSONLimit)+`"}`))
	req.Header.Set("Content-Type", "application/json")
	if _, _, err := readJSON(e.NewContext(req, httptest.NewRecorder()), presenceJSON); err != errBodyTooLarge {
		t.Errorf("a body over the limit: %v", err)
	}
}
