// Package localstate is the device's durable state: one bbolt file,
// opened by one process at a time (bbolt's file lock; a second opener gets
// ErrInUse), every change committed and fsynced before the caller acts on
// it.
//
// Format (version 1). Buckets and keys:
//
//	meta     "format"   → "1"
//	         "identity" → Identity (JSON): server URL, device id, key source,
//	                      key file path, sealed device token
//	         "session"  → the session id (UUIDv4 text)
//	pending  "op"       → Pending (JSON): the one request that was persisted
//	                      and may have been sent: kind, idempotency key, the
//	                      exact body, task/generation/execution it names,
//	                      the sealed client-issued claim token (claims), the
//	                      file path, SHA-256 and size (evidence)
//	claim    "active"   → Active (JSON): the claim this device holds with the
//	                      full snapshot of the claim answer, the sealed claim
//	                      token, the execution and whether the work was
//	                      launched
//	manual   <id>       → Manual (JSON): tasks (or claim keys) that need a
//	                      person; nothing new is claimed while one exists
//
// Secrets are stored only sealed by client/secretstore; this package never
// sees a plaintext token.
package localstate
