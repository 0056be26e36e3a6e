// Package api is taskledger's HTTP interface (Echo): strict decoding,
// authentication, error mapping and rendering. It decides nothing: every
// mutation is a commands.Command handed to the sequencer.
package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"taskledger/audit/transparency"
	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/projections"
	"taskledger/wire"
)

// Body limits of api.md.
const (
	DeviceJSONLimit = 4096
	AdminJSONLimit  = 64 << 10
	PayloadLimit    = 16 << 10
	ResultLimit     = 2 << 10
	ImageLimit      = 5 << 20
	EvidenceLimit   = 8 << 20
)

// Events is the read side of the log the api serves history from.
type Events interface {
	Range(after uint64, fn func(*ledger.Event) error) error
	Stream(stream string, fn func(*ledger.Event) error) error
	RangeRaw(after uint64, fn func(seq uint64, raw []byte) error) error
}

// Options configure the api.
type Options struct {
	Engine      *commands.Engine
	Events      Events
	Blobs       *ledger.Blobs
	ManualClock bool // enables the test-clock route
	Logger      zerolog.Logger
	Metrics     *Metrics
	// Extra registers more routes (metrics, console) on the root.
	Extra func(e *echo.Echo)
	// Limits are the request-rate limits (zero: none).
	Limits Limits
	// Now is the wall clock of the rate limits (nil: commands.WallClock).
	Now func() time.Time
	// Commits wakes the event streams after each commit (nil: no stream).
	Commits *Notifier
	// Transparency serves checkpoints and proofs (nil: those routes 404).
	Transparency *transparency.Log
	// Ready, when set, is a cluster node's readiness: the reason it cannot
	// take writes now (NotReadyNoSequencer, NotReadyNoQuorum), "" when it
	// can. It must be cheap: /readyz calls it on every probe.
	Ready func() string
	// FreeSpace, when set, returns the bytes free for the server on the
	// data directory's file system (statfs); below MinFreeBytes /readyz
	// answers disk_full.
	FreeSpace func() (uint64, error)
	// Backup writes the backup archive (nil: GET /admin/backup is 404).
	Backup BackupFunc
}

// Server is the HTTP interface.
type Server struct {
	eng      *commands.Engine
	events   Events
	blobs    *ledger.Blobs
	log      zerolog.Logger
	metrics  *Metrics
	echo     *echo.Echo
	stopping atomic.Bool
	limits   *limiter
	uploads  *uploadQuota
	storage  storageHealth
	methods  methodTable
	notify   *Notifier
	done     chan struct{} // closed by Stopping: ends the event streams
	stopOnce sync.Once
	tlog     *transparency.Log
	ready    func() string
	free     func() (uint64, error)
	backupFn BackupFunc
}

