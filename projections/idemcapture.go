package projections

import (
	"maps"
	"slices"
	"strings"
)

// A capture of the idempotency records copies nothing that grows with
// them: the order (IdemView.Order) is append-only at the end and popped
// at the front, and its entries and records never change once recorded,
// so a capture keeps the slice as it is (later appends land beyond its
// length, pops move the state's slice, not the capture's). The tombstones
// added since the load are kept the same way (IdemView.tombs). Which
// record of an id is alive is worked out when encoding, outside any lock:
// the newest entry of the id names it, unless expiry dropped it while the
// entry stayed (IdemView.dropped, empty unless an id is recorded twice).

// idemCapture is the idempotency part of a Capture.
type idemCapture struct {
	order   []IdemEntry            // shared with the state: read only
	dropped map[string]*IdemRecord // a copy
	loaded  *loadedRecords         // immutable
	next    int
	filter  tombFilter // its newest segment copied
	tombs   []string   // KeepSettled: every tombstone (shared, read only); else none
	// ref: every record has its row in the read model, so a snapshot may
	// name records by seq; finished reads the rows of loaded ones.
	ref      bool
	finished FinishedStore
}

func (v *IdemView) capture(keep bool) idemCapture {
	c := idemCapture{order: v.Order, dropped: maps.Clone(v.dropped), loaded: v.loaded, next: v.next,
		filter: v.filter.capture(), ref: v.rmOn, finished: v.finished}
	if keep { // nothing drains them: the snapshot carries them
		c.tombs = v.tombs
	}
	return c
}

// liveGroup is one id of the captured order and its alive record (nil
// when none): the entries at pos name it.
type liveGroup struct {
	id  string
	rec *IdemRecord
	pos []int32 // positions of the id's entries in the captured order
	k   int32   // the record's index in the encoded section, -1 before
}

// liveGroups groups the captured order's entries by id, in id order, and
// picks each id's alive record: the same records and ids as the state's
// Records and Order held when captured.
func (c *idemCapture) liveGroups() []liveGroup {
	type ent struct {
		id  string
		rec *IdemRecord
		pos int32
	}
	es := make([]ent, len(c.order))
	for i, e := range c.order {
		yieldEvery(i)
		es[i] = ent{e.ID, e.Rec, int32(i)}
	}
	slices.SortFunc(es, func(a, b ent) int {
		if x := strings.Compare(a.id, b.id); x != 0 {
			return x
		}
		return int(a.pos - b.pos)
	})
	gs := make([]liveGroup, 0, len(es))
	one := make([]int32, len(es)) // backing of the groups' positions
	for i := 0; i < len(es); {
		j := i
		var rec *IdemRecord
		for ; j < len(es) && es[j].id == es[i].id; j++ {
			one[j] = es[j].pos
			if es[j].rec != nil {
				rec = es[j].rec // the newest recording of the id
			}
		}
		if rec != nil && c.dropped[es[i].id] == rec {
			rec = nil
		}
		gs = append(gs, liveGroup{id: es[i].id, rec: rec, pos: one[i:j:j], k: -1})
		i = j
	}
	return gs
}

// findGroup returns the group of id, or nil.
func findGroup(gs []liveGroup, id string) *liveGroup {
	i, ok := slices.BinarySearchFunc(gs, id, func(g liveGroup, id string) int { return strings.Compare(g.id, id) })
	if !ok {
		return nil
	}
	return &gs[i]
}
