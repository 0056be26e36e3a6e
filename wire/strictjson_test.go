package wire

import (
	"errors"
	"strings"
	"testing"
)

// Every refusal of the strict reader, and what it lets through.
func TestParseStrictRefusesAnythingAmbiguous(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat(`}`, 64)
	deeper := strings.Repeat(`{"a":`, 65) + `1` + strings.Repeat(`}`, 65)
	deepArr := `{"a":` + strings.Repeat(`[`, 64) + strings.Repeat(`]`, 64) + `}`
	for _, tc := range []struct {
		name, body string
		opt        Strict
		msg        string // "" = accepted
	}{
		{"object", `{"a":1,"b":[true,null,"x"],"c":{"d":1.5}}`, Strict{}, ""},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", Strict{}, "body is not valid UTF-8"},
		{"not an object", `[1]`, Strict{}, "body must be a JSON object"},
		{"a number", `7`, Strict{}, "body must be a JSON object"},
		{"trailing data", `{"a":1} {}`, Strict{}, "unexpected data after the JSON value"},
		{"malformed", `{"a":}`, Strict{}, "malformed JSON"},
		{"empty", ``, Strict{}, "malformed JSON"},
		{"duplicate key", `{"a":1,"a":2}`, Strict{}, `duplicate key "a"`},
		{"duplicate key by case", `{"x":{"Key":1,"key":2}}`, Strict{}, `duplicate key "key"`},
		{"duplicate key in an array", `{"x":[{"k":1,"k":1}]}`, Strict{}, `duplicate key "k"`},
		{"lone surrogate allowed", `{"a":"\ud800"}`, Strict{}, ""},
		{"lone surrogate refused", `{"a":"\ud800"}`, Strict{RefuseLoneSurrogates: true}, "body holds a lone UTF-16 surrogate escape"},
		{"low surrogate first", `{"a":"\udc00\ud800"}`, Strict{RefuseLoneSurrogates: true}, "body holds a lone UTF-16 surrogate escape"},
		{"a pair", `{"a":"\ud83d\ude00"}`, Strict{RefuseLoneSurrogates: true}, ""},
		{"escaped backslash before u", `{"a":"\\ud800"}`, Strict{RefuseLoneSurrogates: true}, ""},
		{"depth 64", deep, Strict{MaxDepth: 64}, ""},
		{"depth 65", deeper, Strict{MaxDepth: 64}, "JSON nested too deeply"},
		{"depth 65 unbounded", deeper, Strict{}, ""},
		{"arrays at depth 65", deepArr, Strict{MaxDepth: 64}, "JSON nested too deeply"},
	} {
		m, err := tc.opt.ParseStrict([]byte(tc.body))
		switch {
		case tc.msg == "" && (err != nil || m == nil):
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.msg != "":
			var se *StrictError
			if !errors.As(err, &se) || se.Msg != tc.msg || m != nil {
				t.Errorf("%s: got %v (%v), want %q", tc.name, err, m, tc.msg)
			}
		}
	}
}

// Numbers stay json.Number: no float rounding between the readers.
func TestParseStrictKeepsNumbersExact(t *testing.T) {
	m, err := Strict{}.ParseStrict([]byte(`{"n":12345678901234567890}`))
	if err != nil || m["n"].(interface{ String() string }).String() != "12345678901234567890" {
		t.Fatalf("%v %v", m, err)
	}
}
