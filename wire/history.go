package wire

import "encoding/json"

// Event is one event of a history: GET /admin/tasks/{id}/events (without
// stream and stream_version) and GET /admin/events. body is the event's
// body as JSON, its secret-bearing fields left out.
type Event struct {
	Actor         Actor           `json:"actor"`
	At            string          `json:"at" wire:"time"`
	Body          json.RawMessage `json:"body" wire:"object"`
	Schema        int             `json:"schema" wire:"min=0"`
	Seq           uint64          `json:"seq" wire:"min=0"`
	Stream        string          `json:"stream,omitempty"`
	StreamVersion *uint64         `json:"stream_version,omitempty" wire:"min=0"`
	Type          string          `json:"type"`
}

// Actor is who caused an event.
type Actor struct {
	ID    string `json:"id"`
	Kind  string `json:"kind" wire:"enum=operator|device|system"`
	Owner string `json:"owner,omitempty"`
}

// TaskEvents is GET /admin/tasks/{id}/events.
type TaskEvents struct {
	Events []Event `json:"events"`
}

// EventPage is GET /admin/events: next_after is the seq to read after.
type EventPage struct {
	Events    []Event `json:"events"`
	NextAfter uint64  `json:"next_after" wire:"min=0"`
}
