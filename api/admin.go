package api

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"taskledger/wire"
	"time"

	"github.com/labstack/echo/v4"

	"taskledger/commands"
	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// adminJSON runs the request rules of an admin JSON mutation and returns
// its fields, key and the canonical body for the fingerprint.
func adminJSON(c echo.Context) (*fields, string, string, error) {
	m, h, err := readJSON(c, adminJSONRules)
	if err != nil {
		return nil, "", "", err
	}
	key := h.key
	canon, err := canonicalJSON(m)
	if err != nil {
		return nil, "", "", err
	}
	return newFields(m), key, canon, nil
}

func (s *Server) adminReq(c echo.Context, op, key string, parts ...string) commands.AdminReq {
	return commands.AdminReq{Operator: operator(c), Role: role(c), Key: key, Fingerprint: fingerprint(append([]string{op}, parts...)...)}
}

// answerTask renders the current task detail of an admin command.
func (s *Server) answerTask(c echo.Context, res commands.Result) error {
	if res.Replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	return s.sendTask(c, res.Record.TaskID, outcomeStatus(res.Record.Outcome))
}

// sendTask answers the task document of id as committed now.
func (s *Server) sendTask(c echo.Context, id string, status int) error {
	var w *jsonw
	var err error
	s.eng.ReadNow(func(st *projections.State, now int64) {
		var t *projections.Task
		if t, err = st.Task(id); t != nil {
			w = writeTask(newJSONW(), st, t, now)
		}
	})
	if err != nil {
		return err
	}
	if w == nil {
		return commands.ErrTaskNotFound
	}
	return w.send(c, status)
}

// answerDeviceDoc answers the device document of a device command; token
// is the new device token of a first registration answer ("" otherwise).
func (s *Server) answerDeviceDoc(c echo.Context, res commands.Result, token string) error {
	if res.Replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	var doc *wire.Device
	s.eng.ReadNow(func(st *projections.State, now int64) {
		if d := st.Devices[res.Record.DeviceID]; d != nil {
			dd := deviceDoc(st, d, now, s.eng.Config())
			doc = &dd
		}
	})
	if doc == nil {
		return commands.ErrDeviceNotFound
	}
	doc.Token = token
	return c.JSON(outcomeStatus(res.Record.Outcome), doc)
}

// registerDevice: POST /admin/devices.
func (s *Server) registerDevice(c echo.Context) error {
	f, key, canon, err := adminJSON(c)
	if err != nil {
		return err
	}
	cmd := &commands.RegisterDevice{OwnerID: f.uuid("owner_id", true), Name: f.str("name", true)}
	if arr, ok := f.array("required_checks", false); ok {
		cmd.HasChecks, cmd.RequiredChecks = true, []string{}
		for _, v := range arr {
			name, ok := v.(string)
			if !ok {
				f.fail(invalid("field \"required_checks\" must hold strings"))
				break
			}
			cmd.RequiredChecks = append(cmd.RequiredChecks, name)
		}
		if f.err == nil {
			f.fail(checkBody(&wire.RegisterDeviceRequest{RequiredChecks: cmd.RequiredChecks}, "required_checks"))
		}
	}
	if err := f.done(); err != nil {
		return err
	}
	if err := checkBody(&wire.RegisterDeviceRequest{Name: cmd.Name}, "name"); err != nil {
		return err
	}
	token, err := NewDeviceToken()
	if err != nil {
		return err
	}
	cmd.TokenHash = commands.HashToken(token)
	cmd.AdminReq = s.adminReq(c, commands.OpRegisterDevice, key, canon)
	res, err := s.do(c, cmd)
	if err != nil {
		return err
	}
	if res.Replayed {
		token = ""
	}
	return s.answerDeviceDoc(c, res, token)
}

