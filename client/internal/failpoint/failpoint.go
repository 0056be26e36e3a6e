// Package failpoint marks crash points on the device's commit path. In
// normal builds Hit does nothing. Built with the tag taskledger_failpoints
// (tests only), Hit("name") SIGKILLs the process itself when the
// environment variable TASKLEDGER_FAILPOINT equals name, so crash recovery
// can be tested at an exact point.
package failpoint

// Names of the failpoints.
const (
	// ClaimBeforeSend: the claim key, body and sealed token are committed,
	// the request has not left.
	ClaimBeforeSend = "claim-before-send"
	// ClaimAfterResponse: the server answered 200, the claim is not stored.
	ClaimAfterResponse = "claim-after-response"
	// StartAfterResponse: the server answered start, the answer is not
	// stored.
	StartAfterResponse = "start-after-response"
)
