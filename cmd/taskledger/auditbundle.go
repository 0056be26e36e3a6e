package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"taskledger/audit/checkpoint"
	"taskledger/audit/transparency"
	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/projections"

	"github.com/spf13/cobra"
)

// Bundle is the audit bundle's document (audit/transparency).
type Bundle = transparency.Bundle

// cmdAuditBundle writes a task's audit bundle from a stopped ledger:
// `audit-bundle --task ID --out FILE [--data DIR]`. The proofs are against
// the latest stored checkpoint when it covers the task's events, else
// against a checkpoint of the whole log signed now.
func newAuditBundleCmd(stdout, stderr io.Writer) *cobra.Command {
	var data, task, out, server, tokenFile, key *string
	c := command("audit-bundle", func(pos []string) int {
		if len(pos) != 0 || *task == "" || *out == "" {
			fmt.Fprintln(stderr, "usage: taskledger audit-bundle --task ID --out FILE [--data DIR | --server URL [--token-file F] [--key VERIFIER]]")
			return 2
		}
		if *server != "" {
			return remoteBundle(*server, *tokenFile, *key, *task, *out, stderr)
		}
		store, code := openLedger(*data, false, stderr)
		if store == nil {
			return code
		}
		defer store.Close()
		b, err := buildBundle(store, *data, *task)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		if err := os.WriteFile(*out, b.Encode(), 0o644); err != nil {
			return fail(stderr, "%v", err)
		}
		fmt.Fprintf(stderr, "taskledger: bundle of task %s: %d events, proofs against the checkpoint of size %s\n", *task, len(b.Events), sizeLine(b.Checkpoint))
		return 0
	})
	fs := c.Flags()
	data = envString(fs, "data", "./data", "data directory")
	task = fs.String("task", "", "the task id")
	out = fs.String("out", "", "the bundle file to write")
	server = fs.String("server", "", "read the bundle from this running server (admin token from --token-file or TASKLEDGER_TOKEN) instead of --data")
	tokenFile = fs.String("token-file", "", "with --server: a file holding the admin token")
	key = fs.String("key", "", "with --server: the verifier string the bundle must be signed by (default: the one the server names)")
	return c
}

// remoteBundle fetches a task's bundle from a running server and writes it
// only once it verifies here (proofs, signature, the task's rules): the
// server is not trusted for any of it.
func remoteBundle(server, tokenFile, key, task, out string, stderr io.Writer) int {
	token := os.Getenv("TASKLEDGER_TOKEN")
	if tokenFile != "" {
		raw, err := os.ReadFile(tokenFile)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		token = strings.TrimSpace(string(raw))
	}
	if token == "" {
		return fail(stderr, "--server needs an admin token: --token-file FILE or TASKLEDGER_TOKEN")
	}
	u, err := url.Parse(strings.TrimRight(server, "/") + "/api/v1/admin/tasks/" + url.PathEscape(task) + "/audit-bundle")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail(stderr, "--server must be an http or https URL")
	}
	req, _ := http.NewRequest("GET", u.String(), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 256<<20))
	if err != nil {
		return fail(stderr, "%v", err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct{ Code, Message string }
		_ = json.Unmarshal(raw, &e)
		return fail(stderr, "the server answered %d %s %s", res.StatusCode, e.Code, e.Message)
	}
	b, _, err := verifyBundle(raw, key)
	if err != nil {
		return fail(stderr, "the server's bundle does not verify: %v", err)
	}
	if err := os.WriteFile(out, raw, 0o644); err != nil {
		return fail(stderr, "%v", err)
	}
	fmt.Fprintf(stderr, "taskledger: bundle of task %s from %s: %d events, verified, proofs against the checkpoint of size %s\n", task, u.Host, len(b.Events), sizeLine(b.Checkpoint))
	return 0
}

func sizeLine(note string) string {
	lines := bytes.SplitN([]byte(note), []byte("\n"), 3)
	if len(lines) < 2 {
		return "?"
	}
	return string(lines[1])
}

func buildBundle(store *ledger.Store, dir, task string) (*Bundle, error) {
	key, err := checkpoint.LoadKey(dir)
	if err != nil {
		return nil, err
	}
	tree, err := transparency.Build(store)
	if err != nil {
		return nil, err
	}
	head, err := store.Head()
	if err != nil {
		return nil, err
	}
	return transparency.BuildBundle(store, tree, key, max(commands.Ms(commands.WallClock{}.Now()), head.At), task)
}

// verifyBundle checks a bundle with no ledger and no network: its proofs
// and signature (transparency.OpenBundle), then the task's own rules.
func verifyBundle(raw []byte, key string) (*Bundle, []ledger.Event, error) {
	b, evs, err := transparency.OpenBundle(raw, key)
	if err != nil {
		return nil, nil, err
	}
	if err := projections.CheckTaskHistory(evs); err != nil {
		return nil, nil, fmt.Errorf("the task's history breaks its rules: %w", err)
	}
	return b, evs, nil
}

func auditVerifyBundle(path, key string, stdout, stderr io.Writer) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	b, evs, err := verifyBundle(raw, key)
	if err != nil {
		fmt.Fprintf(stderr, "taskledger: audit-verify FAILED: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "ok: task %s, %d events, each in the log of the signed checkpoint of size %s\n", b.TaskID, len(evs), sizeLine(b.Checkpoint))
	for i := range evs {
		e := &evs[i]
		fmt.Fprintf(stdout, "seq %-8d v%-3d %s  %-28s %s\n", e.Seq, e.StreamVersion, time.UnixMilli(e.At).UTC().Format("2006-01-02T15:04:05.000Z"), e.Type, actorText(e.Actor))
	}
	return 0
}
