package bench

import (
	"testing"
	"time"
)

// TestPhaseLogKeepsEveryCommandInOrder: commands' phases added across
// several blocks come back as one column per phase, every command in the
// order it was added.
func TestPhaseLogKeepsEveryCommandInOrder(t *testing.T) {
	var l phaseLog
	if cols := l.columns(); len(cols) != len(phaseNames) || len(cols[0]) != 0 {
		t.Fatalf("an empty log gives %d columns of %d", len(cols), len(cols[0]))
	}
	const n = 2*phaseBlock + 7
	for j := range n {
		var d [len(phaseNames)]time.Duration
		for i := range d {
			d[i] = time.Duration(j*len(phaseNames) + i)
		}
		l.add(d)
	}
	if len(l.blocks) != 3 {
		t.Fatalf("%d commands in %d blocks, want 3", n, len(l.blocks))
	}
	cols := l.columns()
	for i, col := range cols {
		if len(col) != n {
			t.Fatalf("phase %d: %d entries, want %d", i, len(col), n)
		}
		for j, d := range col {
			if d != time.Duration(j*len(phaseNames)+i) {
				t.Fatalf("phase %d, command %d: %v", i, j, d)
			}
		}
	}
}
