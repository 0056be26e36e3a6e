package api

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
