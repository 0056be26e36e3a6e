package projections

import (
	"fmt"
	"sync"

	"taskledger/events"
	"taskledger/ledger"
)

// applier folds one event whose body is of the event type's current
// body type into the state.
type applier func(s *State, e *ledger.Event, body any) error

// on adapts a method that folds one body type into an applier.
func on[T any](f func(s *State, e *ledger.Event, b *T) error) applier {
	return func(s *State, e *ledger.Event, body any) error {
		b, ok := body.(*T)
		if !ok {
			return fmt.Errorf("%w: %T as %s", events.ErrUnknownEvent, body, e.Type)
		}
		return f(s, e, b)
	}
}

// appliers maps every event type to the method that folds it; the
// methods live in files by family (apply_task.go, apply_authorization.go,
// apply_claim.go, apply_execution.go, apply_device.go,
// apply_admintoken.go).
// TestEveryEventTypeHasAnApplier keeps it complete.
var appliers = sync.OnceValue(func() map[events.Type]applier {
	return map[events.Type]applier{
		events.EvTaskCreated:               on((*State).applyCreated),
		events.EvTaskAmended:               on((*State).applyAmended),
		events.EvTaskReferenceImageSet:     on((*State).applyReferenceImageSet),
		events.EvTaskAuthorized:            on((*State).applyAuthorized),
		events.EvTaskAuthorizationRevoked:  on((*State).applyAuthorizationRevoked),
		events.EvTaskClaimed:               on((*State).applyClaimed),
		events.EvTaskClaimResumed:          on((*State).applyClaimResumed),
		events.EvTaskClaimRenewed:          on((*State).applyClaimRenewed),
		events.EvTaskReleased:              on((*State).applyReleased),
		events.EvTaskStarted:               on((*State).applyStarted),
		events.EvTaskHeartbeat:             on((*State).applyHeartbeat),
		events.EvTaskAwaitingConfirmation:  on((*State).applyExecStep),
		events.EvTaskResumed:               on((*State).applyExecStep),
		events.EvTaskCompleted:             on((*State).applyCompleted),
		events.EvTaskFailed:                on((*State).applyFailed),
		events.EvTaskLateReport:            on((*State).applyLateReport),
		events.EvTaskCancelRequested:       on((*State).applyCancelRequested),
		events.EvTaskCanceled:              on((*State).applyCanceled),
		events.EvTaskRecovered:             on((*State).applyRecovered),
		events.EvTaskEvidenceAttached:      on((*State).applyEvidenceAttached),
		events.EvDeviceRegistered:          on((*State).applyDeviceRegistered),
		events.EvDeviceRevoked:             on((*State).applyDeviceRevoked),
		events.EvDeviceClaimRequiresManual: on((*State).applyDeviceClaimRequiresManual),
		events.EvAdminTokenCreated:         on((*State).applyAdminTokenCreated),
		events.EvAdminTokenRevoked:         on((*State).applyAdminTokenRevoked),
	}
})
