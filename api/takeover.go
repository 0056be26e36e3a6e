package api

import (
	"net/http"
	"slices"
	"strconv"
	"taskledger/wire"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"taskledger/projections"
)

// takeoverField reads the optional "takeover" of an authorization:
// "reclaim" or "manual", or "" when absent or null (the server's default,
// serve --default-takeover, decided and recorded by the command).
func takeoverField(f *fields) string {
	p := f.optStr("takeover")
	if p == nil {
		return ""
	}
	if f.err == nil && *p != projections.TakeoverReclaim && *p != projections.TakeoverManual {
		f.fail(invalid("field \"takeover\" must be \"reclaim\" or \"manual\""))
	}
	return *p
}

// needsOperatorQuery parses the needs_operator list filter: absent (nil),
// "true" or "false".
func needsOperatorQuery(v string, present bool) (*bool, error) {
	if !present {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil || (v != "true" && v != "false") {
		return nil, invalid("needs_operator must be true or false")
	}
	return &b, nil
}

// listNeedingOperator answers GET /admin/tasks?needs_operator=true from the
// set of held tasks (at most one per device), never a walk of every task, with the same order, cursor and other filters as the list.
func (s *Server) listNeedingOperator(c echo.Context, state wire.State, device, limitQ, cursorQ string) error {
	limit, err := queryInt(limitQ, 100, 1, 500)
	if err != nil {
		return invalid("limit must be an integer from 1 to 500")
	}
	cursor, err := queryInt(cursorQ, 0, 1, 1<<62)
	if err != nil {
		return invalid("cursor must be a value returned as next_cursor")
	}
	page := wire.TaskPage{Tasks: []wire.TaskDetail{}}
	s.eng.ReadNow(func(st *projections.State, now int64) {
		var found []*projections.Task
		st.HeldTasks(func(t *projections.Task) bool {
			if st.NeedsOperator(t, now) && (cursor == 0 || t.CreateSeq < uint64(cursor)) &&
				(state == "" || t.State == state) && (device == "" || t.Claim.DeviceID == device) {
				found = append(found, t)
			}
			return true
		})
		slices.SortFunc(found, func(a, b *projections.Task) int { return -cmpUint(a.CreateSeq, b.CreateSeq) })
		for i, t := range found {
			if i == int(limit) {
				next := strconv.FormatUint(t.CreateSeq+1, 10)
				page.NextCursor = &next
				break
			}
			page.Tasks = append(page.Tasks, taskDetail(st, t, now))
		}
	})
	return c.JSON(http.StatusOK, page)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// WatchNeedingOperator adds the gauge taskledger_tasks_needing_operator,
// read from the projections at each scrape through count.
func (m *Metrics) WatchNeedingOperator(count func() int) {
	// A second server on the same registry keeps the first one's gauge.
	_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "taskledger_tasks_needing_operator",
		Help: "Tasks no device may move any more (needs_operator: manual takeover, revoked holder, authorization ended with the claim lease, running lease expired)."},
		func() float64 { return float64(count()) }))
}

// takeoverName is an authorization's takeover policy as shown: "reclaim"
// for authorizations recorded before the policy existed.
func takeoverName(p string) string {
	if p == projections.TakeoverManual {
		return p
	}
	return projections.TakeoverReclaim
}
