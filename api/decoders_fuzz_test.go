package api

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// The strict JSON decoder never panics; what it accepts is one valid UTF-8
// object without lone surrogate escapes that encoding/json also reads.
func FuzzParseStrict(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `{"a":1,"A":2}`,
		`{"a":{"b":[1,2,{"c":null}]}}`, `{"a":1} x`, "{\"a\":\"\xff\"}", `[1]`, `{"device_id":"x","claim_generation":1}`,
		`{"a":"\\ud800"}`, `{"a":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseStrict(b)
		if err != nil {
			return
		}
		if !utf8.Valid(b) || loneSurrogate(b) {
			t.Fatalf("accepted %q", b)
		}
		var v map[string]any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if dec.Decode(&v) != nil || len(v) != len(m) {
			t.Fatalf("accepted %q, which encoding/json reads otherwise", b)
		}
	})
}

// The query check never panics and refuses every repeated parameter.
func FuzzQueryStrict(f *testing.F) {
	for _, s := range []string{"a=1", "a=1&a=2", "a=1&%61=2", "a=%zz", "limit=1&after=2", "&&", "a+b=1&a%20b=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := parseQueryStrict(raw)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, p := range strings.Split(raw, "&") {
			if p == "" {
				continue
			}
			name, _, _ := strings.Cut(p, "=")
			n, _ := unescapeQuery(name)
			if seen[n] {
				t.Fatalf("accepted the repeated parameter %q in %q", n, raw)
			}
			seen[n] = true
		}
	})
}

// The claim-token parser accepts exactly 43 base64url characters or 64
// lowercase hex characters, one header.
func FuzzClaimToken(f *testing.F) {
	for _, s := range []string{strings.Repeat("A", 43), strings.Repeat("a", 64), strings.Repeat("A", 64), "", "short",
		strings.Repeat("_", 43) + "\n", strings.Repeat("=", 43)} {
		f.Add(s, false)
	}
	e := echo.New()
	f.Fuzz(func(t *testing.T, tok string, twice bool) {
		req := httptest.NewRequest("POST", "/", nil)
		req.Header["X-Claim-Token"] = []string{tok}
		if twice {
			req.Header["X-Claim-Token"] = append(req.Header["X-Claim-Token"], tok)
		}
		got, err := claimToken(e.NewContext(req, httptest.NewRecorder()), true)
		want := !twice && (isTokenOf(tok, 43, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ||
			isTokenOf(tok, 64, "0123456789abcdef"))
		if (err == nil) != want || (err == nil && got != tok) {
			t.Fatalf("claimToken(%q, twice %v) = %q, %v", tok, twice, got, err)
		}
	})
}

func isTokenOf(s string, n int, alphabet string) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(alphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}

// loneSurrogate agrees with a decode: a text it clears decodes without
// U+FFFD appearing where the input had none.
func FuzzLoneSurrogate(f *testing.F) {
	for _, s := range []string{`"\ud800"`, `"\ud83d\ude00"`, `"\\ud800"`, `"\udc00\ud800"`, `"a\u0041"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if loneSurrogate(b) || !utf8.Valid(b) || bytes.ContainsRune(b, utf8.RuneError) || bytes.Contains(bytes.ToLower(b), []byte(`\ufffd`)) {
			return
		}
		var s string
		if json.Unmarshal(b, &s) != nil {
			return
		}
		if strings.ContainsRune(s, utf8.RuneError) {
			t.Fatalf("%q holds a lone surrogate the check missed", b)
		}
	})
}
