package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// decoderParse is the strict reader as it was written on encoding/json's
// token stream (before the one-pass parser): the oracle the parser must
// agree with, value for value and message for message.
func decoderParse(s Strict, b []byte) (map[string]any, error) {
	if !utf8.Valid(b) {
		return nil, strictErr("body is not valid UTF-8")
	}
	if s.RefuseLoneSurrogates && HasLoneSurrogate(b) {
		return nil, strictErr("body holds a lone UTF-16 surrogate escape")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decoderValue(s, dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, strictErr("unexpected data after the JSON value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, strictErr("body must be a JSON object")
	}
	return obj, nil
}

func decoderValue(s Strict, dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, strictErr("malformed JSON")
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if s.MaxDepth > 0 && depth+1 > s.MaxDepth {
		return nil, strictErr("JSON nested too deeply")
	}
	switch d {
	case '{':
		obj := map[string]any{}
		folded := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, strictErr("malformed JSON")
			}
			k, ok := kt.(string)
			if !ok {
				return nil, strictErr("malformed JSON")
			}
			lk := strings.ToLower(k)
			if folded[lk] {
				return nil, strictErr("duplicate key %q", k)
			}
			folded[lk] = true
			v, err := decoderValue(s, dec, depth+1)
			if err != nil {
				return nil, err
			}
			obj[k] = v
		}
		if _, err := dec.Token(); err != nil {
			return nil, strictErr("malformed JSON")
		}
		return obj, nil
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := decoderValue(s, dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, strictErr("malformed JSON")
		}
		return arr, nil
	}
	return nil, strictErr("malformed JSON")
}

// sameAsDecoder reports how the parser and the oracle differ on b ("" when
// they agree).
func sameAsDecoder(s Strict, b []byte) string {
	got, gerr := s.ParseStrict(b)
	want, werr := decoderParse(s, b)
	var gse, wse *StrictError
	switch {
	case (gerr == nil) != (werr == nil):
		return "one refused, the other accepted: parser " + errString(gerr) + ", decoder " + errString(werr)
	case gerr != nil:
		if !errors.As(gerr, &gse) || !errors.As(werr, &wse) || gse.Msg != wse.Msg || got != nil {
			return "refusals differ: parser " + errString(gerr) + ", decoder " + errString(werr)
		}
	case !reflect.DeepEqual(got, want):
		return "values differ"
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

var parseSeeds = []string{
	`{}`, ` { } `, "\t{\n}\r\n", `{"a":1}`, `{"a":-0}`, `{"a":0.5e-7}`, `{"a":1E+2}`, `{"a":-}`, `{"a":01}`, `{"a":1.}`,
	`{"a":.5}`, `{"a":1e}`, `{"a":+1}`, `{"a":1ex}`, `{"a":12345678901234567890123}`, `{"a":true,"b":false,"c":null}`,
	`{"a":tru}`, `{"a":nul}`, `{"a":truex}`, `{"a":[]}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`, `{"a":{}}`, `{"a":1,}`,
	`{,}`, `{"a" 1}`, `{"a":1 "b":2}`, `{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"K":1,"\u212a":2}`, `{"İ":1,"i̇":2}`,
	`{"a":"\n"}`, "{\"a\":\"\n\"}", `{"a":"\u0000"}`, `{"a":"\/\b\f\n\r\t\"\\"}`, `{"a":"\x"}`, `{"a":"\u12"}`,
	`{"a":"\ud800"}`, `{"a":"\udc00"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\ud800\ud83d\ude00"}`, `{"a":"\ud800\u0041"}`,
	`{"a":"\ud800\uZZZZ"}`, `{"a":"\ud800\\"}`, `{"a":"\\ud800"}`, `{"a":"é日本😀"}`, `{"a":"x"} `, `{"a":"x"} x`,
	`{"a":"x"}{}`, `[1]`, `"x"`, `7`, `7x`, ``, ` `, `{`, `}`, `{"a"`, `{"a":`, `{"a":"`, `{"a":"\`, `{"a":[`, `{"a":[1`,
	`{"a":{"b":{"c":[{"d":[[]]}]}}}`, `{"":1}`, `{"a":"\u00e9","b":"é"}`, `{"a":1}` + "\x00", `nulll`, `{"a":-01}`,
	`{"device_id":"3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69","claim_generation":1,"expected_version":3}`,
	"{\"a\":\"\xff\"}", `{"a":"\uD834\uDD1E"}`, `{"a":"\uDBFF\uDFFF"}`, `{"a":1e400}`, `{"a":[{"k":1,"K":1}]}`,
}

// The one-pass parser agrees with the token-stream reader on every seed,
// under every option, and on many random mutations of them.
func TestParseStrictAgreesWithTheDecoder(t *testing.T) {
	opts := []Strict{{}, {RefuseLoneSurrogates: true}, {MaxDepth: 2}, {MaxDepth: 1, RefuseLoneSurrogates: true}}
	big := `{` + strings.Repeat(`"k`, 1)
	for i := range 40 {
		big += strings.Repeat("x", i) + `":1,"k`
	}
	big += `":{"K":2}}`
	seeds := append(append([]string(nil), parseSeeds...), big, strings.Repeat(`{"a":`, 70)+`1`+strings.Repeat(`}`, 70),
		`{"a":`+strings.Repeat(`[`, 70)+strings.Repeat(`]`, 70)+`}`)
	// 17 keys equal up to case after 16 others: the map the parser
	// switches to still sees it.
	many := `{`
	for i := range 17 {
		many += `"k` + string(rune('a'+i)) + `":1,`
	}
	seeds = append(seeds, many+`"KA":1}`, many+`"kz":1}`)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("{}[]\":,\\u0123456789abcdefABCDEF.eE+-tfnrl \t\n\x00\x7f\xc3\xa9")
	for _, seed := range seeds {
		for _, o := range opts {
			if d := sameAsDecoder(o, []byte(seed)); d != "" {
				t.Errorf("%+v %q: %s", o, seed, d)
			}
		}
		for range 300 {
			b := []byte(seed)
			for range 1 + rng.IntN(3) {
				switch i := rng.IntN(len(b) + 1); rng.IntN(3) {
				case 0:
					b = append(b[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
				case 1:
					if i < len(b) {
						b = append(b[:i], b[i+1:]...)
					}
				default:
					if i < len(b) {
						b[i] = alphabet[rng.IntN(len(alphabet))]
					}
				}
			}
			o := opts[rng.IntN(len(opts))]
			if d := sameAsDecoder(o, b); d != "" {
				t.Errorf("%+v %q (from %q): %s", o, b, seed, d)
			}
		}
	}
}

func FuzzParseStrictAgreesWithTheDecoder(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s), false, 0)
	}
	f.Fuzz(func(t *testing.T, b []byte, refuse bool, depth int) {
		o := Strict{RefuseLoneSurrogates: refuse, MaxDepth: depth & 7}
		if d := sameAsDecoder(o, b); d != "" {
			t.Fatalf("%+v %q: %s", o, b, d)
		}
	})
}
