// Package failpoint is the one fault-injection mechanism of taskledger:
// named points on the commit, snapshot, blob and device-claim paths where a
// test can make the process kill itself (SIGKILL; TerminateProcess on
// Windows) or make the operation fail with an error.
//
// Failpoints exist only in binaries built with the tag failpoints
// (`go build -tags failpoints`, `go test -tags failpoints`). In every other
// build Enabled is false, Eval returns nil and the call sites compile to
// nothing: a release binary ignores the variable below.
//
// The configuration is one environment variable, read once at the first
// Eval, holding a comma-separated list of points and their actions:
//
//	TASKLEDGER_FAILPOINTS="snapshot-mid-write,blob-write=enospc"
//
//	name          the action kill (the default)
//	name=kill     the process kills itself when it reaches the point
//	name=enospc   the point fails with syscall.ENOSPC (error points only)
//	name=eio      the point fails with syscall.EIO (error points only)
//
// A name not listed in Points, an unknown action, or an error action on a
// kill-only point is refused: the process prints the reason to stderr and
// exits with status 2 (see Parse). In-process tests use Enable instead.
package failpoint

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// Env is the environment variable that enables failpoints.
const Env = "TASKLEDGER_FAILPOINTS"

// WallShiftEnv names a file holding a duration (Go syntax, e.g. "-1h")
// that a failpoints build adds to every wall-clock reading of the server's
// clock (WallShift): a test steps a real server's wall clock by rewriting
// the file. An unreadable or malformed file shifts nothing; a build without
// failpoints ignores the variable.
const WallShiftEnv = "TASKLEDGER_TEST_WALL_SHIFT_FILE"

// Names of the failpoints.
const (
	// ClaimCommitted: the sequencer committed a batch holding a
	// task.claimed event, no command of the batch is answered yet (server;
	// kill only).
	ClaimCommitted = "kill-after-claim-commit"
	// SnapshotMidWrite: half of the snapshot's content is written to the
	// .tmp file (kill only).
	SnapshotMidWrite = "snapshot-mid-write"
	// SnapshotAfterTmpWrite: the snapshot's .tmp file is written and
	// fsynced, not yet renamed (kill only).
	SnapshotAfterTmpWrite = "snapshot-after-tmp-write"
	// BlobWrite: a blob write or the write probe of the data directory is
	// about to create its file (error or kill).
	BlobWrite = "blob-write"
	// CommitWrite: the bbolt log's transaction is built, its commit (the
	// writes of the pages and their fdatasyncs) has not started; an error
	// action fails the commit as a failed write would, nothing reaching
	// the file (error or kill).
	CommitWrite = "commit-write"
	// CommitSync: the bbolt log's transaction reached the file; an error
	// action fails the commit as a failed fdatasync of its meta page
	// would, the page cache holding the batch (error or kill).
	CommitSync = "commit-sync"
	// ClaimBeforeSend: the device committed the claim key, body and sealed
	// token; the request has not left (device; kill only).
	ClaimBeforeSend = "claim-before-send"
	// ClaimAfterResponse: the server answered the claim, the device has not
	// stored it (device; kill only).
	ClaimAfterResponse = "claim-after-response"
	// StartAfterResponse: the server answered start, the device has not
	// stored the answer (device; kill only).
	StartAfterResponse = "start-after-response"
	// SideFileWritten: a side file's content (internal/durable: the head
	// record, the initial admin token, the checkpoint key) is written to
	// its .tmp file, not yet fsynced (error or kill).
	SideFileWritten = "side-file-written"
	// SideFileSynced: the side file's .tmp file is fsynced and closed, not
	// yet renamed (error or kill).
	SideFileSynced = "side-file-synced"
	// SideFileRenamed: the .tmp file is renamed over the side file, the
	// directory is not yet fsynced (error or kill).
	SideFileRenamed = "side-file-renamed"
)

// Points lists every failpoint and whether it can fail with an error
// (false: it can only kill the process).
var Points = map[string]bool{
	ClaimCommitted:        false,
	SnapshotMidWrite:      false,
	SnapshotAfterTmpWrite: false,
	BlobWrite:             true,
	CommitWrite:           true,
	CommitSync:            true,
	ClaimBeforeSend:       false,
	ClaimAfterResponse:    false,
	StartAfterResponse:    false,
	SideFileWritten:       true,
	SideFileSynced:        true,
	SideFileRenamed:       true,
}

// ActionKill is the action that kills the process at the point.
const ActionKill = "kill"

// errorActions are the error actions and the error each one returns.
var errorActions = map[string]error{
	"enospc": syscall.ENOSPC,
	"eio":    syscall.EIO,
}

// Errors of the package.
var (
	// ErrUnknownPoint: the name is not one of Points.
	ErrUnknownPoint = errors.New("failpoint: unknown failpoint")
	// ErrBadAction: the action is unknown or the point cannot take it.
	ErrBadAction = errors.New("failpoint: bad action")
	// ErrNotBuilt: the binary was built without the failpoints tag.
	ErrNotBuilt = errors.New("failpoint: built without the failpoints tag")
)

// action is one configured point: kill, or fail with err.
type action struct {
	kill bool
	err  error
}

// Parse reads a configuration list (the format of Env) into point names
// and actions. An empty list enables nothing.
func Parse(spec string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, act, found := strings.Cut(item, "=")
		name, act = strings.TrimSpace(name), strings.TrimSpace(act)
		if !found {
			act = ActionKill
		}
		if _, err := resolve(name, act); err != nil {
			return nil, err
		}
		out[name] = act
	}
	return out, nil
}

// resolve checks one point and action.
func resolve(name, act string) (action, error) {
	canErr, ok := Points[name]
	if !ok {
		return action{}, fmt.Errorf("%w %q", ErrUnknownPoint, name)
	}
	if act == ActionKill {
		return action{kill: true}, nil
	}
	err, ok := errorActions[act]
	if !ok || !canErr {
		return action{}, fmt.Errorf("%w %q for %s", ErrBadAction, act, name)
	}
	return action{err: err}, nil
}
