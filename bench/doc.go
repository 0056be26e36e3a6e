// Package bench is taskledger's load generator and its baselines.
//
// A run drives N simulated devices through the device lifecycle against a
// Driver: claim → release, or claim → start → heartbeat → heartbeat →
// (operator cancel) → heartbeat that sees cancel_requested → cancel-ack,
// after which the operator creates a replacement task so the claimable pool
// stays constant. Two drivers exist: InProcess calls commands.Engine.Do on a
// node opened with node.Open (the real sequencer, fsync on), and HTTP speaks
// the api.md contract to a running server. Only commands acknowledged
// without error count as durable: the sequencer answers a command after its
// batch committed, and the HTTP server answers after the sequencer did.
//
// The raw baselines (raw.go) measure what bbolt alone does on the same
// machine: one transaction per put, and group commit with a batching
// goroutine. They are the ceiling the ledger's figures are compared with in
// docs/performance.md. Only this package, ledger/ and snapshots/ import
// bbolt.
//
// The replay figures (replay.go, replaylog.go) run on logs the real
// deciders built. The history figures (historybench.go) run on histories
// of millions of finished tasks that GenerateHistory (history.go) writes
// event by event through the ledger's own sealing, hash chain and
// checkpoint signing, and measure a node only through node.Open,
// Node.Snapshot and the API's handler: heap, start-up, snapshot size and
// the filtered admin list per finished task, as slopes between two sizes.
package bench
