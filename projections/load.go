package projections

import (
	"fmt"
	"sort"
	"strings"

	"taskledger/events"
	"taskledger/ledger"
)

// Source is the read side of the log a rebuild needs.
type Source interface {
	Range(after uint64, fn func(*ledger.Event) error) error
	SoftRecords(prefix string, fn func(key string, value []byte) error) error
}

// transientSource is a Source that can lend each event for the call only
// (ledger.Store.RangeTransient): Apply keeps copies of an event's values,
// never the event, its Body, PrevHash or Idem.
type transientSource interface {
	RangeTransient(after uint64, fn func(*ledger.Event) error) error
}

// Replay applies every event after s.Head from src. progress, if set, is
// called after every event.
func (s *State) Replay(src Source, progress func(seq uint64)) error {
	rangeFn := src.Range
	if t, ok := src.(transientSource); ok {
		rangeFn = t.RangeTransient
	}
	var strs events.Strings
	return rangeFn(s.Head.Seq, func(e *ledger.Event) error {
		if err := s.applyShared(e, &strs); err != nil {
			return err
		}
		if progress != nil {
			progress(e.Seq)
		}
		return nil
	})
}

// Rebuild builds the projections from the whole log, then loads the soft
// records. Tasks that settle on the way are dropped (the read model on
// disk holds them).
func Rebuild(src Source, cfg Config) (*State, error) {
	s, err := RebuildSettling(src, cfg, func(*Task) error { return nil }, func(string) error { return nil }, nil)
	if s != nil {
		s.Idem.rows = nil
	}
	return s, err
}

// RebuildSettling replays the whole log like Rebuild, handing every task
// to onSettle as it settles and every tombstone to onTomb as its key
// expires, instead of keeping them (a rebuild of the read model writes
// them, verify compares them): the replay holds only what is live at each
// point. The first error ends it. Rebuild drops them: the read model on
// disk has them.
// progress, if set, is called after every event.
func RebuildSettling(src Source, cfg Config, onSettle func(*Task) error, onTomb func(t string) error, progress func(seq uint64)) (*State, error) {
	s := New(cfg)
	s.onSettle = onSettle
	if !cfg.KeepSettled { // else nothing is on disk: the projections keep them
		s.Idem.rows = map[uint64]*IdemRecord{}
		s.Idem.onTomb = func(t string) {
			if s.settleErr == nil {
				s.settleErr = onTomb(t)
			}
		}
	}
	if h, ok := src.(interface{ Head() (ledger.Head, error) }); ok {
		if head, err := h.Head(); err == nil {
			// Most events record an idempotency key: size the records
			// once instead of growing a map of millions step by step.
			s.Idem.Records = make(map[string]*IdemRecord, min(head.Seq, presizeRecords))
		}
	}
	if err := s.Replay(src, progress); err != nil {
		return nil, err
	}
	if s.settleErr != nil {
		return nil, s.settleErr
	}
	s.onSettle, s.Idem.onTomb = nil, nil
	if err := s.LoadSoft(src); err != nil {
		return nil, err
	}
	return s, nil
}

// presizeRecords bounds the idempotency records a rebuild sizes its map
// for.
const presizeRecords = 1 << 21

// Soft-record key prefixes (must match commands.PresenceKey).
const (
	softPresence = "presence/"
	softIdem     = "idem/"
	softIdemAt   = "idemt/"
	softLease    = "lease/"
)

