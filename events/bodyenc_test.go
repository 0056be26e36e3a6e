package events

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// bodyFiller sets every field of a value to random values that cross the
// msgpack header boundaries of strings, integers, arrays and maps, nil and
// empty included.
type bodyFiller struct{ r *rand.Rand }

var (
	fillLens = []int{0, 1, 31, 32, 255, 256, 65535, 65536}
	fillInts = []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	fillUints = []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		math.MaxInt64 + 1, math.MaxUint64}
)

func (f *bodyFiller) str() string {
	n := fillLens[f.r.IntN(len(fillLens))]
	return strings.Repeat("ü", n/2) + strings.Repeat("k", n%2+f.r.IntN(2))
}

func (f *bodyFiller) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.str())
	case reflect.Bool:
		v.SetBool(f.r.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		v.SetInt(fillInts[f.r.IntN(len(fillInts))])
	case reflect.Uint64:
		v.SetUint(fillUints[f.r.IntN(len(fillUints))])
	case reflect.Pointer:
		if f.r.IntN(3) == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			f.fill(v.Field(i))
		}
	case reflect.Slice:
		switch f.r.IntN(4) {
		case 0:
			v.SetZero()
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			n := []int{1, 15, 16, 17}[f.r.IntN(4)]
			v.Set(reflect.MakeSlice(v.Type(), n, n))
			for i := range n {
				f.fill(v.Index(i))
			}
		}
	case reflect.Map:
		switch f.r.IntN(4) {
		case 0:
			v.SetZero()
		case 1:
			v.Set(reflect.MakeMap(v.Type()))
		default:
			m := reflect.MakeMap(v.Type())
			for range []int{1, 3, 16, 17}[f.r.IntN(4)] {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				f.fill(k)
				k.SetString(k.String() + string(rune(0x61+f.r.IntN(26))))
				f.fill(e)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	default:
		panic("bodyFiller: no filler for " + v.Type().String())
	}
}

// TestAppendBodyMatchesMarshal: for every event type, AppendBody writes
// exactly the bytes EncodeBody (ledger.Marshal) writes, whatever the
// field values; a field added to a body type and not to its hand-written
// encoder fails here.
func TestAppendBodyMatchesMarshal(t *testing.T) {
	f := &bodyFiller{r: rand.New(rand.NewPCG(3, 4))}
	for _, typ := range AllEventTypes() {
		for i := range 60 {
			body := codecs[typ].new()
			f.fill(reflect.ValueOf(body).Elem())
			want, err := EncodeBody(body)
			if err != nil {
				t.Fatal(err)
			}
			prefix := []byte{0xc0, 0x01}
			got, err := AppendBody(bytes.Clone(prefix), body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
				t.Fatalf("%s case %d: AppendBody wrote\n%x\nledger.Marshal wrote\n%x", typ, i, got[len(prefix):], want)
			}
		}
	}
}
