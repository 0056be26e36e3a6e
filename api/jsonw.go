package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"

	"taskledger/wire"
)

// jsonw appends a JSON answer to a pooled buffer, byte for byte what
// Echo's c.JSON (encoding/json's Encoder: map keys sorted, HTML
// characters escaped, a final newline) writes for the same document as a
// map: the writers call the keys in sorted order, and
// TestAnswersAreWhatEncodingJSONWrites holds them to it. The frequent
// answers (device commands, errors) are written with it; the rest stay
// maps.
type jsonw struct {
	b     []byte
	comma bool // a value was written at this level: the next key needs a comma
	err   error
}

var jsonPool = sync.Pool{New: func() any { return &jsonw{b: make([]byte, 0, 1024)} }}

func newJSONW() *jsonw {
	w := jsonPool.Get().(*jsonw)
	w.b, w.comma, w.err = w.b[:0], false, nil
	return w
}

func (w *jsonw) open() *jsonw { return w.open0('{') }

func (w *jsonw) close() *jsonw { return w.close0('}') }

// open0 and close0 open and close an object ('{', '}') or an array
// ('[', ']').
func (w *jsonw) open0(delim byte) *jsonw {
	w.sep()
	w.b = append(w.b, delim)
	w.comma = false
	return w
}

func (w *jsonw) close0(delim byte) *jsonw {
	w.b = append(w.b, delim)
	w.comma = true
	return w
}

func (w *jsonw) sep() {
	if w.comma {
		w.b = append(w.b, ',')
	}
}

// key starts a member; name must need no escaping.
func (w *jsonw) key(name string) *jsonw {
	w.sep()
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, '"', ':')
	w.comma = false
	return w
}

func (w *jsonw) str(s string) *jsonw {
	w.sep()
	w.b = appendString(w.b, s)
	w.comma = true
	return w
}

// strs writes a list of strings; nil is null, as encoding/json writes a
// nil slice.
func (w *jsonw) strs(list []string) *jsonw {
	if list == nil {
		return w.null()
	}
	w.sep()
	w.b = append(w.b, '[')
	for i, s := range list {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = appendString(w.b, s)
	}
	w.b = append(w.b, ']')
	w.comma = true
	return w
}

func (w *jsonw) uint(n uint64) *jsonw {
	w.sep()
	w.b = strconv.AppendUint(w.b, n, 10)
	w.comma = true
	return w
}

func (w *jsonw) int(n int64) *jsonw {
	w.sep()
	w.b = strconv.AppendInt(w.b, n, 10)
	w.comma = true
	return w
}

func (w *jsonw) bool(v bool) *jsonw {
	w.sep()
	w.b = strconv.AppendBool(w.b, v)
	w.comma = true
	return w
}

func (w *jsonw) null() *jsonw {
	w.sep()
	w.b = append(w.b, "null"...)
	w.comma = true
	return w
}

// time writes ms as formatTime does.
func (w *jsonw) time(ms int64) *jsonw {
	w.sep()
	w.b = append(w.b, '"')
	w.b = wire.AppendMillis(w.b, ms)
	w.b = append(w.b, '"')
	w.comma = true
	return w
}

// nullTime writes null for 0, else the time (the map answers' nullTime).
func (w *jsonw) nullTime(ms int64) *jsonw {
	if ms == 0 {
		return w.null()
	}
	return w.time(ms)
}

// raw writes a JSON text as encoding/json writes a json.RawMessage:
// compacted, HTML characters escaped, an invalid text an error.
func (w *jsonw) raw(text string) *jsonw {
	w.sep()
	w.comma = true
	if plainJSON(text) {
		w.b = append(w.b, text...)
		return w
	}
	b, err := json.Marshal(json.RawMessage(text))
	if err != nil && w.err == nil {
		w.err = err
	}
	w.b = append(w.b, b...)
	return w
}

// plainJSON reports whether text is valid JSON that encoding/json writes
// unchanged: no white space to compact, nothing to escape (stored payloads
// and results are canonical, so nearly always).
func plainJSON(text string) bool {
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == ' ', c == '\t', c == '\n', c == '\r', c == '<', c == '>', c == '&', c >= 0x80:
			return false
		}
	}
	return json.Valid([]byte(text))
}

// appendString appends s as encoding/json writes a string (HTML escaping
// on): plain printable ASCII directly, anything else through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// send writes the answer with status as c.JSON would (indented under
// ?pretty or Echo's debug mode) and returns the buffer to the pool.
func (w *jsonw) send(c echo.Context, status int) error {
	defer jsonPool.Put(w)
	if w.err != nil {
		return w.err
	}
	out := append(w.b, '\n')
	if pretty(c) {
		var ind bytes.Buffer
		if err := json.Indent(&ind, w.b, "", "  "); err != nil {
			return err
		}
		ind.WriteByte('\n')
		out = ind.Bytes()
	}
	w.b = out[:0]
	if cap(w.b) > 64<<10 {
		w.b = nil // a rare large answer is not kept in the pool
	}
	return c.Blob(status, echo.MIMEApplicationJSON, out)
}

// pretty reports whether c.JSON would indent the answer.
func pretty(c echo.Context) bool {
	if c.Echo().Debug {
		return true
	}
	if c.Request().URL.RawQuery == "" {
		return false
	}
	_, ok := c.QueryParams()["pretty"]
	return ok
}

// sendError writes an error answer {"code","message"}.
func sendError(c echo.Context, ae *apiError) error {
	return newJSONW().open().key("code").str(ae.Code).key("message").str(ae.Message).close().send(c, ae.Status)
}
