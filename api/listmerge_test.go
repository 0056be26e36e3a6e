package api

import (
	"fmt"
	"testing"

	"taskledger/wire"
)

// TestListMergeKeepsOneCopyInOneOrder: the live and settled halves of a
// page merge newest first; a task in both (it settled between the two
// reads) is listed once; the cursor names the first task left out.
func TestListMergeKeepsOneCopyInOneOrder(t *testing.T) {
	task := func(seq uint64) listedTask { return listedTask{seq, wire.TaskDetail{ID: fmt.Sprint("t", seq)}} }
	ids := func(docs []wire.TaskDetail) string {
		s := ""
		for _, d := range docs {
			s += d.ID + " "
		}
		return s
	}
	for _, c := range []struct {
		live, settled []uint64
		limit         int
		want, cursor  string
	}{
		{[]uint64{9, 5}, []uint64{8, 7, 1}, 10, "t9 t8 t7 t5 t1 ", ""},
		{[]uint64{9, 5}, []uint64{8, 7, 1}, 3, "t9 t8 t7 ", "6"},
		{[]uint64{9, 5, 4}, []uint64{5, 3}, 3, "t9 t5 t4 ", "4"},
		{[]uint64{6}, []uint64{6}, 1, "t6 ", ""},
		{nil, []uint64{3, 2}, 1, "t3 ", "3"},
		{[]uint64{3, 2}, nil, 2, "t3 t2 ", ""},
		{nil, nil, 5, "", ""},
	} {
		var live, settled []listedTask
		for _, s := range c.live {
			live = append(live, task(s))
		}
		for _, s := range c.settled {
			settled = append(settled, task(s))
		}
		got, cursor := mergeNewestFirst(live, settled, c.limit)
		cur := ""
		if cursor != nil {
			cur = *cursor
		}
		if ids(got) != c.want || cur != c.cursor {
			t.Errorf("live %v settled %v limit %d: %q cursor %q, want %q cursor %q", c.live, c.settled, c.limit, ids(got), cur, c.want, c.cursor)
		}
	}
}
