package ledger

import "taskledger/internal/msgpack/mpread"

// decodeEventFast decodes an envelope as msgpack.Unmarshal does, by hand
// for the shapes Marshal writes (a map of the Event fields, a map or nil
// for actor and idem, integers, strings, binaries, any value as body).
// Replay decodes a million envelopes; reflection made that most of its
// time. It reports false on anything else (an unknown key, another type,
// a truncated value), and DecodeEvent then uses the generic decoder, so
// both give the same Event for every input (FuzzDecodeEvent).
//
// With an interner, the strings that repeat from event to event (type,
// actor, idempotency scope, the streams just read) are shared instead of
// allocated every time. With a transient interner (Store.RangeTransient)
// Body and PrevHash are slices of b and Idem is the interner's own.
func decodeEventFast(b []byte, e *Event, in *interner) bool {
	r := mpread.Reader{B: b}
	n, ok := r.MapLen()
	if !ok {
		return false
	}
	for range n {
		key, ok := r.Key()
		if !ok {
			return false
		}
		switch string(key) {
		case "seq":
			e.Seq, ok = r.Uint()
		case "stream":
			e.Stream, ok = in.stream(&r)
		case "stream_version":
			e.StreamVersion, ok = r.Uint()
		case "type":
			var t string
			t, ok = in.str(&r)
			e.Type = EventType(t)
		case "schema":
			var v uint64
			v, ok = r.Uint()
			e.Schema = int(v)
		case "at":
			var v uint64
			v, ok = r.Uint()
			e.At = int64(v)
		case "actor":
			ok = decodeActor(&r, &e.Actor, in)
		case "idem":
			ok = decodeIdem(&r, &e.Idem, in)
		case "body":
			start := r.P
			if r.Nil() { // the generic decoder leaves a nil body nil
				e.Body = nil
			} else if ok = r.Skip(0); ok && in.isTransient() {
				e.Body = b[start:r.P:r.P]
			} else if ok {
				e.Body = append(make([]byte, 0, r.P-start), b[start:r.P]...)
			}
		case "prev_hash":
			if in.isTransient() {
				e.PrevHash, ok = r.BinBytes()
			} else {
				e.PrevHash, ok = r.Bin()
			}
		case "hash":
			e.Hash, ok = r.Bin()
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

func decodeActor(r *mpread.Reader, a *Actor, in *interner) bool {
	if r.PeekNil() {
		return false // nil into a struct: left to the generic decoder
	}
	n, ok := r.MapLen()
	if !ok {
		return false
	}
	for range n {
		key, ok := r.Key()
		if !ok {
			return false
		}
		switch string(key) {
		case "kind":
			a.Kind, ok = in.str(r)
		case "id":
			a.ID, ok = in.str(r)
		case "owner":
			a.Owner, ok = in.str(r)
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

func decodeIdem(r *mpread.Reader, p **Idem, in *interner) bool {
	if r.Nil() {
		*p = nil
		return true
	}
	n, ok := r.MapLen()
	if !ok {
		return false
	}
	if *p == nil && in.isTransient() {
		in.idem = Idem{}
		*p = &in.idem
	} else if *p == nil {
		*p = new(Idem)
	}
	m := *p
	for range n {
		key, ok := r.Key()
		if !ok {
			return false
		}
		switch string(key) {
		case "scope":
			m.Scope, ok = in.str(r)
		case "key":
			m.Key, ok = r.Str()
		case "fingerprint":
			m.Fingerprint, ok = r.Bin()
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

// interner shares the strings a Range decodes again and again.
type interner struct {
	m map[string]string
	// streams are the last streams read, newest at next-1: the events of
	// a stream tend to follow each other.
	streams [4]string
	next    int
	// transient: Body and PrevHash alias the stored bytes, Idem is idem.
	transient bool
	idem      Idem
}

func (in *interner) isTransient() bool { return in != nil && in.transient }

// stream reads a stream name, shared when one of the last few streams
// read had it.
func (in *interner) stream(r *mpread.Reader) (string, bool) {
	if in == nil {
		return r.Str()
	}
	b, ok := r.StrBytes()
	if !ok {
		return "", false
	}
	for _, s := range in.streams {
		if s == string(b) {
			return s, true
		}
	}
	s := string(b)
	in.streams[in.next] = s
	in.next = (in.next + 1) % len(in.streams)
	return s, true
}

// internMax bounds an interner: strings beyond it are allocated.
const internMax = 1 << 14

// str reads a string, shared when it was read before (a nil interner
// always allocates).
func (in *interner) str(r *mpread.Reader) (string, bool) {
	if in == nil {
		return r.Str()
	}
	b, ok := r.StrBytes()
	if !ok {
		return "", false
	}
	if s, hit := in.m[string(b)]; hit {
		return s, true
	}
	s := string(b)
	if in.m == nil {
		in.m = make(map[string]string)
	}
	if len(in.m) < internMax {
		in.m[s] = s
	}
	return s, true
}
