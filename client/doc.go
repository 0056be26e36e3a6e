// Package client is the device side of the taskledger wire protocol: an HTTP
// transport that speaks api.md exactly and validates every answer strictly.
//
// The transport sends exactly one HTTP request per method call and never
// retries on its own. Every answer is one of:
//
//   - a validated success value;
//   - an *APIError: a definitive, well-formed rejection (4xx with a listed
//     status and a known code);
//   - ErrUnauthorized: 401, stop until new credentials;
//   - an *UnknownOutcomeError: the request may or may not have been acted on
//     (connection error, timeout, 3xx, 5xx, a truncated or invalid body, an
//     unlisted status). The caller replays the same Idempotency-Key with the
//     same body; an unknown outcome is never a success.
//
// The base URL must be http to a loopback host (127.0.0.1, [::1],
// localhost) or https to any host; user info is refused, the system proxy
// is never used and redirects are never followed. Tokens are only ever put
// into request headers and never appear in errors.
//
// Durable state, recovery and the agent live in the subpackages
// client/localstate, client/device and client/agent.
package client
