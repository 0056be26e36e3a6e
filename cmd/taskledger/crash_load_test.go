package main_test

// The load of the crash campaign (crash_campaign_test.go): the server
// process across SIGKILL restarts and a client that retries every command
// with its Idempotency-Key until answered.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"taskledger/node/nodetest"
	"taskledger/node/nodetest/proc"
)

// liveServer is the current server process across restarts.
type liveServer struct {
	mu      sync.Mutex
	s       *proc.Server
	changed chan struct{} // closed when s is replaced
}

func (l *liveServer) current() (string, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.URL, l.changed
}

func (l *liveServer) replace(s *proc.Server) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.s = s
	close(l.changed)
	l.changed = make(chan struct{})
}

// crashLoad is the state shared by the devices of the crash test.
type crashLoad struct {
	live      *liveServer
	c         *proc.Client
	count     atomic.Int64
	ackSignal chan struct{} // capacity 1
	lost      atomic.Int64  // requests whose answer never arrived
	replayed  atomic.Int64  // 2xx answers marked Idempotent-Replayed
	notReady  atomic.Int64  // device_not_ready answers (presence lost at restart)
}

// signal counts one acknowledgement and wakes the killer.
func (l *crashLoad) signal() {
	l.count.Add(1)
	select {
	case l.ackSignal <- struct{}{}:
	default:
	}
}

// send sends a request until it gets an answer: a lost answer (the server
// was killed) is retried with the same Idempotency-Key on the restarted
// server. 503 is never expected (SIGKILL gives no graceful shutdown).
func (l *crashLoad) send(method, path, token string, body any, headers map[string]string) (*nodetest.Resp, error) {
	for {
		url, changed := l.live.current()
		a, err := l.c.Do(url, method, path, token, body, headers)
		if err == nil {
			if a.Status == 503 {
				return nil, fmt.Errorf("%s %s: unexpected 503", method, path)
			}
			if a.Status/100 == 2 && a.Header.Get("Idempotent-Replayed") == "true" {
				l.replayed.Add(1)
			}
			return a, nil
		}
		l.lost.Add(1)
		select {
		case <-changed:
		case <-time.After(2 * time.Minute): // a safety net, not a timing assertion
			return nil, fmt.Errorf("%s %s: no restarted server after %v", method, path, err)
		}
	}
}

type crashDevice struct{ id, token, session string }
