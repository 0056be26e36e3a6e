package bench

import "testing"

func TestZZScratchGen(t *testing.T) {
	h, err := GenerateHistory(HistoryConfig{Dir: t.TempDir() + "/h", Finished: 200000, Live: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events %v CPU %v (%.0f tasks/s) %d bytes", h.Events, h.Took, h.CPU, 200000/h.Took.Seconds(), h.FileBytes)
}
