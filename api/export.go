package api

import "taskledger/ledger"

// EventJSON is the stable JSON rendering of one event for auditors (the
// export and history commands): these field names are a contract. The
// body is the event's own fields as JSON (times as RFC 3339, payload and
// result embedded); token hashes, nonces and the idempotency record are
// never included.
type EventJSON struct {
	Seq           uint64         `json:"seq"`
	Stream        string         `json:"stream"`
	StreamVersion uint64         `json:"stream_version"`
	Type          string         `json:"type"`
	Schema        int            `json:"schema"`
	At            string         `json:"at"`
	Actor         ledger.Actor   `json:"actor"`
	Body          map[string]any `json:"body"`
}

// RenderEvent renders e as the routes of api.md do (upcasting older body
// schemas), for the audit commands.
func RenderEvent(e *ledger.Event) (*EventJSON, error) {
	body, err := eventBody(e)
	if err != nil {
		return nil, err
	}
	return &EventJSON{Seq: e.Seq, Stream: e.Stream, StreamVersion: e.StreamVersion, Type: string(e.Type), Schema: e.Schema,
		At: formatTime(e.At), Actor: e.Actor, Body: body}, nil
}

// FormatTime writes Unix ms as RFC 3339 UTC with exactly three fractional
// digits, as every document of the API does.
func FormatTime(ms int64) string { return formatTime(ms) }
