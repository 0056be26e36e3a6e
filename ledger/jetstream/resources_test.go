package jetstream_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
)

// streamConfigs is every stream's configuration on the server, by name.
func streamConfigs(t *testing.T, url string) map[string]natsjs.StreamConfig {
	t.Helper()
	js, err := natsjs.New(mustConn(t, url))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]natsjs.StreamConfig{}
	l := js.ListStreams(t.Context())
	for info := range l.Info() {
		out[info.Config.Name] = info.Config
	}
	if l.Err() != nil {
		t.Fatal(l.Err())
	}
	return out
}

func TestReadOnlyOpenCreatesNothing(t *testing.T) {
	s := jstest.Server(t, false)
	_, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "EMPTY", ReadOnly: true})
	if !errors.Is(err, jetstream.ErrMissing) || !strings.Contains(err.Error(), "EMPTY_EVENTS") {
		t.Fatalf("read-only open of a missing ledger: %v, want ErrMissing naming EMPTY_EVENTS", err)
	}
	if got := streamConfigs(t, s.ClientURL()); len(got) != 0 {
		t.Fatalf("a read-only open created %d streams", len(got))
	}
	rs, size, err := jetstream.Describe(jetstream.Config{URL: s.ClientURL(), Name: "EMPTY"})
	if err != nil || size != 1 || len(rs) != 5 {
		t.Fatalf("describe: %v, size %d, %d resources", err, size, len(rs))
	}
	for _, r := range rs {
		if r.Exists {
			t.Fatalf("describe reports %s as existing", r.Name)
		}
	}
}

