package jetstream

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"taskledger/ledger/jetstream/jstest"
)

// Requests whose answer never comes (a resource between leaders, a
// connection whose server went away) are asked again; writes whose answer
// was lost after they were stored resolve to what they did.

// silentStream drops the answers of the first `drop` stream info
// requests: the request waits until its context ends, as a request to a
// stream without a leader does.
type silentStream struct {
	natsjs.Stream
	drop  int32
	calls atomic.Int32
}

func (s *silentStream) Info(ctx context.Context, opts ...natsjs.StreamInfoOpt) (*natsjs.StreamInfo, error) {
	if s.calls.Add(1) <= s.drop {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Stream.Info(ctx, opts...)
}

// lostAnswerKV stores the first Create and Update it is given, then
// answers them as if the answer was lost (the context's deadline).
type lostAnswerKV struct {
	natsjs.KeyValue
	creates, updates atomic.Int32
}

func (kv *lostAnswerKV) Create(ctx context.Context, key string, value []byte, opts ...natsjs.KVCreateOpt) (uint64, error) {
	rev, err := kv.KeyValue.Create(ctx, key, value, opts...)
	if kv.creates.Add(1) == 1 && err == nil {
		return 0, context.DeadlineExceeded
	}
	return rev, err
}

func (kv *lostAnswerKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	next, err := kv.KeyValue.Update(ctx, key, value, rev)
	if kv.updates.Add(1) == 1 && err == nil {
		return 0, context.DeadlineExceeded
	}
	return next, err
}

func openSingle(t *testing.T, timeout time.Duration) *Log {
	t.Helper()
	s := jstest.Server(t, false)
	l, err := Open(Config{URL: s.ClientURL(), Name: "REQ", Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestAnUnansweredReadIsAskedAgain(t *testing.T) {
	l := openSingle(t, 10*time.Second)
	s := &silentStream{Stream: l.stream, drop: 2}
	l.stream = s
	if _, err := l.Head(); err != nil {
		t.Fatalf("head after two unanswered stream info requests: %v", err)
	}
	if n := s.calls.Load(); n != 3 {
		t.Fatalf("stream info asked %d times, want 3", n)
	}
}

func TestARequestNeverAnsweredFailsAtItsBound(t *testing.T) {
	l := openSingle(t, 2*time.Second)
	s := &silentStream{Stream: l.stream, drop: 1 << 30}
	l.stream = s
	_, err := l.Head()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("head with no answer ever: %v, want a deadline", err)
	}
	if n := s.calls.Load(); n < 2 {
		t.Fatalf("stream info asked %d times, want it asked again", n)
	}
}

func TestARefusalIsNotAskedAgain(t *testing.T) {
	l := openSingle(t, 5*time.Second)
	le, err := l.Lease(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kv := &lostAnswerKV{KeyValue: le.kv}
	le.kv = kv
	kv.updates.Store(1) // no lost answer: the refusal is the answer
	if _, err := le.Renew([]byte("a"), 7); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew of a lease nobody holds: %v, want ErrLeaseLost", err)
	}
	if n := kv.updates.Load(); n != 2 {
		t.Fatalf("update asked %d times, want once", n-1)
	}
}

func TestLeaseWritesWhoseAnswerWasLostHoldTheLease(t *testing.T) {
	l := openSingle(t, 5*time.Second)
	le, err := l.Lease(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kv := &lostAnswerKV{KeyValue: le.kv}
	le.kv = kv
	rev, err := le.Acquire([]byte("a"))
	if err != nil {
		t.Fatalf("acquire whose first answer was lost: %v", err)
	}
	if _, cur, err := le.Current(); err != nil || cur != rev {
		t.Fatalf("acquire returned revision %d, the lease is at %d (%v)", rev, cur, err)
	}
	next, err := le.Renew([]byte("a"), rev)
	if err != nil {
		t.Fatalf("renew whose first answer was lost: %v", err)
	}
	if _, cur, err := le.Current(); err != nil || cur != next || next <= rev {
		t.Fatalf("renew returned revision %d (from %d), the lease is at %d (%v)", next, rev, cur, err)
	}
	if _, err := le.Renew([]byte("a"), next); err != nil {
		t.Fatalf("renew at the revision returned: %v", err)
	}
}
