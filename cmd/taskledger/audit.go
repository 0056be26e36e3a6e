package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"taskledger/api"
	"taskledger/events"
	"taskledger/ledger"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The auditor's and operator's offline commands: history, export,
// snapshot create/list and projections rebuild. Each opens the ledger
// itself, so each refuses to run while a server holds it.

// openLedger opens the ledger of an offline command. readOnly takes the
// shared lock (readers); otherwise the exclusive one, which also keeps a
// server from starting meanwhile. On failure it prints the reason and
// returns the exit code.
// openReadBackend opens the log a read-only command reads: the stream of
// --ledger (bound, never created or changed), or the bbolt file in dir.
// On failure it says why on stderr and returns the exit code.
func openReadBackend(nf *natsFlags, dir string, stderr io.Writer) (ledger.Backend, int) {
	if nf.ledger != "" {
		log, code := nf.openOrFail(stderr)
		if log == nil {
			return nil, code
		}
		return log, 0
	}
	s, code := openLedger(dir, true, stderr)
	if s == nil {
		return nil, code
	}
	return s, 0
}

func openLedger(dir string, readOnly bool, stderr io.Writer) (*ledger.Store, int) {
	if !ledger.Exists(dir) {
		return nil, fail(stderr, "no ledger in %s (--data)", dir)
	}
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: readOnly})
	if errors.Is(err, ledger.ErrInUse) {
		return nil, fail(stderr, "the ledger in %s is in use by another process (stop the server first; a running server takes snapshots itself)", dir)
	}
	if err != nil {
		return nil, fail(stderr, "%v", err)
	}
	return store, 0
}

// cmdHistory prints a task's full history: `history TASK_ID [--json]`.
// readFlags are the flags of history and export: the stopped ledger in
// --data, a JetStream log (--ledger) or a running server (--server).
type readFlags struct {
	data   string
	json   bool
	nats   natsFlags
	remote remoteFlags
	fs     *pflag.FlagSet // to tell a flag given from one defaulted from the environment
}

func (f *readFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	envStringVar(fs, &f.data, "data", "./data", "data directory of the stopped ledger")
	f.nats.register(fs)
	f.remote.registerConn(fs, true)
}

// remoteClient is the API client of --server, or nil for a local read;
// a mistake (both --server and --ledger, a connection flag without
// --server) is said on stderr with its exit code.
func (f *readFlags) remoteClient(stderr io.Writer) (*client, int) {
	if f.remote.server == "" {
		if f.fs.Changed("token-file") || f.fs.Changed("ca-file") {
			return nil, usage(stderr, "--token-file and --ca-file go with --server")
		}
		return nil, 0
	}
	if f.nats.ledger != "" {
		return nil, usage(stderr, "--ledger and --server exclude each other")
	}
	f.remote.json = f.json
	c, err := f.remote.client()
	if err != nil {
		return nil, fail(stderr, "%v", err)
	}
	return c, 0
}

func newHistoryCmd(stdout, stderr io.Writer) *cobra.Command {
	var f readFlags
	c := command("history TASK_ID", func(pos []string) int {
		data, asJSON, nf := &f.data, &f.json, &f.nats
		var err error
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "usage: taskledger history TASK_ID [--json] [--data DIR | --ledger nats://HOST:PORT | --server URL]")
			return 2
		}
		id := pos[0]
		if c, code := f.remoteClient(stderr); c == nil && code != 0 {
			return code
		} else if c != nil {
			if err := remoteHistory(c, id, f.json, stdout); err != nil {
				return fail(stderr, "%v", err)
			}
			return 0
		}
		store, code := openReadBackend(nf, *data, stderr)
		if store == nil {
			return code
		}
		defer store.Close()
		var evs []*api.EventJSON
		err = store.Stream(events.TaskStream(id), func(e *ledger.Event) error {
			doc, err := api.RenderEvent(e)
			if err != nil {
				return fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			evs = append(evs, doc)
			return nil
		})
		if err != nil {
			return fail(stderr, "%v", err)
		}
		if len(evs) == 0 {
			return fail(stderr, "no task %s in the log", id)
		}
		w := bufio.NewWriter(stdout)
		defer w.Flush()
		if *asJSON {
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(map[string]any{"task_id": id, "events": evs}); err != nil {
				return fail(stderr, "%v", err)
			}
			return 0
		}
		fmt.Fprintf(w, "task %s: %d events\n", id, len(evs))
		for _, e := range evs {
			fmt.Fprintf(w, "seq %-8d %s  %-28s %-40s %s\n", e.Seq, e.At, e.Type+schemaSuffix(e.Schema), actorText(e.Actor),
				bodyText(e.Body))
		}
		return 0
	})
	f.register(c.Flags())
	c.Flags().BoolVar(&f.json, "json", false, "print JSON instead of lines")
	return c
}

func schemaSuffix(schema int) string {
	if schema == 1 {
		return ""
	}
	return " (schema " + strconv.Itoa(schema) + ")"
}

func actorText(a ledger.Actor) string {
	s := a.Kind + " " + a.ID
	if a.Owner != "" {
		s += " (owner " + a.Owner + ")"
	}
	return s
}

// bodyText renders a body as key=value pairs in key order; the task id
// (the history's own) is left out, strings are bare unless they need
// quoting, everything else is compact JSON.
func bodyText(body map[string]any) string {
	keys := make([]string, 0, len(body))
	for k := range body {
		if k != "task_id" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		v := body[k]
		var s string
		if str, ok := v.(string); ok && str != "" && !strings.ContainsAny(str, " \t\n\"=") {
			s = str
		} else {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(v)
			s = strings.TrimSuffix(b.String(), "\n")
		}
		parts = append(parts, k+"="+s)
	}
	return strings.Join(parts, " ")
}

// cmdExport writes the log as NDJSON: `export [--after SEQ] --format ndjson`.
func newExportCmd(stdout, stderr io.Writer) *cobra.Command {
	var f readFlags
	var after uint64
	var format string
	c := command("export", func(pos []string) int {
		data, nf := &f.data, &f.nats
		var err error
		if len(pos) != 0 {
			fmt.Fprintln(stderr, "usage: taskledger export [--after SEQ] --format ndjson [--data DIR | --ledger nats://HOST:PORT | --server URL]")
			return 2
		}
		if format != "ndjson" {
			fmt.Fprintf(stderr, "taskledger: --format %q is not supported (use ndjson)\n", format)
			return 2
		}
		if c, code := f.remoteClient(stderr); c == nil && code != 0 {
			return code
		} else if c != nil {
			return remoteExport(c, after, stdout, stderr)
		}
		store, code := openReadBackend(nf, *data, stderr)
		if store == nil {
			return code
		}
		defer store.Close()
		w := bufio.NewWriterSize(stdout, 1<<16)
		enc := json.NewEncoder(w) // one compact document and a newline per event
		enc.SetEscapeHTML(false)
		err = store.Range(after, func(e *ledger.Event) error {
			doc, err := api.RenderEvent(e)
			if err != nil {
				return fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			return enc.Encode(doc)
		})
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
		if err != nil {
			return fail(stderr, "export: %v", err)
		}
		return 0
	})
	f.register(c.Flags())
	c.Flags().Uint64Var(&after, "after", 0, "export the events after this seq")
	c.Flags().StringVar(&format, "format", "ndjson", "output format (ndjson)")
	return c
}
