package jetstream_test

import (
	"errors"
	"testing"
	"time"

	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
)

func openLease(t *testing.T, url, name string, ttl time.Duration) *jetstream.Lease {
	t.Helper()
	l, err := jetstream.Open(jetstream.Config{URL: url, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	le, err := l.Lease(ttl)
	if err != nil {
		t.Fatal(err)
	}
	return le
}

// TestLeaseIsCompareAndSet: of two nodes, the second cannot acquire a
// living lease; a renewal at a revision that is not the key's is lost; the
// holder renews and releases at its own revision, after which the other
// acquires.
func TestLeaseIsCompareAndSet(t *testing.T) {
	s := jstest.Server(t, false)
	a := openLease(t, s.ClientURL(), "L1", time.Minute)
	b := openLease(t, s.ClientURL(), "L1", time.Minute)
	if _, _, err := a.Current(); !errors.Is(err, jetstream.ErrNoLease) {
		t.Fatalf("current of an empty bucket: %v", err)
	}
	rev, err := a.Acquire([]byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire([]byte("b")); !errors.Is(err, jetstream.ErrLeaseHeld) {
		t.Fatalf("second acquire: %v, want ErrLeaseHeld", err)
	}
	if _, err := b.Renew([]byte("b"), rev+1); !errors.Is(err, jetstream.ErrLeaseLost) {
		t.Fatalf("renew at a wrong revision: %v, want ErrLeaseLost", err)
	}
	next, err := a.Renew([]byte("a"), rev)
	if err != nil || next <= rev {
		t.Fatalf("renew: %d %v", next, err)
	}
	if _, err := a.Renew([]byte("a"), rev); !errors.Is(err, jetstream.ErrLeaseLost) {
		t.Fatalf("renew at the old revision: %v, want ErrLeaseLost", err)
	}
	if v, r, err := b.Current(); err != nil || string(v) != "a" || r != next {
		t.Fatalf("current: %q %d %v", v, r, err)
	}
	if err := a.Release(rev); !errors.Is(err, jetstream.ErrLeaseLost) {
		t.Fatalf("release at the old revision: %v, want ErrLeaseLost", err)
	}
	if err := a.Release(next); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire([]byte("b")); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
}

// TestLeaseExpiresWhenNotRenewed: a lease nobody renews is gone after its
// TTL, and another node acquires it.
func TestLeaseExpiresWhenNotRenewed(t *testing.T) {
	s := jstest.Server(t, false)
	ttl := 500 * time.Millisecond
	a := openLease(t, s.ClientURL(), "L2", ttl)
	b := openLease(t, s.ClientURL(), "L2", ttl)
	if _, err := a.Acquire([]byte("a")); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	jstest.Eventually(t, 20*ttl, "the lease expires", func() error {
		_, err := b.Acquire([]byte("b"))
		return err
	})
	t.Logf("acquired %v after the last write (TTL %v)", time.Since(began), ttl)
	if v, _, err := a.Current(); err != nil || string(v) != "b" {
		t.Fatalf("current after expiry: %q %v", v, err)
	}
}