func TestOpenRefusesABucketOfAnotherConfigurationAndChangesNothing(t *testing.T) {
	s := jstest.Server(t, false)
	js, err := natsjs.New(mustConn(t, s.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(t.Context(), natsjs.KeyValueConfig{Bucket: "OTHER_META", History: 5,
		Storage: natsjs.FileStorage}); err != nil {
		t.Fatal(err)
	}
	before := streamConfigs(t, s.ClientURL())["KV_OTHER_META"]
	for _, readOnly := range []bool{false, true} {
		_, err = jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "OTHER", ReadOnly: readOnly})
		var ce *jetstream.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, jetstream.ErrConfigConflict) ||
			!strings.Contains(err.Error(), "history 5") || !strings.Contains(err.Error(), "history 1") ||
			ce.Name != "OTHER_META" {
			t.Fatalf("open over a bucket of history 5: %v, want a ConfigError naming both", err)
		}
	}
	if after := streamConfigs(t, s.ClientURL())["KV_OTHER_META"]; !reflect.DeepEqual(before, after) {
		t.Fatalf("the bucket's configuration changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestLeaseOfAnotherTTLIsRefusedNotUpdated(t *testing.T) {
	s := jstest.Server(t, false)
	l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "TTL"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Lease(time.Second); err != nil {
		t.Fatal(err)
	}
	before := streamConfigs(t, s.ClientURL())["KV_TTL_LEASE"]
	_, err = l.Lease(2 * time.Second)
	if !errors.Is(err, jetstream.ErrConfigConflict) || !strings.Contains(err.Error(), "ttl 1s") || !strings.Contains(err.Error(), "ttl 2s") {
		t.Fatalf("a lease of another TTL: %v, want a ConfigError naming ttl 1s and ttl 2s", err)
	}
	if after := streamConfigs(t, s.ClientURL())["KV_TTL_LEASE"]; !reflect.DeepEqual(before, after) {
		t.Fatalf("the lease bucket's configuration changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if _, err := l.Lease(time.Second); err != nil {
		t.Fatalf("the same TTL again: %v", err)
	}
}

// TestClusterResourcesAreR3ByDefault: on three servers, a log opened
// without replicas creates every resource R3; a later open asking for R1
// is refused naming both and changes nothing; a read-only open binds.
// Every open has a start timeout, as a node's has: a fresh cluster's
// streams elect their leaders while the resources are made, and a request
// may find no responder yet (the lease bucket and the object store are
// made after Open, within the same start deadline).
func TestClusterResourcesAreR3ByDefault(t *testing.T) {
	servers := jstest.Cluster(t)
	url := jstest.URLs(servers)
	const start = 30 * time.Second
	l, err := jetstream.Open(jetstream.Config{URL: url, Name: "DEF", StartTimeout: start})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Lease(time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Blobs(); err != nil {
		t.Fatal(err)
	}
	if l.Replicas() != 3 || l.ClusterSize() != 3 || !l.ReplicasDefaulted() {
		t.Fatalf("replicas %d, cluster size %d, defaulted %v; want 3, 3, true", l.Replicas(), l.ClusterSize(), l.ReplicasDefaulted())
	}
	rs, err := l.Resources()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if !r.Exists || r.Replicas != 3 || r.Storage != "file" {
			t.Errorf("%s: exists %v, replicas %d, storage %s; want R3 file", r.Name, r.Exists, r.Replicas, r.Storage)
		}
	}
	// One server's URL alone: its announced peers still make three.
	one := servers[0].ClientURL()
	before := streamConfigs(t, one)
	_, err = jetstream.Open(jetstream.Config{URL: one, Name: "DEF", Replicas: 1, StartTimeout: start})
	if !errors.Is(err, jetstream.ErrConfigConflict) || !strings.Contains(err.Error(), "replicas 3") || !strings.Contains(err.Error(), "replicas 1") {
		t.Fatalf("an R1 open of R3 resources: %v, want a ConfigError naming both", err)
	}
	ro, err := jetstream.Open(jetstream.Config{URL: one, Name: "DEF", ReadOnly: true, StartTimeout: start})
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	if ro.ClusterSize() != 3 {
		t.Errorf("cluster size seen through one URL: %d, want 3", ro.ClusterSize())
	}
	ro.Close()
	if after := streamConfigs(t, one); !reflect.DeepEqual(before, after) {
		t.Fatalf("configurations changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestOpenWaitsForTheServer: with a start timeout, Open against a port no
// server listens on yet keeps trying, says what it waits for, and opens
// once the server is up.
func TestOpenWaitsForTheServer(t *testing.T) {
	port := jstest.FreePorts(t, 1)[0]
	waiting := make(chan string, 100)
	type result struct {
		l   *jetstream.Log
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := jetstream.Open(jetstream.Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Name: "LATE",
			StartTimeout: time.Minute, Logf: func(f string, a ...any) {
				select {
				case waiting <- fmt.Sprintf(f, a...):
				default:
				}
			}})
		done <- result{l, err}
	}()
	msg := <-waiting // the first attempt failed: nothing listens yet
	if !strings.Contains(msg, "waiting for the NATS servers") {
		t.Fatalf("what a start waits for: %q", msg)
	}
	jstest.ServerAt(t, port, false)
	r := <-done
	if r.err != nil {
		t.Fatalf("open after the server came up: %v", r.err)
	}
	r.l.Close()
}

func TestOpenGivesUpAtTheStartTimeout(t *testing.T) {
	port := jstest.FreePorts(t, 1)[0]
	_, err := jetstream.Open(jetstream.Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), StartTimeout: 300 * time.Millisecond})
	if !errors.Is(err, jetstream.ErrStartTimeout) {
		t.Fatalf("no server: %v, want ErrStartTimeout", err)
	}
}

// TestStartDoesNotWaitOutAConflict: a configuration conflict is not
// transient: Open fails at once, whatever the start timeout.
func TestStartDoesNotWaitOutAConflict(t *testing.T) {
	s := jstest.Server(t, false)
	js, err := natsjs.New(mustConn(t, s.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(t.Context(), natsjs.KeyValueConfig{Bucket: "C_SOFT", History: 3}); err != nil {
		t.Fatal(err)
	}
	logged := 0
	_, err = jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "C", StartTimeout: time.Hour,
		Logf: func(string, ...any) { logged++ }})
	if !errors.Is(err, jetstream.ErrConfigConflict) || logged != 0 {
		t.Fatalf("open over a conflicting bucket: %v after %d retries, want ErrConfigConflict at once", err, logged)
	}
}

// TestStartDoesNotWaitOutAMissingCredentialsFile: refused or missing
// credentials do not go away by waiting either.
func TestStartDoesNotWaitOutAMissingCredentialsFile(t *testing.T) {
	s := jstest.Server(t, false)
	logged := 0
	_, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), CredsFile: t.TempDir() + "/none.creds",
		StartTimeout: time.Hour, Logf: func(string, ...any) { logged++ }})
	if err == nil || logged != 0 {
		t.Fatalf("open with a missing credentials file: %v after %d retries, want an error at once", err, logged)
	}
}