// revokeDevice: POST /admin/devices/{id}/revoke.
func (s *Server) revokeDevice(c echo.Context) error {
	reason, key, canon, err := revocationJSON(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	res, err := s.do(c, &commands.RevokeDevice{AdminReq: s.adminReq(c, commands.OpRevokeDevice, key, id, canon), DeviceID: id, Reason: reason})
	if err != nil {
		return err
	}
	return s.answerDeviceDoc(c, res, "")
}

// listDevices: GET /admin/devices.
func (s *Server) listDevices(c echo.Context) error {
	page := wire.DevicePage{Devices: []wire.Device{}}
	s.eng.ReadNow(func(st *projections.State, now int64) {
		page.ServerTime = formatTime(now)
		st.DevicesInOrder(func(d *projections.Device) {
			page.Devices = append(page.Devices, deviceDoc(st, d, now, s.eng.Config()))
		})
	})
	return c.JSON(http.StatusOK, page)
}

// getDevice: GET /admin/devices/{id}.
func (s *Server) getDevice(c echo.Context) error {
	var doc *wire.Device
	s.eng.ReadNow(func(st *projections.State, now int64) {
		if d := st.Devices[c.Param("id")]; d != nil {
			dd := deviceDoc(st, d, now, s.eng.Config())
			doc = &dd
		}
	})
	if doc == nil {
		return commands.ErrDeviceNotFound
	}
	return c.JSON(http.StatusOK, doc)
}

// payload reads and canonicalizes a task payload (an object ≤ 16 KiB).
func payload(f *fields) (string, string) {
	obj := f.object("payload", true)
	if f.err != nil {
		return "", ""
	}
	canon, err := canonicalJSON(obj)
	if err != nil {
		f.fail(err)
		return "", ""
	}
	if len(canon) > PayloadLimit {
		f.fail(invalid("field \"payload\" must be at most %d bytes encoded", PayloadLimit))
	}
	return canon, commands.HashToken(canon)
}

// ttl reads ttl_seconds and checks it against the configured bounds: any
// integer outside them (zero and negative included) is 422 invalid_ttl.
func (s *Server) ttl(f *fields, name string) (time.Duration, error) {
	secs := f.integer(name, true, math.MinInt64, math.MaxInt64)
	if f.err != nil {
		return 0, nil
	}
	cfg := s.eng.Config()
	if secs < 1 || secs > int64(cfg.AuthTTLMax/time.Second) {
		return 0, errInvalidTTL
	}
	d := time.Duration(secs) * time.Second
	if d < cfg.AuthTTLMin || d > cfg.AuthTTLMax {
		return 0, errInvalidTTL
	}
	return d, nil
}

// createTask: POST /admin/tasks.
func (s *Server) createTask(c echo.Context) error {
	f, key, canon, err := adminJSON(c)
	if err != nil {
		return err
	}
	cmd := &commands.CreateTask{}
	cmd.Payload, cmd.PayloadSHA256 = payload(f)
	var ttlErr error
	if auth := f.object("authorize", false); auth != nil && f.err == nil {
		af := newFields(auth)
		cmd.AuthorizeTTL, ttlErr = s.ttl(af, "ttl_seconds")
		cmd.Takeover = takeoverField(af)
		if err := af.done(); err != nil {
			f.fail(err)
		}
	}
	if err := f.done(); err != nil {
		return err
	}
	if ttlErr != nil {
		return ttlErr
	}
	cmd.AdminReq = s.adminReq(c, commands.OpCreateTask, key, canon)
	res, err := s.do(c, cmd)
	if err != nil {
		return err
	}
	return s.answerTask(c, res)
}

// amend: POST /admin/tasks/{id}/amend.
func (s *Server) amend(c echo.Context) error {
	f, key, canon, err := adminJSON(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	cmd := &commands.Amend{TaskID: id, ExpectedRevision: uint64(f.integer("expected_revision", true, 1, 1<<53-1))}
	cmd.Payload, cmd.PayloadSHA256 = payload(f)
	if err := f.done(); err != nil {
		return err
	}
	cmd.AdminReq = s.adminReq(c, commands.OpAmend, key, id, canon)
	res, err := s.do(c, cmd)
	if err != nil {
		return err
	}
	return s.answerTask(c, res)
}

// authorize: POST /admin/tasks/{id}/authorize.
func (s *Server) authorize(c echo.Context) error {
	f, key, canon, err := adminJSON(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	cmd := &commands.Authorize{TaskID: id, ExpectedRevision: uint64(f.integer("expected_revision", true, 1, 1<<53-1))}
	var ttlErr error
	cmd.TTL, ttlErr = s.ttl(f, "ttl_seconds")
	cmd.Takeover = takeoverField(f)
	if err := f.done(); err != nil {
		return err
	}
	if ttlErr != nil {
		return ttlErr
	}
	cmd.AdminReq = s.adminReq(c, commands.OpAuthorize, key, id, canon)
	res, err := s.do(c, cmd)
	if err != nil {
		return err
	}
	return s.answerTask(c, res)
}

// revocationJSON reads the body every revocation takes, {"reason"} and
// nothing else, with its key and canonical body for the fingerprint.
func revocationJSON(c echo.Context) (reason, key, canon string, err error) {
	f, key, canon, err := adminJSON(c)
	if err != nil {
		return "", "", "", err
	}
	reason = reasonField(f)
	if err := f.done(); err != nil {
		return "", "", "", err
	}
	return reason, key, canon, nil
}

// reasonField reads a required reason of at most 256 bytes
// (wire.ReasonRequest).
func reasonField(f *fields) string {
	r := f.str("reason", true)
	f.fail(checkBody(&wire.ReasonRequest{Reason: r}, "reason"))
	return r
}

// revokeAuthorization: POST /admin/tasks/{id}/authorization/revoke.
func (s *Server) revokeAuthorization(c echo.Context) error {
	reason, key, canon, err := revocationJSON(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	res, err := s.do(c, &commands.RevokeAuthorization{AdminReq: s.adminReq(c, commands.OpRevokeAuthorization, key, id, canon),
		TaskID: id, Reason: reason})
	if err != nil {
		return err
	}
	return s.answerTask(c, res)
}

// cancel: POST /admin/tasks/{id}/cancel.
func (s *Server) cancel(c echo.Context) error {
	f, key, canon, err := adminJSON(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	cmd := &commands.Cancel{TaskID: id, Reason: reasonField(f)}
	if _, ok := f.m["expected_version"]; ok {
		v := uint64(f.integer("expected_version", true, 1, 1<<53-1))
		cmd.ExpectedVersion = &v
	}
	if err := f.done(); err != nil {
		return err
	}
	cmd.AdminReq = s.adminReq(c, commands.OpCancel, key, id, canon)
	res, err := s.do(c, cmd)
	if err != nil {
		return err
	}
	return s.answerTask(c, res)
}

// recoverTask: POST /admin/tasks/{id}/recover.
func (s *Server) recoverTask(c echo.Context) error {
	f, key, canon, err := adminJSON(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	cmd := &commands.Recover{TaskID: id, Decision: f.str("decision", true), Reason: reasonField(f),
		ExpectedVersion: uint64(f.integer("expected_version", true, 1, 1<<53-1))}
	if f.err == nil && cmd.Decision != events.RecoverFail && cmd.Decision != events.RecoverRequeue {
		f.fail(invalid("field \"decision\" must be \"fail\" or \"requeue\""))
	}
	if err := f.done(); err != nil {
		return err
	}
	cmd.AdminReq = s.adminReq(c, commands.OpRecover, key, id, canon)
	res, err := s.do(c, cmd)
	if err != nil {
		return err
	}
	return s.answerTask(c, res)
}

// putReferenceImage: PUT /admin/tasks/{id}/reference-image (raw JPEG).
func (s *Server) putReferenceImage(c echo.Context) error {
	data, h, err := readRaw(c, referenceJPEG)
	if err != nil {
		return err
	}
	key := h.key
	if err := checkJPEG(data); err != nil {
		return err
	}
	id := c.Param("id")
	if err := s.taskExists(id); err != nil {
		return err
	}
	sha, err := s.blobs.Put(data)
	if err != nil {
		return s.blobFailed(err)
	}
	res, err := s.do(c, &commands.SetReferenceImage{AdminReq: s.adminReq(c, commands.OpSetReferenceImage, key, id, sha),
		TaskID: id, SHA256: sha, Size: int64(len(data))})
	if err != nil {
		return err
	}
	return s.answerTask(c, res)
}

// getTask: GET /admin/tasks/{id}.
func (s *Server) getTask(c echo.Context) error {
	return s.sendTask(c, c.Param("id"), http.StatusOK)
}

// listTasks: GET /admin/tasks?state=&device_id=&cursor=&limit=, newest first.
func (s *Server) listTasks(c echo.Context) error {
	q := c.QueryParams()
	for k := range q {
		if k != "state" && k != "device_id" && k != "cursor" && k != "limit" && k != "needs_operator" {
			return invalid("unknown query parameter %q", k)
		}
	}
	state := wire.State(q.Get("state"))
	if state != "" && !contains(projections.AllStates(), state) {
		return invalid("state must be one of the task states")
	}
	device := q.Get("device_id")
	if device != "" && !isUUIDv4(device) {
		return invalid("device_id must be a canonical lowercase UUIDv4")
	}
	needs, err := needsOperatorQuery(q.Get("needs_operator"), q.Has("needs_operator"))
	if err != nil {
		return err
	}
	if needs != nil && *needs {
		return s.listNeedingOperator(c, state, device, q.Get("limit"), q.Get("cursor"))
	}
	limit, err := queryInt(q.Get("limit"), 100, 1, 500)
	if err != nil {
		return invalid("limit must be an integer from 1 to 500")
	}
	cursor, err := queryInt(q.Get("cursor"), 0, 1, 1<<62)
	if err != nil {
		return invalid("cursor must be a value returned as next_cursor")
	}
	page := wire.TaskPage{Tasks: []wire.TaskDetail{}, Counts: map[string]uint64{}}
	var live []listedTask
	var settled projections.SettledReader
	var now int64
	var head uint64
	s.eng.ReadNow(func(st *projections.State, at int64) {
		for k, v := range st.StateCounts() {
			page.Counts[k] = uint64(v)
		}
		now, head = at, st.Head.Seq
		st.LiveNewestFirst(uint64(cursor), state, device, func(t *projections.Task) bool {
			if needs == nil || st.NeedsOperator(t, now) == *needs {
				live = append(live, listedTask{t.CreateSeq, taskDetail(st, t, now)})
			}
			return len(live) <= int(limit)
		})
		settled = st.SettledTasks()
	})
	page.ServerTime, page.HeadSeq = formatTime(now), &head
	// The settled tasks are read from disk without the engine's lock (a
	// settled task never needs an operator, so needs_operator=false keeps
	// them all): a write never waits for a read of the disk.
	var done []listedTask
	if err := settled.NewestFirst(uint64(cursor), state, device, func(t *projections.Task) bool {
		if t.CreateSeq <= head { // one created after the page's head is the next page's
			done = append(done, listedTask{t.CreateSeq, taskDetail(nil, t, now)})
		}
		return len(done) <= int(limit)
	}); err != nil {
		return err
	}
	page.Tasks, page.NextCursor = mergeNewestFirst(live, done, int(limit))
	return c.JSON(http.StatusOK, page)
}

// listedTask is a task of a list page and its creation seq.
type listedTask struct {
	seq uint64
	doc wire.TaskDetail
}

// mergeNewestFirst merges the live and settled tasks of a page (each
// newest first, up to limit + 1) into one order, a task in both once (it
// ended while the page was read: the live copy, as the lock saw it, is
// kept), and cuts it at limit: the cursor of the next page is the first
// task left out.
func mergeNewestFirst(live, settled []listedTask, limit int) ([]wire.TaskDetail, *string) {
	tasks := make([]wire.TaskDetail, 0, min(limit, len(live)+len(settled)))
	for i, j := 0, 0; i < len(live) || j < len(settled); {
		var next listedTask
		switch {
		case j == len(settled) || (i < len(live) && live[i].seq >= settled[j].seq):
			next = live[i]
			if j < len(settled) && settled[j].seq == next.seq {
				j++
			}
			i++
		default:
			next = settled[j]
			j++
		}
		if len(tasks) == limit {
			cursor := strconv.FormatUint(next.seq+1, 10)
			return tasks, &cursor
		}
		tasks = append(tasks, next.doc)
	}
	return tasks, nil
}

func contains[T comparable](list []T, s T) bool { return slices.Contains(list, s) }

func queryInt(v string, def, lo, hi int64) (int64, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, invalid("out of range")
	}
	return n, nil
}

// taskEvents: GET /admin/tasks/{id}/events.
func (s *Server) taskEvents(c echo.Context) error {
	id := c.Param("id")
	if err := s.taskExists(id); err != nil {
		return err
	}
	out := []wire.Event{}
	err := s.events.Stream(events.TaskStream(id), func(e *ledger.Event) error {
		doc, err := eventDoc(e, false)
		if err == nil {
			out = append(out, doc)
		}
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.TaskEvents{Events: out})
}

// logPage reads the after (default 0) and limit (1 to 1000, default def)
// of a page of the log; any other parameter is refused.
func logPage(c echo.Context, def int64) (after, limit int64, err error) {
	q := c.QueryParams()
	for k := range q {
		if k != "after" && k != "limit" {
			return 0, 0, invalid("unknown query parameter %q", k)
		}
	}
	if after, err = queryInt(q.Get("after"), 0, 0, 1<<62); err != nil {
		return 0, 0, invalid("after must be a non-negative integer")
	}
	if limit, err = queryInt(q.Get("limit"), def, 1, 1000); err != nil {
		return 0, 0, invalid("limit must be an integer from 1 to 1000")
	}
	return after, limit, nil
}

// globalEvents: GET /admin/events?after=&limit=.
func (s *Server) globalEvents(c echo.Context) error {
	after, limit, err := logPage(c, 100)
	if err != nil {
		return err
	}
	out := []wire.Event{}
	next := uint64(after)
	err = s.events.Range(uint64(after), func(e *ledger.Event) error {
		doc, err := eventDoc(e, true)
		if err != nil {
			return err
		}
		out = append(out, doc)
		next = e.Seq
		if len(out) == int(limit) {
			return ledger.ErrStop
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.EventPage{Events: out, NextAfter: next})
}

// getEvidence: GET /admin/tasks/{id}/evidence/{eid}.
func (s *Server) getEvidence(c echo.Context) error {
	var sha string
	var exists bool
	var err error
	s.eng.Read(func(st *projections.State) {
		var t *projections.Task
		if t, err = st.Task(c.Param("id")); t != nil {
			exists = true
			for _, e := range t.Evidence {
				if e.ID == c.Param("eid") {
					sha = e.SHA256
				}
			}
		}
	})
	if err != nil {
		return err
	}
	if !exists {
		return commands.ErrTaskNotFound
	}
	if sha == "" {
		return commands.ErrEvidenceNotFound
	}
	return s.serveBlob(c, sha, "image/png")
}

// getReferenceImage: GET /admin/tasks/{id}/reference-image — the task's
// current reference image (the console shows it; devices read theirs
// through their claim).
func (s *Server) getReferenceImage(c echo.Context) error {
	var sha string
	var exists bool
	var err error
	s.eng.Read(func(st *projections.State) {
		var t *projections.Task
		if t, err = st.Task(c.Param("id")); t != nil {
			exists = true
			if t.Image != nil {
				sha = t.Image.SHA256
			}
		}
	})
	if err != nil {
		return err
	}
	if !exists {
		return commands.ErrTaskNotFound
	}
	if sha == "" {
		return commands.ErrNoReferenceImage
	}
	return s.serveBlob(c, sha, "image/jpeg")
}

// advanceClock: POST /admin/test-clock/advance (only with --clock=manual).
func (s *Server) advanceClock(c echo.Context) error {
	m, _, err := readJSON(c, clockJSON)
	if err != nil {
		return err
	}
	f := newFields(m)
	secs := f.integer("seconds", true, 1, 86400)
	if err := f.done(); err != nil {
		return err
	}
	res, err := s.do(c, &commands.AdvanceClock{Seconds: secs})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.ServerTime{ServerTime: formatTime(res.Value.(int64))})
}

// taskExists answers nil when the task id exists, live or settled (read
// from the read model on disk), and ErrTaskNotFound otherwise.
func (s *Server) taskExists(id string) error {
	var t *projections.Task
	var err error
	s.eng.Read(func(st *projections.State) { t, err = st.Task(id) })
	if err != nil {
		return err
	}
	if t == nil {
		return commands.ErrTaskNotFound
	}
	return nil
}