// New builds the server and its routes.
func New(o Options) *Server {
	s := &Server{eng: o.Engine, events: o.Events, blobs: o.Blobs, log: o.Logger, metrics: o.Metrics,
		notify: o.Commits, done: make(chan struct{}), tlog: o.Transparency, ready: o.Ready, free: o.FreeSpace,
		backupFn: o.Backup}
	if s.metrics != nil && s.eng != nil {
		s.metrics.WatchNeedingOperator(func() (n int) {
			s.eng.ReadNow(func(st *projections.State, now int64) { n = st.NeedingOperator(now) })
			return n
		})
		s.watchServer()
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	now := o.Now
	if now == nil {
		now = commands.WallClock{}.Now
	}
	s.limits = newLimiter(o.Limits, o.Metrics, now)
	s.uploads = &uploadQuota{limit: o.Limits.DeviceUploadInflight, inflight: map[string]int64{}, limiter: s.limits}
	e.Use(s.requestLog, s.refuseMethod, s.refuseAmbiguous, s.gate)
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	e.GET("/console", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/console/") })
	e.GET("/console/*", console)
	e.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusFound, "/console/") })
	e.GET("/favicon.ico", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/console/favicon.svg") })

	v1 := e.Group("/api/v1")
	v1.GET("/openapi.json", openapiDoc)
	dev := v1.Group("/device", s.authenticate(true))
	dev.POST("/heartbeat", s.presence)
	dev.POST("/tasks/claim-next", s.claimNext)
	for _, op := range []string{commands.OpRelease, commands.OpStart, commands.OpHeartbeat, commands.OpAwaitConfirmation,
		commands.OpResume, commands.OpComplete, commands.OpFail, commands.OpCancelAck} {
		dev.POST("/tasks/:id/"+op, s.taskCall(op))
	}
	dev.POST("/tasks/:id/lease/renew", s.taskCall(commands.OpRenew))
	dev.GET("/tasks/:id/reference-image", s.deviceReferenceImage)
	dev.POST("/tasks/:id/evidence", s.evidence)

	adm := v1.Group("/admin", s.authenticate(false))
	adm.GET("/whoami", s.whoami)
	adm.POST("/devices", s.registerDevice)
	adm.GET("/devices", s.listDevices)
	adm.GET("/devices/:id", s.getDevice)
	adm.POST("/devices/:id/revoke", s.revokeDevice)
	adm.POST("/tasks", s.createTask)
	adm.GET("/tasks", s.listTasks)
	adm.GET("/tasks/:id", s.getTask)
	adm.GET("/tasks/:id/events", s.taskEvents)
	adm.PUT("/tasks/:id/reference-image", s.putReferenceImage)
	adm.GET("/tasks/:id/reference-image", s.getReferenceImage)
	adm.POST("/tasks/:id/amend", s.amend)
	adm.POST("/tasks/:id/authorize", s.authorize)
	adm.POST("/tasks/:id/authorization/revoke", s.revokeAuthorization)
	adm.POST("/tasks/:id/cancel", s.cancel)
	adm.POST("/tasks/:id/recover", s.recoverTask)
	adm.GET("/tasks/:id/evidence/:eid", s.getEvidence)
	adm.GET("/events", s.globalEvents)
	adm.GET("/events/stream", s.eventStream)
	s.adminTokenRoutes(adm)
	adm.GET("/log", s.rawLog)
	adm.GET("/backup", s.backup)
	s.auditRoutes(v1, adm)
	if o.ManualClock {
		adm.POST("/test-clock/advance", s.advanceClock)
	} else {
		// Without --clock=manual the route does not exist: 404 for
		// everyone, before authentication (api.md, Test clock).
		v1.Any("/admin/test-clock/advance", func(echo.Context) error { return errNotFound })
	}
	if o.Extra != nil {
		o.Extra(e)
	}
	s.echo = e
	return s
}

// Handler is the http.Handler of the server.
func (s *Server) Handler() http.Handler { return s.echo }

// Echo exposes the router (for extra routes).
func (s *Server) Echo() *echo.Echo { return s.echo }

// Stopping makes every later request answer 503 (graceful shutdown).
func (s *Server) Stopping() {
	s.stopping.Store(true)
	s.stopOnce.Do(func() { close(s.done) })
}

// gate answers 503 once shutdown began (operational routes stay).
func (s *Server) gate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !strings.HasPrefix(c.Request().URL.Path, "/api/") {
			return next(c)
		}
		// Shutting down, or the log could not be written (fenced, or the
		// projections could not be reloaded): no answer from possibly
		// uncommitted state.
		if s.stopping.Load() || s.eng.Err() != nil {
			return unavailable(c)
		}
		fenceAnswer(c, s.eng)
		return next(c)
	}
}

// fenceAnswer makes an API answer not yet sent when the engine fails
// (fenced after a failed write or sync of the log) a 503 with Retry-After
// and no body: a request that passed gate just before the failure may
// have read projections that hold the failed batch, and nothing is
// acknowledged after a failed commit. A stream already answering stops:
// its later writes fail.
func fenceAnswer(c echo.Context, eng *commands.Engine) {
	res := c.Response()
	w := &fenceWriter{ResponseWriter: res.Writer, failed: func() bool { return eng.Err() != nil }}
	res.Writer = w
	res.Before(func() {
		if res.Status != http.StatusServiceUnavailable && w.failed() {
			w.drop = true
			res.Status = http.StatusServiceUnavailable
			h := res.Header()
			for _, k := range []string{echo.HeaderContentType, echo.HeaderContentLength, echo.HeaderContentEncoding, echo.HeaderLocation} {
				h.Del(k)
			}
			h.Set("Retry-After", "1")
		}
	})
}

// errFenced ends a stream whose engine failed while it answered.
var errFenced = errors.New("api: the engine is fenced; the answer stops")

// fenceWriter drops the body of an answer turned into a 503 by fenceAnswer
// and refuses the writes of an answer whose engine failed after its
// header was sent.
type fenceWriter struct {
	http.ResponseWriter
	failed func() bool
	drop   bool
}

