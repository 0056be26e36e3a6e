package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// ProvenanceJSON is the event that last set one field of the task detail.
type ProvenanceJSON struct {
	Seq        uint64       `json:"seq"`
	Type       string       `json:"type"`
	At         string       `json:"at"`
	Actor      ledger.Actor `json:"actor"`
	Generation *uint64      `json:"generation"` // the claim generation the task had after the event, null without a claim
}

// provenance: GET /admin/tasks/{id}/provenance — for every field of the
// task detail (top-level keys, and "key.sub" for the fields of objects),
// the event of the task's stream after which it last changed. It replays
// the log from the start up to the task's last event into a fresh state
// (the detail of a task depends on other streams too: devices, the clock)
// and compares the detail after each of the task's events; fields moved
// only by soft records (quiet heartbeats) name the last event that set
// them.
func (s *Server) provenance(c echo.Context) error {
	id := c.Param("id")
	var cfg projections.Config
	s.eng.Read(func(st *projections.State) { cfg = st.Config() })
	if err := s.taskExists(id); err != nil {
		return err
	}
	mine := map[uint64]bool{}
	var last uint64
	if err := s.events.Stream(events.TaskStream(id), func(e *ledger.Event) error {
		mine[e.Seq], last = true, e.Seq
		return nil
	}); err != nil {
		return err
	}
	st := projections.New(cfg)
	st.DiscardSettled() // other tasks may settle on the way: only this one is read
	prev := map[string]string{}
	fields := map[string]ProvenanceJSON{}
	err := s.events.Range(0, func(e *ledger.Event) error {
		if e.Seq > last {
			return ledger.ErrStop
		}
		if err := st.Apply(e); err != nil {
			return err
		}
		t := st.Tasks[id]
		if !mine[e.Seq] || t == nil {
			return nil
		}
		p := ProvenanceJSON{Seq: e.Seq, Type: string(e.Type), At: formatTime(e.At), Actor: e.Actor}
		if t.Claim != nil {
			g := t.Claim.Generation
			p.Generation = &g
		}
		doc, err := taskDetailMap(st, t, e.At)
		if err != nil {
			return err
		}
		for k, v := range doc {
			note := func(name string, v any) {
				b, _ := json.Marshal(v)
				if prev[name] != string(b) || fields[name].Seq == 0 {
					prev[name] = string(b)
					fields[name] = p
				}
			}
			note(k, v)
			if m, ok := v.(map[string]any); ok && k != "payload" && k != "result" {
				for sub, sv := range m {
					note(k+"."+sub, sv)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"task_id": id, "fields": fields})
}

// taskDetailMap is taskDetail as a JSON object, member by member (numbers
// kept as written).
func taskDetailMap(st *projections.State, t *projections.Task, now int64) (map[string]any, error) {
	raw, err := json.Marshal(taskDetail(st, t, now))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	return m, dec.Decode(&m)
}