// LoadSoft loads device presence (marked Restored: a restarted server
// waits for the next heartbeat), the running leases of quiet heartbeats
// and the soft idempotency records ("no task" outcomes, quiet heartbeats;
// expired ones too, until the collector deletes them).
func (s *State) LoadSoft(src Source) error {
	src, err := readSoftOnce(src)
	if err != nil {
		return err
	}
	err = src.SoftRecords(softPresence, func(key string, v []byte) error {
		var p Presence
		if err := ledger.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("%w: presence %s: %v", ledger.ErrCorrupt, key, err)
		}
		p.Restored = true
		s.Presence[strings.TrimPrefix(key, softPresence)] = &p
		return nil
	})
	if err != nil {
		return err
	}
	if err := s.loadGone(src); err != nil {
		return err
	}
	err = src.SoftRecords(softLease, func(key string, v []byte) error {
		var l SoftLease
		if err := ledger.Unmarshal(v, &l); err != nil {
			return fmt.Errorf("%w: running lease %s: %v", ledger.ErrCorrupt, key, err)
		}
		s.ApplySoftLease(&l)
		return nil
	})
	if err != nil {
		return err
	}
	type loaded struct {
		r      *IdemRecord
		legacy bool // stored by its id alone (SoftIdemPrefix)
	}
	var recs []loaded
	for _, prefix := range []string{softIdemAt, softIdem} {
		err = src.SoftRecords(prefix, func(key string, v []byte) error {
			r, err := DecodeSoftIdem(key, v)
			if err != nil {
				return err
			}
			recs = append(recs, loaded{r, prefix == softIdem})
			return nil
		})
		if err != nil {
			return err
		}
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].r.At < recs[j].r.At })
	for _, l := range recs {
		raw, err := EncodeSoftIdem(l.r) // older msgpack records too: held compact
		if err != nil {
			return fmt.Errorf("%w: %v", ledger.ErrCorrupt, err)
		}
		s.Idem.putSoft(l.r, raw, l.legacy)
	}
	if s.cfg.IdempotencyRetentionMs > 0 {
		s.Idem.expire(s.Head.At, s.cfg.IdempotencyRetentionMs)
	}
	return nil
}

// WholeSoftReader is a Source whose every SoftRecords call reads its whole
// soft store, whatever the prefix (a cluster's key-value bucket, which is
// watched whole): LoadSoft reads it once and serves each prefix from that
// copy instead of reading it once a prefix.
type WholeSoftReader interface {
	Source
	SoftReadsWhole()
}

// softCopy serves SoftRecords from one read of the whole soft store, in
// the order that read gave (its values the source's copies: a
// WholeSoftReader's values outlive the call).
type softCopy struct {
	Source
	keys []string
	vals [][]byte
}

func readSoftOnce(src Source) (Source, error) {
	if _, ok := src.(WholeSoftReader); !ok {
		return src, nil
	}
	c := &softCopy{Source: src}
	err := src.SoftRecords("", func(k string, v []byte) error {
		c.keys, c.vals = append(c.keys, k), append(c.vals, v)
		return nil
	})
	return c, err
}

func (c *softCopy) SoftRecords(prefix string, fn func(key string, value []byte) error) error {
	for i, k := range c.keys {
		if strings.HasPrefix(k, prefix) {
			if err := fn(k, c.vals[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Canonical returns the projections' canonical bytes: equal bytes mean
// equal projections. Soft state and indexes are not included. It is
// Capture().Encode(), so a snapshot taken from a capture has these bytes.
func (s *State) Canonical() ([]byte, error) { return s.Capture().Encode() }

// CanonicalWithSoft is Canonical followed by the soft running leases: equal
// bytes mean equal projections, quiet heartbeats included. A rebuild that
// loaded the soft records (Rebuild, LoadSoft) equals the live state here.
func (s *State) CanonicalWithSoft() ([]byte, error) {
	b, err := s.Canonical()
	if err != nil {
		return nil, err
	}
	soft, err := ledger.Marshal(s.SoftLeases())
	if err != nil {
		return nil, err
	}
	return append(b, soft...), nil
}

// legacyOutcome reads the outcome of a soft idempotency record written
// before records held a domain Outcome: an HTTP status under "status"
// (204 for "no task", 200 for a quiet heartbeat).
func legacyOutcome(v []byte, r *IdemRecord) error {
	var old struct {
		Status int `msgpack:"status"`
	}
	if err := ledger.Unmarshal(v, &old); err != nil {
		return fmt.Errorf("%w: idempotency record: %v", ledger.ErrCorrupt, err)
	}
	switch old.Status {
	case 200:
		r.Outcome = OutcomeAccepted
	case 204:
		r.Outcome = OutcomeNoTask
	default:
		return fmt.Errorf("%w: idempotency record %s/%s has no outcome (status %d)", ledger.ErrCorrupt, r.Scope, r.Key, old.Status)
	}
	return nil
}