func (w *fenceWriter) Write(b []byte) (int, error) {
	switch {
	case w.drop:
		return len(b), nil
	case w.failed():
		return 0, errFenced
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (Flush).
func (w *fenceWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func unavailable(c echo.Context) error {
	c.Response().Header().Set("Retry-After", "1")
	return c.NoContent(http.StatusServiceUnavailable)
}

// requestLog gives every request an id and logs it without any header
// value (so never a token).
func (s *Server) requestLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := uuid.NewString()
		h := c.Response().Header()
		h.Set("X-Request-Id", id)
		// No answer is sniffed into another type (JSON rendered as HTML).
		h.Set("X-Content-Type-Options", "nosniff")
		start := time.Now() //tl:wallclock latency metric
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		req := c.Request()
		s.log.Info().Str("request_id", id).Str("method", req.Method).Str("route", c.Path()).
			Int("status", c.Response().Status).Dur("latency", time.Since(start)).Msg("request")
		if s.metrics != nil {
			s.metrics.request(c.Path(), c.Response().Status)
		}
		return nil
	}
}

func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			err = errNotFound
		case http.StatusMethodNotAllowed:
			err = errMethod
		default:
			err = newErr(he.Code, "invalid_request", http.StatusText(he.Code))
		}
	}
	if isUnavailable(err) {
		_ = unavailable(c)
		return
	}
	ae := toAPIError(err)
	if ae.Status == http.StatusInternalServerError {
		s.log.Error().Err(err).Str("route", c.Path()).Msg("internal error")
	}
	_ = sendError(c, ae)
}

const (
	ctxDevice   = "tl.device"
	ctxOperator = "tl.operator"
	ctxRole     = "tl.role"
)

// bearer returns the SHA-256 (hex) of the request's bearer token.
func bearer(c echo.Context) (string, bool) {
	h := c.Request().Header.Get("Authorization")
	const p = "Bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(h[len(p):])))
	return hex.EncodeToString(sum[:]), true
}

// unauthenticated answers a request without a valid token: 429 once its
// address spent its bucket, else 401; the body is never read and, when
// there is one, the connection is closed after the answer.
func (s *Server) unauthenticated(c echo.Context) error {
	if err := s.limits.address(c); err != nil {
		return err
	}
	c.Response().Header().Set("WWW-Authenticate", "Bearer")
	if answerAndClose(c, http.StatusUnauthorized) {
		return nil
	}
	closeIfBody(c)
	return unauthorized(c)
}

func unauthorized(c echo.Context) error {
	c.Response().Header().Set("WWW-Authenticate", "Bearer")
	return c.NoContent(http.StatusUnauthorized)
}

// identify resolves a token hash to a device principal or an operator.
func (s *Server) identify(h string) (dev *commands.Principal, op commands.AdminIdentity) {
	if id, ok := s.eng.AuthenticateAdmin(h); ok {
		return nil, id
	}
	if p, ok := s.eng.Authenticate(h); ok { // the committed index: no wait for a batch in flight
		dev = &p
	}
	return dev, commands.AdminIdentity{}
}

// authenticate resolves the bearer token before anything else of the
// request is read, and admits only the credential kind of the route and,
// for an admin token, only a role the route allows (routeRoles).
func (s *Server) authenticate(wantDevice bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h, ok := bearer(c)
			if !ok {
				return s.unauthenticated(c)
			}
			dev, op := s.identify(h)
			switch {
			case dev == nil && op.Name == "":
				return s.unauthenticated(c)
			case wantDevice != (dev != nil):
				return errWrongKind
			case wantDevice:
				if err := s.limits.device(c, dev.DeviceID); err != nil {
					return err
				}
				c.Set(ctxDevice, *dev)
			default:
				if m := c.Request().Method; !RoleAllows(op.Role, m, c.Path()) && !noRoute(m, c.Path()) {
					closeIfBody(c)
					return errInsufficientRole
				}
				c.Set(ctxOperator, commands.Operator(op.Name))
				c.Set(ctxRole, op.Role)
			}
			return next(c)
		}
	}
}

func principal(c echo.Context) commands.Principal { return c.Get(ctxDevice).(commands.Principal) }
func operator(c echo.Context) commands.Operator   { return c.Get(ctxOperator).(commands.Operator) }
func role(c echo.Context) wire.Role               { return c.Get(ctxRole).(wire.Role) }

// do runs a command through the sequencer.
func (s *Server) do(c echo.Context, cmd commands.Command) (commands.Result, error) {
	res, err := s.eng.Do(context.WithoutCancel(c.Request().Context()), cmd)
	s.observeWrite(err)
	return res, err
}
