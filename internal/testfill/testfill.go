// Package testfill fills values for round-trip tests of the encoders: every
// exported field reachable from a value gets a value no other field gets
// (slices and maps get two elements), so a field an encoding forgets, or
// reads back into another field, shows when the decoded value is compared
// with the original. Fields tagged msgpack:"-" (soft state, not part of
// any encoding) are left zero. Only tests import it.
package testfill

import (
	"fmt"
	"reflect"
)

// Filler hands out distinct values; one Filler used for several values
// keeps them distinct from each other too.
type Filler struct{ n int }

// Fill sets v and everything reachable from it. It panics on a kind it
// has no rule for: a test helper's programming error, not an input.
func (f *Filler) Fill(v reflect.Value) {
	f.n++
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.Fill(v.Elem())
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if sf := v.Type().Field(i); sf.IsExported() && sf.Tag.Get("msgpack") != "-" {
				f.Fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		f.Fill(v.Index(0))
		f.Fill(v.Index(1))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.Fill(k)
			f.Fill(e)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", f.n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(f.n) * 1000003)
	case reflect.Uint64, reflect.Uint8:
		v.SetUint(uint64(f.n))
	default:
		panic("testfill: no rule for " + v.Kind().String())
	}
}

// Filled returns a new T filled by f.
func Filled[T any](f *Filler) *T {
	var v T
	f.Fill(reflect.ValueOf(&v).Elem())
	return &v
}
