package api

import (
	"strings"

	"taskledger/ledger"
)

// ProvenanceBothWays returns a task's provenance from the fold of its own
// streams (an error if that fold refuses an event, where the handler would
// replay the whole log) and from a replay of the whole log.
func (s *Server) ProvenanceBothWays(id string) (streams, whole map[string]ProvenanceJSON, err error) {
	evs, err := s.provenanceEvents(id)
	if err != nil {
		return nil, nil, err
	}
	streams, err = s.foldProvenance(id, evs, eachOf(evs))
	if err != nil {
		return nil, nil, err
	}
	whole, err = s.provenanceFromWholeLog(id, evs)
	return streams, whole, err
}

// withoutDeviceStreams is the log with every device stream read as empty:
// a task's own streams then do not fold alone (its claim names a device
// the fold never registered).
type withoutDeviceStreams struct{ Events }

func (w withoutDeviceStreams) Stream(stream string, fn func(*ledger.Event) error) error {
	if strings.HasPrefix(stream, "device/") {
		return nil
	}
	return w.Events.Stream(stream, fn)
}

// HideDeviceStreams makes the server read every device stream as empty.
func (s *Server) HideDeviceStreams() { s.events = withoutDeviceStreams{s.events} }
