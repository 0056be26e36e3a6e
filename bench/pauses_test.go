package bench

import (
	"testing"
	"time"
)

// The tail is the commands whose total reached the p99 (nearest rank),
// each phase averaged over them alone.
func TestTailAveragesThePhasesOfTheSlowestHundredth(t *testing.T) {
	const n = 100
	wait, commit, total := make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		wait[i], commit[i] = time.Millisecond, 5*time.Millisecond
	}
	// The two slowest: one waited long, one committed long.
	wait[17], commit[17] = 20*time.Millisecond, 5*time.Millisecond
	wait[90], commit[90] = time.Millisecond, 40*time.Millisecond
	for i := range n {
		total[i] = wait[i] + commit[i]
	}
	from, means := tail([][]time.Duration{wait, commit, total})
	if from != 25*time.Millisecond {
		t.Errorf("tail from %s, want the p99 25ms", from)
	}
	want := []time.Duration{(20*time.Millisecond + time.Millisecond) / 2, (5*time.Millisecond + 40*time.Millisecond) / 2, (25*time.Millisecond + 41*time.Millisecond) / 2}
	for i := range want {
		if means[i] != want[i] {
			t.Fatalf("tail means %v, want %v", means, want)
		}
	}
	if from, means := tail([][]time.Duration{nil, nil}); from != 0 || means != nil {
		t.Errorf("an empty run's tail: %s %v, want none", from, means)
	}
}
