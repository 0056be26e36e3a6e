package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// rawClient is the generator's HTTP/1.1 client for http:// servers: it
// holds its keep-alive connections itself and writes each request in one
// write and reads its answer on the caller's goroutine, where net/http's
// client hands every request to a writer and a reader goroutine per
// connection (a third of the run's CPU went to the generator with it,
// on the cores it shares with the server it measures).
type rawClient struct {
	addr   string // host:port to dial
	host   string // the Host header
	prefix string // the base URL's path + /api/v1
	mu     sync.Mutex
	idle   []*rawConn
}

type rawConn struct {
	c   net.Conn
	r   *bufio.Reader
	req []byte // the request being written (reused)
}

// answerTimeout bounds a request on a hung server.
const answerTimeout = 60 * time.Second

func (rc *rawClient) get() (*rawConn, bool, error) {
	rc.mu.Lock()
	if n := len(rc.idle); n > 0 {
		c := rc.idle[n-1]
		rc.idle = rc.idle[:n-1]
		rc.mu.Unlock()
		return c, true, nil
	}
	rc.mu.Unlock()
	c, err := net.DialTimeout("tcp", rc.addr, 5*time.Second)
	if err != nil {
		return nil, false, err
	}
	return &rawConn{c: c, r: bufio.NewReaderSize(c, 4096)}, false, nil
}

func (rc *rawClient) put(c *rawConn) {
	rc.mu.Lock()
	rc.idle = append(rc.idle, c)
	rc.mu.Unlock()
}

// close closes the idle connections.
func (rc *rawClient) close() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, c := range rc.idle {
		c.c.Close()
	}
	rc.idle = nil
}

// post sends a POST of a JSON body with the headers (name, value pairs)
// and reads the answer's body into buf. A request on a kept connection
// that the server had closed is sent again once on a new one (every
// command the generator sends is idempotent: keyed or a presence).
func (rc *rawClient) post(path string, headers []string, body []byte, buf *bytes.Buffer) (int, error) {
	for attempt := 0; ; attempt++ {
		c, reused, err := rc.get()
		if err != nil {
			return 0, err
		}
		status, keep, started, err := c.roundTrip(rc.host, path, headers, body, buf)
		if err != nil {
			c.c.Close()
			if reused && !started && attempt == 0 {
				continue
			}
			return 0, err
		}
		if keep {
			rc.put(c)
		} else {
			c.c.Close()
		}
		return status, nil
	}
}

var errAnswer = errors.New("bench: malformed HTTP answer")

// roundTrip writes the request and reads the answer; started reports that
// a byte of the answer arrived.
func (c *rawConn) roundTrip(host, path string, headers []string, body []byte, buf *bytes.Buffer) (status int, keep, started bool, err error) {
	b := append(c.req[:0], "POST "...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	for i := 0; i+1 < len(headers); i += 2 {
		b = append(b, "\r\n"...)
		b = append(b, headers[i]...)
		b = append(b, ": "...)
		b = append(b, headers[i+1]...)
	}
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	c.req = b
	if err := c.c.SetDeadline(time.Now().Add(answerTimeout)); err != nil {
		return 0, false, false, err
	}
	if _, err := c.c.Write(b); err != nil {
		return 0, false, false, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, false, len(line) > 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, true, errAnswer
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, true, errAnswer
	}
	length, chunked, keep := -1, false, line[7] == '1'
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, false, true, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, false, true, errAnswer
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, false, true, errAnswer
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			keep = keep && !bytes.EqualFold(value, []byte("close"))
		}
	}
	buf.Reset()
	switch {
	case status == 204 || status == 304 || status < 200:
	case chunked:
		err = readChunked(c.r, buf)
	case length >= 0:
		_, err = io.CopyN(buf, c.r, int64(length))
	default:
		_, err = buf.ReadFrom(c.r)
		keep = false
	}
	if err != nil {
		return 0, false, true, fmt.Errorf("%w: body: %v", errAnswer, err)
	}
	return status, keep, true, nil
}

// readChunked reads a chunked body (and its trailer) into buf.
func readChunked(r *bufio.Reader, buf *bytes.Buffer) error {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		if err != nil || n < 0 {
			return errAnswer
		}
		if n == 0 {
			for { // the trailer, up to its blank line
				line, err := r.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return nil
				}
			}
		}
		if _, err := io.CopyN(buf, r, n); err != nil {
			return err
		}
		if _, err := r.Discard(2); err != nil { // the chunk's CRLF
			return err
		}
	}
}
