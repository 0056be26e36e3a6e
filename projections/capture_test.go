package projections

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"taskledger/ledger"
)

// fill sets every field reachable from v to a non-zero value (pointers
// allocated, slices and maps given one element).
func fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth > 4 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), depth+1)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint64, reflect.Uint32, reflect.Uint8:
		v.SetUint(7)
	}
}

// aliases reports a path where a and b share mutable memory (a pointer,
// slice backing array or map).
func aliases(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return aliases(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if a.Type().Field(i).IsExported() {
				if p := aliases(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
					return p
				}
			}
		}
	case reflect.Slice:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for i := 0; i < a.Len(); i++ {
			if p := aliases(a.Index(i), b.Index(i), path+"[]"); p != "" {
				return p
			}
		}
	case reflect.Map:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
	}
	return ""
}

// TestCaptureSharesNothing guards clone against a field added later and
// forgotten: every field of a fully populated task and device is copied,
// and no pointer, slice or map is shared with the original.
func TestCaptureSharesNothing(t *testing.T) {
	var task Task
	fill(reflect.ValueOf(&task).Elem(), 0)
	var dev Device
	fill(reflect.ValueOf(&dev).Elem(), 0)
	for _, c := range []struct {
		name      string
		orig, cpy any
	}{{"Task", &task, task.clone()}, {"Device", &dev, dev.clone()}} {
		if !reflect.DeepEqual(c.orig, c.cpy) {
			t.Errorf("%s clone differs from the original", c.name)
		}
		if p := aliases(reflect.ValueOf(c.orig), reflect.ValueOf(c.cpy), c.name); p != "" {
			t.Errorf("%s clone shares %s with the original", c.name, p)
		}
	}
}

// TestCaptureIsAPointInTime: a capture encodes to the canonical bytes of
// the moment it was taken, whatever happens to the projections after or
// while it is encoded.
func TestCaptureIsAPointInTime(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"taskledger.db"} {
		b, err := os.ReadFile(filepath.Join("testdata", "v1", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, err := Rebuild(store, Config{IdempotencyRetentionMs: 72 * 3600 * 1000})
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	c := s.Capture()
	var during []byte // encoded while the projections change (the snapshotter's goroutine; -race checks the sharing)
	var derr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		during, derr = c.Encode()
	}()
	for _, task := range s.Tasks { // what later events do, in place
		if task.Terminal() { // the capture shares an ended task: applying an event copies it first
			task = s.unshare(task)
		}
		task.State, task.Version = StateCanceled, task.Version+1
		if task.Claim != nil {
			task.Claim.LeaseExpiresAt++
		}
		if task.Exec != nil {
			task.Exec.Step = "moved on"
		}
		task.LateReports = append(task.LateReports, LateReport{Outcome: "fail"})
		if len(task.Evidence) > 0 {
			task.Evidence[0].Kind = "changed"
		}
	}
	for _, d := range s.Devices {
		d.Status = DeviceStatusRevoked
		if len(d.RequiredChecks) > 0 {
			d.RequiredChecks[0] = "changed"
		}
	}
	s.Idem.put(&IdemRecord{Scope: "device:d:op", Key: "later", At: s.Head.At, Outcome: OutcomeAccepted})
	s.Idem.expire(s.Head.At+72*3600*1000, 72*3600*1000) // every record expires: records dropped, tombstones added
	s.Head.Hash[0] ^= 0xff
	<-done
	got, err := c.Encode()
	if err != nil || derr != nil {
		t.Fatal(err, derr)
	}
	if !bytes.Equal(got, want) || !bytes.Equal(during, want) {
		t.Fatal("the capture changed with the projections")
	}
}
