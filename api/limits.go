package api

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Limits are the request-rate limits of the server. A zero rate turns its
// limit off.
type Limits struct {
	// DeviceRate and DeviceBurst: the token bucket of each authenticated
	// device (requests per second, bucket size).
	DeviceRate  float64
	DeviceBurst int
	// AddressRate and AddressBurst: the token bucket of each remote address
	// for requests that fail authentication (no, unknown or revoked token).
	AddressRate  float64
	AddressBurst int
	// DeviceUploadInflight bounds the bytes of evidence uploads each
	// device has in flight (reserved from the Content-Length, or the
	// route's limit for a chunked body, until the answer); 0: no bound.
	DeviceUploadInflight int64
	// Now is the time the buckets refill by (network protection, not ledger
	// time); nil: the commands wall clock.
	Now func() time.Time
}

// Rate-limit kinds (the label of taskledger_rate_limited_total).
const (
	LimitDevice  = "device"
	LimitAddress = "address"
	// LimitUpload: the per-device quota of upload bytes in flight.
	LimitUpload = "upload"
)

// maxAddressBuckets bounds the per-address table: past it, buckets that are
// full again (idle addresses) are dropped.
const maxAddressBuckets = 65536

var errRateLimited = newErr(http.StatusTooManyRequests, "rate_limited", "too many requests; retry after the time Retry-After says")

// limiter holds the token buckets.
type limiter struct {
	cfg     Limits
	mu      sync.Mutex
	devices map[string]*rate.Limiter
	addrs   map[string]*rate.Limiter
	refused *prometheus.CounterVec
}

func newLimiter(cfg Limits, m *Metrics, now func() time.Time) *limiter {
	if cfg.Now == nil {
		cfg.Now = now
	}
	l := &limiter{cfg: cfg, devices: map[string]*rate.Limiter{}, addrs: map[string]*rate.Limiter{}}
	l.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taskledger_rate_limited_total",
		Help: "Requests refused 429 rate_limited, by limit (device: per-device bucket; address: unauthenticated per-address bucket; upload: per-device upload bytes in flight)."},
		[]string{"limit"})
	l.refused.WithLabelValues(LimitDevice)
	l.refused.WithLabelValues(LimitAddress)
	l.refused.WithLabelValues(LimitUpload)
	if m != nil {
		m.reg.MustRegister(l.refused)
	}
	return l
}

// take spends one token of key's bucket in table; it returns how long to
// wait when the bucket is empty (nothing spent then).
func (l *limiter) take(table map[string]*rate.Limiter, key string, r float64, burst int) (time.Duration, bool) {
	now := l.cfg.Now()
	l.mu.Lock()
	b, ok := table[key]
	if !ok {
		if len(table) >= maxAddressBuckets {
			for k, v := range table {
				if v.TokensAt(now) >= float64(v.Burst()) {
					delete(table, k)
				}
			}
		}
		b = rate.NewLimiter(rate.Limit(r), max(burst, 1))
		table[key] = b
	}
	l.mu.Unlock()
	res := b.ReserveN(now, 1)
	if !res.OK() {
		return time.Second, false
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, false
	}
	return 0, true
}

// device spends a token of the device's bucket.
func (l *limiter) device(c echo.Context, id string) error {
	if l.cfg.DeviceRate <= 0 {
		return nil
	}
	if d, ok := l.take(l.devices, id, l.cfg.DeviceRate, l.cfg.DeviceBurst); !ok {
		return l.refuse(c, LimitDevice, d)
	}
	return nil
}

// address spends a token of the remote address's bucket (requests that
// failed authentication).
func (l *limiter) address(c echo.Context) error {
	if l.cfg.AddressRate <= 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		host = c.Request().RemoteAddr
	}
	if d, ok := l.take(l.addrs, host, l.cfg.AddressRate, l.cfg.AddressBurst); !ok {
		return l.refuse(c, LimitAddress, d)
	}
	return nil
}

func (l *limiter) refuse(c echo.Context, kind string, wait time.Duration) error {
	l.refused.WithLabelValues(kind).Inc()
	secs := int64(math.Ceil(wait.Seconds()))
	c.Response().Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	closeIfBody(c)
	return errRateLimited
}

// closeIfBody closes the connection after the answer when the request has
// a body that was not read.
func closeIfBody(c echo.Context) {
	if r := c.Request(); r.ContentLength != 0 {
		c.Response().Header().Set("Connection", "close")
	}
}

// rstAvoidance is how long a refused connection is kept half-closed after
// its answer so that the client reads the answer before the close.
const rstAvoidance = 500 * time.Millisecond

// answerAndClose writes status (empty body, the headers already set) on
// the raw HTTP/1 connection without reading the request body, closes the
// sending side, and drops whatever the client still sends for a moment
// before closing (so the client sees the answer, not a reset). It reports
// false when the connection cannot be taken over (HTTP/2: the stream is
// reset by the server instead).
func answerAndClose(c echo.Context, status int) bool {
	r := c.Request()
	if r.ProtoMajor != 1 || r.ContentLength == 0 {
		return false
	}
	conn, rw, err := http.NewResponseController(c.Response()).Hijack()
	if err != nil {
		return false
	}
	h := c.Response().Header()
	h.Set("Connection", "close")
	h.Set("Content-Length", "0")
	c.Response().Status = status
	fmt.Fprintf(rw, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = h.Write(rw)
	rw.WriteString("\r\n")
	_ = rw.Flush()
	go func() {
		defer conn.Close()
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_ = conn.SetReadDeadline(time.Now().Add(rstAvoidance)) //tl:wallclock a network deadline, not ledger time
		_, _ = io.Copy(io.Discard, io.LimitReader(conn, 4<<20))
	}()
	return true
}

// SetLimits sets the request-rate limits; call it before the server
// answers its first request.
func (s *Server) SetLimits(l Limits) {
	if l.Now == nil {
		l.Now = s.limits.cfg.Now
	}
	s.limits.cfg = l
	s.uploads.setLimit(l.DeviceUploadInflight)
}
