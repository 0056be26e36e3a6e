package wire

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
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

// ParseStrict parses b under the strict rules and the options of s: the
// text is checked for UTF-8 and lone surrogates, then read in one pass
// (parser) that accepts exactly RFC 8259's grammar, as encoding/json
// does, and decodes strings as encoding/json does.
func (s Strict) ParseStrict(b []byte) (map[string]any, error) {
	if !utf8.Valid(b) {
		return nil, strictErr("body is not valid UTF-8")
	}
	if s.RefuseLoneSurrogates && HasLoneSurrogate(b) {
		return nil, strictErr("body holds a lone UTF-16 surrogate escape")
	}
	p := strictParser{b: b, maxDepth: s.MaxDepth}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if p.space(); p.i != len(p.b) {
		return nil, strictErr("unexpected data after the JSON value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, strictErr("body must be a JSON object")
	}
	return obj, nil
}

var errMalformed = &StrictError{Msg: "malformed JSON"}

// strictParser reads one JSON value from b at i.
type strictParser struct {
	b        []byte
	i        int
	maxDepth int
}

func (p *strictParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value reads a value inside depth containers.
func (p *strictParser) value(depth int) (any, error) {
	p.space()
	if p.i >= len(p.b) {
		return nil, errMalformed
	}
	switch c := p.b[p.i]; {
	case c == '{' || c == '[':
		if p.maxDepth > 0 && depth+1 > p.maxDepth {
			return nil, strictErr("JSON nested too deeply")
		}
		p.i++
		if c == '{' {
			return p.object(depth + 1)
		}
		return p.array(depth + 1)
	case c == '"':
		return p.str()
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, errMalformed
}

func (p *strictParser) literal(word string) error {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return errMalformed
	}
	p.i += len(word)
	return nil
}

// object reads the members after '{'; keys equal up to case (as
// strings.ToLower folds them) are refused.
func (p *strictParser) object(depth int) (map[string]any, error) {
	obj := map[string]any{}
	var folded []string // the keys so far, lower case
	var foldedSet map[string]bool
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return obj, nil
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, errMalformed
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		lk := strings.ToLower(k)
		if foldedSet != nil {
			if foldedSet[lk] {
				return nil, strictErr("duplicate key %q", k)
			}
			foldedSet[lk] = true
		} else {
			if slices.Contains(folded, lk) {
				return nil, strictErr("duplicate key %q", k)
			}
			if folded = append(folded, lk); len(folded) > 16 {
				foldedSet = make(map[string]bool, 2*len(folded))
				for _, f := range folded {
					foldedSet[f] = true
				}
			}
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, errMalformed
		}
		p.i++
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		obj[k] = v
		if end, err := p.after('}'); end || err != nil {
			return obj, err
		}
	}
}

// after reads what follows a member or an element: a comma (false) or
// the closing delimiter (true); anything else is malformed.
func (p *strictParser) after(closing byte) (bool, error) {
	p.space()
	if p.i >= len(p.b) {
		return false, errMalformed
	}
	switch p.b[p.i] {
	case ',':
		p.i++
		return false, nil
	case closing:
		p.i++
		return true, nil
	}
	return false, errMalformed
}

// array reads the elements after '['.
func (p *strictParser) array(depth int) ([]any, error) {
	arr := []any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return arr, nil
	}
	for {
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		if end, err := p.after(']'); end || err != nil {
			return arr, err
		}
	}
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? as a
// json.Number of its text.
func (p *strictParser) number() (json.Number, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case digits() == 0:
		return "", errMalformed
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return "", errMalformed
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return "", errMalformed
		}
	}
	return json.Number(p.b[start:p.i]), nil
}

// str reads a string at '"' and decodes it as encoding/json does: the
// escapes of RFC 8259, a surrogate pair as one rune, a lone surrogate as
// U+FFFD; a raw control character is malformed. (The text is valid UTF-8:
// ParseStrict checked it.)
func (p *strictParser) str() (string, error) {
	p.i++ // the opening quote
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, nil
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return "", errMalformed
		}
		p.i++
	}
	return "", errMalformed
}

// escaped finishes a string that holds an escape, from start.
func (p *strictParser) escaped(start int) (string, error) {
	out := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", errMalformed
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", errMalformed
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(p.b, p.i)
			if !ok {
				return "", errMalformed
			}
			p.i += 4
			if utf16.IsSurrogate(r) {
				// A pair when the next escape completes it, else U+FFFD
				// (and the next escape is read on its own).
				r1 := rune(-1)
				if p.i+6 <= len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					if v, ok := hex4(p.b, p.i+2); ok {
						r1 = v
					}
				}
				if pair := utf16.DecodeRune(r, r1); pair != unicode.ReplacementChar {
					out = utf8.AppendRune(out, pair)
					p.i += 6
					continue
				}
				r = unicode.ReplacementChar
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", errMalformed
		}
	}
	return "", errMalformed
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
