package testfill

import "testing"

type inner struct {
	S    string
	N    int64
	Soft string `msgpack:"-"`
}

type outer struct {
	A, B  string
	P     *inner
	L     []inner
	M     map[string]bool
	U     uint64
	skip  string
	Flags []uint8
}

// Every exported field gets a value, distinct strings stay distinct, and
// soft (msgpack:"-") and unexported fields stay zero.
func TestFilledSetsEveryFieldDistinctly(t *testing.T) {
	f := &Filler{}
	o := Filled[outer](f)
	if o.A == "" || o.B == "" || o.A == o.B || o.P == nil || o.P.S == "" || o.P.N == 0 || len(o.L) != 2 ||
		o.L[0].S == o.L[1].S || len(o.M) != 2 || o.U == 0 || len(o.Flags) != 2 {
		t.Fatalf("not every field filled distinctly: %+v", o)
	}
	if o.P.Soft != "" || o.skip != "" {
		t.Fatalf("soft or unexported field filled: %+v", o)
	}
	if again := Filled[outer](f); again.A == o.A {
		t.Fatal("a second value repeats the first's strings")
	}
}
