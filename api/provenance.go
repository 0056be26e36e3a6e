package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"

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
// the event of the task's stream after which it last changed; fields
// moved only by soft records (quiet heartbeats) name the last event that
// set them.
func (s *Server) provenance(c echo.Context) error {
	id := c.Param("id")
	if err := s.taskExists(id); err != nil {
		return err
	}
	fields, err := s.provenanceFields(id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"task_id": id, "fields": fields})
}

// provenanceFields folds, into projections of their own and in log order,
// the task's events and those of the devices that acted on it, and
// compares the detail after each of the task's events. The detail of a
// task reads one other stream — whether the device of its claim was
// revoked (needs_operator) — so these events give the details a replay of
// the whole log would, at a cost that follows the task instead of the
// history. Should that fold refuse an event (a log this build did not
// write), the whole log up to the task's last event is replayed instead.
func (s *Server) provenanceFields(id string) (map[string]ProvenanceJSON, error) {
	evs, err := s.provenanceEvents(id)
	if err != nil || len(evs) == 0 {
		return map[string]ProvenanceJSON{}, err
	}
	fields, err := s.foldProvenance(id, evs, eachOf(evs))
	if _, refused := errors.AsType[*projections.ApplyError](err); refused {
		s.log.Warn().Err(err).Str("task_id", id).Msg("provenance: the task's own streams do not fold alone; replaying the whole log")
		return s.provenanceFromWholeLog(id, evs)
	}
	return fields, err
}

// eachOf gives foldProvenance the events evs, by seq: st.Apply chains
// every event to the one before, so the fold's head is moved over the
// events between, which are other streams'.
func eachOf(evs []*ledger.Event) func(func(*ledger.Event) error) error {
	return func(fn func(*ledger.Event) error) error {
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
}

// provenanceFromWholeLog is provenanceFields by a replay of the log from
// its start.
func (s *Server) provenanceFromWholeLog(id string, evs []*ledger.Event) (map[string]ProvenanceJSON, error) {
	last := evs[len(evs)-1].Seq
	return s.foldProvenance(id, evs, func(fn func(*ledger.Event) error) error {
		return s.events.Range(0, func(e *ledger.Event) error {
			if e.Seq > last {
				return ledger.ErrStop
			}
			return fn(e)
		})
	})
}

// provenanceEvents returns the task's events and those of the devices
// that acted on it up to its last one, by seq, copied out of the log's
// read transactions.
func (s *Server) provenanceEvents(id string) ([]*ledger.Event, error) {
	var evs []*ledger.Event
	devices := map[string]bool{}
	keep := func(e *ledger.Event) {
		c := *e
		c.Body, c.PrevHash, c.Hash = bytes.Clone(e.Body), bytes.Clone(e.PrevHash), bytes.Clone(e.Hash)
		if e.Idem != nil {
			idem := *e.Idem
			idem.Fingerprint = bytes.Clone(idem.Fingerprint)
			c.Idem = &idem
		}
		evs = append(evs, &c)
	}
	if err := s.events.Stream(events.TaskStream(id), func(e *ledger.Event) error {
		if e.Actor.Kind == ledger.ActorDevice {
			devices[e.Actor.ID] = true
		}
		keep(e)
		return nil
	}); err != nil || len(evs) == 0 {
		return nil, err
	}
	last := evs[len(evs)-1].Seq
	for _, d := range slices.Sorted(maps.Keys(devices)) {
		if err := s.events.Stream(events.DeviceStream(d), func(e *ledger.Event) error {
			if e.Seq < last { // a device's stream is short: read it whole
				keep(e)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(evs, func(a, b *ledger.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	return evs, nil
}

// foldProvenance folds the events each gives into fresh projections and,
// after each event of the task (those of evs's task stream), notes the
// fields of its detail that changed.
func (s *Server) foldProvenance(id string, evs []*ledger.Event, each func(func(*ledger.Event) error) error) (map[string]ProvenanceJSON, error) {
	var cfg projections.Config
	s.eng.Read(func(st *projections.State) { cfg = st.Config() })
	stream := events.TaskStream(id)
	mine := map[uint64]bool{}
	for _, e := range evs {
		mine[e.Seq] = e.Stream == stream
	}
	st := projections.New(cfg)
	var ended *projections.Task // the task settles with the event that ends it
	st.OnSettle(func(t *projections.Task) {
		if t.ID == id {
			ended = t
		}
	})
	prev := map[string]string{}
	fields := map[string]ProvenanceJSON{}
	err := each(func(e *ledger.Event) error {
		if e.Seq != st.Head.Seq+1 { // eachOf: the events between are not read
			st.Head = ledger.Head{Seq: e.Seq - 1, Hash: e.PrevHash, At: st.Head.At}
		}
		if err := st.Apply(e); err != nil {
			return err
		}
		t := st.Tasks[id]
		if t == nil {
			t = ended
		}
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
	return fields, err
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
