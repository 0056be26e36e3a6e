package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The one strict JSON reader of the server's requests and the client's
// answers: valid UTF-8, exactly one object, no duplicate keys (also keys
// equal up to case) at any depth, nothing after the closing brace; numbers
// are kept as json.Number. Whatever one side would read differently from
// the other is refused, never guessed.

// StrictError is a text that is not one strict JSON object.
type StrictError struct{ Msg string }

func (e *StrictError) Error() string { return e.Msg }

func strictErr(format string, args ...any) error {
	return &StrictError{Msg: fmt.Sprintf(format, args...)}
}

// Strict configures ParseStrict beyond the rules every reader shares.
type Strict struct {
	// MaxDepth bounds the nesting of objects and arrays (0: unbounded,
	// where a size limit bounds the text).
	MaxDepth int
	// RefuseLoneSurrogates refuses a \u escape of a UTF-16 surrogate
	// that is not part of a pair (see HasLoneSurrogate).
	RefuseLoneSurrogates bool
}

// ParseStrict parses b under the strict rules and the options of s.
func (s Strict) ParseStrict(b []byte) (map[string]any, error) {
	if !utf8.Valid(b) {
		return nil, strictErr("body is not valid UTF-8")
	}
	if s.RefuseLoneSurrogates && HasLoneSurrogate(b) {
		return nil, strictErr("body holds a lone UTF-16 surrogate escape")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := s.value(dec, 0)
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

func (s Strict) value(dec *json.Decoder, depth int) (any, error) {
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
		return s.object(dec, depth+1)
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := s.value(dec, depth+1)
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

func (s Strict) object(dec *json.Decoder, depth int) (map[string]any, error) {
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
		v, err := s.value(dec, depth)
		if err != nil {
			return nil, err
		}
		obj[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, strictErr("malformed JSON")
	}
	return obj, nil
}

// HasLoneSurrogate reports whether a JSON text holds a \u escape of a
// UTF-16 surrogate that is not part of a high-low pair (encoding/json
// would turn it into U+FFFD silently: two readers could see the same key
// or value differently).
func HasLoneSurrogate(b []byte) bool {
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(b) {
				return false
			}
			if b[i+1] != 'u' {
				i++ // a two-character escape
				continue
			}
			u, ok := hex4(b, i+2)
			if !ok {
				return false // malformed: the JSON parser refuses it
			}
			i += 5
			switch {
			case u >= 0xDC00 && u <= 0xDFFF:
				return true
			case u >= 0xD800 && u <= 0xDBFF:
				if i+2 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
					return true
				}
				lo, ok := hex4(b, i+3)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return true
				}
				i += 6
			}
		}
	}
	return false
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	for _, c := range b[at : at+4] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(v), err == nil
}
