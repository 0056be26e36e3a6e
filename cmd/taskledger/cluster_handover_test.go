package main

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/ledger/jetstream/jstest"
	"taskledger/node/nodetest/proc"
)

// TestGracefulHandoverOfTheSequencer: two `serve --ledger` processes on
// three nats-server processes; four clients create tasks through the
// follower (each command forwarded to the sequencer, retried with its
// idempotency key on 503) while the sequencer gets SIGTERM. The follower takes the lease and sequences; every
// acknowledged command is in the stream; the longest time without an
// acknowledgement around the handover is reported (docs/operations.md).
func TestGracefulHandoverOfTheSequencer(t *testing.T) {
	url := proc.NATSURLs(proc.NATSCluster(t, 3))
	bin := proc.Taskledger(t)
	a := startClusterNode(t, bin, url)
	a.waitReady(t, 30*time.Second)
	a.p.WaitLine(t, 0, "sequencing: this node holds the lease")
	createTaskID(t, a) // the sequencer writes
	b := startClusterNode(t, bin, url)
	b.waitReady(t, 30*time.Second)
	b.p.WaitLine(t, 0, "following the sequencer")
	tok := readToken(t, a)

	type ack struct {
		at time.Time
		id string
	}
	var (
		mu   sync.Mutex
		acks []ack
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	c := proc.NewClient()
	c.HTTP.Timeout = 10 * time.Second
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				key := uuid.NewString()
				for {
					select {
					case <-stop:
						return
					default:
					}
					r, err := c.Do(b.url, "POST", "/api/v1/admin/tasks", tok,
						map[string]any{"payload": map[string]any{"n": 1}, "authorize": map[string]any{"ttl_seconds": 3600}},
						map[string]string{"Idempotency-Key": key})
					if err == nil && r.Status == http.StatusCreated {
						id, _ := r.JSON()["id"].(string)
						mu.Lock()
						acks = append(acks, ack{time.Now(), id}) //tl:wallclock when an answer came (handover figure)
						mu.Unlock()
						break
					}
					if err == nil && r.Status != http.StatusServiceUnavailable {
						t.Errorf("create through the follower: %s", r)
						return
					}
				}
			}
		}()
	}
	countAcks := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	jstest.Eventually(t, 20*time.Second, "load through the follower", func() error {
		if n := countAcks(); n < 50 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	termAt := time.Now() //tl:wallclock handover figure
	a.p.Signal(syscall.SIGTERM)
	if code := a.p.Wait(t); code != 0 {
		t.Fatalf("the sequencer's graceful stop: exit %d\n%s", code, a.p.Stderr())
	}
	b.p.WaitLine(t, 0, "sequencing: this node holds the lease")
	before := countAcks()
	jstest.Eventually(t, 20*time.Second, "acknowledgements after the handover", func() error {
		if n := countAcks() - before; n < 50 {
			return fmt.Errorf("%d acknowledged after", n)
		}
		return nil
	})
	close(stop)
	wg.Wait()

	mu.Lock()
	sort.Slice(acks, func(i, j int) bool { return acks[i].at.Before(acks[j].at) })
	var gap time.Duration
	last := termAt
	for _, x := range acks {
		if x.at.Before(termAt) {
			continue
		}
		if d := x.at.Sub(last); d > gap {
			gap = d
		}
		last = x.at
	}
	ids := make([]string, 0, len(acks))
	for _, x := range acks {
		ids = append(ids, x.id)
	}
	mu.Unlock()
	t.Logf("graceful handover (SIGTERM of the sequencer, lease TTL 1s): the longest time without an acknowledgement after SIGTERM was %v; %d commands acknowledged in all",
		gap.Round(time.Millisecond), len(ids))

	exp := proc.Exec(t, bin, "export", "--ledger", url)
	if exp.Code != 0 {
		t.Fatalf("export: %d %s", exp.Code, exp.Stderr)
	}
	for _, id := range ids {
		if !strings.Contains(exp.Stdout, id) {
			t.Fatalf("acknowledged task %s is not in the stream", id)
		}
	}
	if v := proc.Exec(t, bin, "verify", "--ledger", url); v.Code != 0 {
		t.Fatalf("verify --ledger: %d %s", v.Code, v.Stderr)
	}
}
