package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"taskledger/wire"
)

// `taskledger task …`: the operator's task commands against a running
// server (POST/GET /api/v1/admin/tasks…).

// taskDoc is the part of the task detail document the text output shows.
type taskDoc struct {
	ID            string `json:"id"`
	State         string `json:"state"`
	Version       int64  `json:"version"`
	Revision      int64  `json:"revision"`
	CreatedAt     string `json:"created_at"`
	Authorization *struct {
		Status    string `json:"status"`
		ExpiresAt string `json:"expires_at"`
	} `json:"authorization"`
	Claim *struct {
		DeviceID string `json:"device_id"`
	} `json:"claim"`
	CancelRequested bool `json:"cancel_requested"`
}

func (d taskDoc) line() string {
	s := fmt.Sprintf("%s  %-20s version=%d revision=%d", d.ID, d.State, d.Version, d.Revision)
	if d.Authorization != nil {
		s += " authorization=" + d.Authorization.Status + " until " + d.Authorization.ExpiresAt
	}
	if d.Claim != nil {
		s += " device=" + d.Claim.DeviceID
	}
	if d.CancelRequested {
		s += " cancel_requested"
	}
	return s
}

// showTask prints a task detail document (GET /admin/tasks/{id}) in human
// form: one labelled line per part, "none" for an absent one. The local
// struct decodes only what is printed.
func showTask(w io.Writer, raw []byte) error {
	var d wire.TaskDetail // the server's own vocabulary
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("the server's task document: %w", err)
	}
	compact := func(m json.RawMessage) string {
		var b bytes.Buffer
		if len(m) == 0 || string(m) == "null" || json.Compact(&b, m) != nil {
			return "none"
		}
		return b.String()
	}
	line := func(label, format string, a ...any) {
		fmt.Fprintf(w, "%-15s "+format+"\n", append([]any{label + ":"}, a...)...)
	}
	line("task", "%s", d.ID)
	line("state", "%s (version %d, revision %d)", d.State, d.Version, d.Revision)
	line("created", "%s (updated %s)", d.CreatedAt, d.UpdatedAt)
	line("payload", "%s", compact(d.Payload))
	if im := d.ReferenceImage; im != nil {
		line("image", "reference image sha256 %s, %d bytes", im.SHA256, im.Size)
	}
	if a := d.Authorization; a != nil {
		line("authorization", "%s until %s (revision %d, takeover %s, id %s)", a.Status, a.ExpiresAt, a.Revision, a.Takeover, a.ID)
	} else {
		line("authorization", "none")
	}
	if c := d.Claim; c != nil {
		line("claim", "device %s, generation %d, session %s, lease until %s, token %s", c.DeviceID, c.Generation, c.SessionID, c.LeaseExpiresAt, c.TokenOrigin)
	} else {
		line("claim", "none")
	}
	if e := d.Execution; e != nil {
		step := "none"
		if e.Step != nil {
			step = *e.Step
		}
		line("execution", "%s, started %s, step %s, last seen %s, lease until %s", e.ID, e.StartedAt, step, e.LastSeenAt, e.LeaseExpiresAt)
	} else {
		line("execution", "none")
	}
	if d.CancelRequested {
		line("cancel", "requested (the device acknowledges)")
	}
	result := json.RawMessage("null")
	if d.Result != nil {
		result = *d.Result
	}
	line("result", "%s", compact(result))
	if f := d.Failure; f != nil {
		line("failure", "%s: %s", f.ReasonCode, f.Detail)
	} else {
		line("failure", "none")
	}
	for _, ev := range d.Evidence {
		b, _ := json.Marshal(ev)
		line("evidence", "%s", compact(b))
	}
	for _, lr := range d.LateReports {
		b, _ := json.Marshal(lr)
		line("late report", "%s", compact(b))
	}
	if r := d.Recovery; r != nil {
		line("recovery", "%s at %s: %s", r.Decision, r.At, r.Reason)
	}
	if d.NeedsOperator {
		reason := "unknown"
		if d.NeedsOperatorReason != nil {
			reason = *d.NeedsOperatorReason
		}
		line("needs operator", "yes: %s (task recover)", reason)
	}
	return nil
}

// payloadArg reads --payload: inline JSON or @FILE.
func payloadArg(v string) (json.RawMessage, error) {
	b := []byte(v)
	if strings.HasPrefix(v, "@") {
		var err error
		if b, err = os.ReadFile(v[1:]); err != nil {
			return nil, fmt.Errorf("--payload: %w", err)
		}
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return nil, usageErr{Err: errors.New("--payload must be a JSON object (inline or @FILE)")}
	}
	return json.RawMessage(b), nil
}

func ttlSeconds(d time.Duration) (int64, error) {
	if d <= 0 || d%time.Second != 0 {
		return 0, usageErr{Err: errors.New("--ttl must be a positive whole number of seconds (Go syntax: 1h, 90m)")}
	}
	return int64(d / time.Second), nil
}

// taskAnswer prints a task document answer: JSON or one line.
func taskAnswer(w io.Writer, r *remoteFlags, raw []byte) error { return docAnswer[taskDoc](w, r, raw) }

// docAnswer prints a document answer: the JSON with --json, else the
// document's one-line form.
func docAnswer[D interface{ line() string }](w io.Writer, r *remoteFlags, raw []byte) error {
	if r.json {
		return printJSON(w, raw)
	}
	var d D
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	fmt.Fprintln(w, d.line())
	return nil
}

func getTask(c *client, id string) (taskDoc, error) {
	var d taskDoc
	err := c.getJSON("/admin/tasks/"+url.PathEscape(id), &d)
	return d, err
}

func newTaskCmd(stdout, stderr io.Writer) *cobra.Command {
	top := &cobra.Command{Use: "task", Short: "create, inspect and steer tasks on a running server",
		Long: "Operator commands on tasks, through a running server's admin API.\nConnection: --server URL (env TASKLEDGER_SERVER, default " + defaultServer + "), the admin token from --token-file FILE or env TASKLEDGER_TOKEN."}
	var r remoteFlags
	r.register(top.PersistentFlags())

	// create
	var payload, image string
	var authorize bool
	var ttl time.Duration
	create := &cobra.Command{Use: "create --payload JSON|@FILE [--image FILE] [--authorize --ttl 1h]", Short: "create a task; prints its id",
		Long: "Create a task with a JSON payload (inline or @FILE, at most 16 KiB), optionally with a JPEG reference image, optionally authorized at once for --ttl. Prints the new task's id (--json: the task document).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := payloadArg(payload)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("ttl") && !authorize {
				return usageErr{Err: errors.New("--ttl goes with --authorize")}
			}
			var img []byte
			if image != "" {
				if img, err = os.ReadFile(image); err != nil {
					return fmt.Errorf("--image: %w", err)
				}
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			body := map[string]any{"payload": p}
			if authorize && img == nil {
				s, err := ttlSeconds(ttl)
				if err != nil {
					return err
				}
				body["authorize"] = map[string]any{"ttl_seconds": s}
			}
			_, raw, err := c.do(http.MethodPost, "/admin/tasks", body, "")
			if err != nil {
				return err
			}
			var d taskDoc
			if err := json.Unmarshal(raw, &d); err != nil {
				return err
			}
			if img != nil {
				// The image is an amendment (revision +1): authorize after it.
				c.key = deriveKey(c.key, "image")
				if _, raw, err = c.do(http.MethodPut, "/admin/tasks/"+d.ID+"/reference-image", img, "image/jpeg"); err != nil {
					return err
				}
				if authorize {
					s, err := ttlSeconds(ttl)
					if err != nil {
						return err
					}
					_ = json.Unmarshal(raw, &d)
					c.key = deriveKey(c.key, "authorize")
					if _, raw, err = c.do(http.MethodPost, "/admin/tasks/"+d.ID+"/authorize",
						map[string]any{"expected_revision": d.Revision, "ttl_seconds": s}, ""); err != nil {
						return err
					}
				}
			}
			if r.json {
				return printJSON(stdout, raw)
			}
			fmt.Fprintln(stdout, d.ID)
			return nil
		}}
	create.Flags().StringVar(&payload, "payload", "", "the task's payload: a JSON object, or @FILE to read it from FILE (required)")
	create.Flags().StringVar(&image, "image", "", "a JPEG reference image to attach (at most 5 MiB)")
	create.Flags().BoolVar(&authorize, "authorize", false, "authorize the task at once (with --ttl)")
	create.Flags().DurationVar(&ttl, "ttl", time.Hour, "authorization time to live with --authorize")
	_ = create.MarkFlagRequired("payload")

	// list
	var state, device string
	var limit int
	list := &cobra.Command{Use: "list [--state S] [--device ID]", Short: "list tasks, newest first",
		Long: "List tasks newest first, optionally only those in a state or claimed by a device; follows the pages to the end (or --limit tasks).",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			var all []json.RawMessage
			cursor := ""
			for {
				q := url.Values{}
				if state != "" {
					q.Set("state", state)
				}
				if device != "" {
					q.Set("device_id", device)
				}
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				q.Set("limit", "500")
				var page struct {
					Tasks      []json.RawMessage `json:"tasks"`
					NextCursor *string           `json:"next_cursor"`
				}
				if err := c.getJSON("/admin/tasks?"+q.Encode(), &page); err != nil {
					return err
				}
				all = append(all, page.Tasks...)
				if page.NextCursor == nil || *page.NextCursor == "" || (limit > 0 && len(all) >= limit) {
					break
				}
				cursor = *page.NextCursor
			}
			if limit > 0 && len(all) > limit {
				all = all[:limit]
			}
			if r.json {
				raw, _ := json.Marshal(map[string]any{"tasks": all})
				return printJSON(stdout, raw)
			}
			for _, t := range all {
				var d taskDoc
				if err := json.Unmarshal(t, &d); err != nil {
					return err
				}
				fmt.Fprintln(stdout, d.line())
			}
			return nil
		}}
	list.Flags().StringVar(&state, "state", "", "only tasks in this state (PENDING, CLAIMED, RUNNING, WAITING_CONFIRMATION, SUCCEEDED, FAILED, CANCELED)")
	list.Flags().StringVar(&device, "device", "", "only tasks of this device id")
	list.Flags().IntVar(&limit, "limit", 0, "at most this many tasks (0: all)")

	show := &cobra.Command{Use: "show ID", Short: "a task's detail document",
		Long: "Show one task, one labelled line each: state, version and revision, payload, reference image, authorization, claim (device, generation, session, lease, token origin), execution (id, start, step, last seen, lease), a cancel request, the result, the failure (reason code and detail), evidence, late reports, the recovery decision and whether it needs an operator. --json prints the server's document as it is.",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			return r.show(stdout, "/admin/tasks/"+url.PathEscape(a[0]), func(w io.Writer, r *remoteFlags, raw []byte) error {
				if r.json {
					return printJSON(w, raw)
				}
				return showTask(w, raw)
			})
		}}

	var amendPayload string
	var expRev int64
	amend := &cobra.Command{Use: "amend ID --payload JSON|@FILE [--image FILE]", Short: "replace a task's payload or reference image (revision +1)",
		Long: "Amend a task: a new payload (--payload) and/or reference image (--image). Each amendment raises the revision and invalidates the authorization. --expected-revision defaults to the task's current revision.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if amendPayload == "" && image == "" {
				return usageErr{Err: errors.New("task amend needs --payload or --image")}
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			var raw []byte
			if amendPayload != "" {
				p, err := payloadArg(amendPayload)
				if err != nil {
					return err
				}
				rev := expRev
				if !cmd.Flags().Changed("expected-revision") {
					d, err := getTask(c, a[0])
					if err != nil {
						return err
					}
					rev = d.Revision
				}
				if _, raw, err = c.do(http.MethodPost, "/admin/tasks/"+url.PathEscape(a[0])+"/amend",
					map[string]any{"expected_revision": rev, "payload": p}, ""); err != nil {
					return err
				}
			}
			if image != "" {
				img, err := os.ReadFile(image)
				if err != nil {
					return fmt.Errorf("--image: %w", err)
				}
				c.key = deriveKey(c.key, "image")
				if _, raw, err = c.do(http.MethodPut, "/admin/tasks/"+url.PathEscape(a[0])+"/reference-image", img, "image/jpeg"); err != nil {
					return err
				}
			}
			return taskAnswer(stdout, &r, raw)
		}}
	amend.Flags().StringVar(&amendPayload, "payload", "", "the new payload: a JSON object, or @FILE")
	amend.Flags().StringVar(&image, "image", "", "a new JPEG reference image")
	amend.Flags().Int64Var(&expRev, "expected-revision", 0, "refuse unless the task is at this revision (default: its current one)")

	var authTTL time.Duration
	var takeover string
	auth := &cobra.Command{Use: "authorize ID --ttl D", Short: "authorize a task's current revision for devices to claim",
		Long: "Give the task's current revision a new ACTIVE authorization lasting --ttl (within the server's bounds, else invalid_ttl).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			s, err := ttlSeconds(authTTL)
			if err != nil {
				return err
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			rev := expRev
			if !cmd.Flags().Changed("expected-revision") {
				d, err := getTask(c, a[0])
				if err != nil {
					return err
				}
				rev = d.Revision
			}
			body := map[string]any{"expected_revision": rev, "ttl_seconds": s}
			if takeover != "" {
				body["takeover"] = takeover
			}
			_, raw, err := c.do(http.MethodPost, "/admin/tasks/"+url.PathEscape(a[0])+"/authorize", body, "")
			if err != nil {
				return err
			}
			return taskAnswer(stdout, &r, raw)
		}}
	auth.Flags().DurationVar(&authTTL, "ttl", time.Hour, "how long the authorization lasts (Go syntax: 1h, 24h)")
	auth.Flags().Int64Var(&expRev, "expected-revision", 0, "refuse unless the task is at this revision (default: its current one)")
	auth.Flags().StringVar(&takeover, "takeover", "", "what happens after a claim expires or its device is revoked: reclaim (server default) or manual")

	var reason string
	simple := func(use, short, long, route string) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Long: long, Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, a []string) error {
				c, err := r.client()
				if err != nil {
					return err
				}
				_, raw, err := c.do(http.MethodPost, "/admin/tasks/"+url.PathEscape(a[0])+route, map[string]any{"reason": reason}, "")
				if err != nil {
					return err
				}
				return taskAnswer(stdout, &r, raw)
			}}
		c.Flags().StringVar(&reason, "reason", "operator", "the reason recorded on the event")
		return c
	}
	revokeAuth := simple("revoke-authorization ID", "make a task's authorization ineligible", "Revoke the task's authorization: no device may claim it until it is authorized again.", "/authorization/revoke")
	cancel := simple("cancel ID", "cancel a task (or request a safe stop of a running one)", "Cancel a task: PENDING or CLAIMED tasks end CANCELED; a RUNNING or WAITING_CONFIRMATION task gets cancel_requested and the device acknowledges.", "/cancel")

	var fail, requeue bool
	recov := &cobra.Command{Use: "recover ID --fail|--requeue", Short: "decide a task whose lease expired",
		Long: "Recover a task whose device stopped acting (its lease expired or the device was revoked): --fail ends it FAILED, --requeue returns it to PENDING. Uses the task's current version.",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			if fail == requeue {
				return usageErr{Err: errors.New("task recover needs exactly one of --fail and --requeue")}
			}
			decision := "fail"
			if requeue {
				decision = "requeue"
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			d, err := getTask(c, a[0])
			if err != nil {
				return err
			}
			_, raw, err := c.do(http.MethodPost, "/admin/tasks/"+url.PathEscape(a[0])+"/recover",
				map[string]any{"decision": decision, "reason": reason, "expected_version": d.Version}, "")
			if err != nil {
				return err
			}
			return taskAnswer(stdout, &r, raw)
		}}
	recov.Flags().BoolVar(&fail, "fail", false, "end the task FAILED")
	recov.Flags().BoolVar(&requeue, "requeue", false, "return the task to PENDING")
	recov.Flags().StringVar(&reason, "reason", "operator", "the reason recorded on the event")

	hist := &cobra.Command{Use: "history ID", Short: "a task's full history through the API", Long: "Print a task's events in seq order, read through the running server.", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			return remoteHistory(c, a[0], r.json, stdout)
		}}

	top.AddCommand(create, list, show, amend, auth, revokeAuth, cancel, recov, hist)
	_ = stderr
	return top
}

// deriveKey gives the follow-up request of one invocation its own key,
// stable for a given invocation key (so --idempotency-key retries all).
func deriveKey(key, step string) string {
	return uuidFrom(key + "/" + step)
}
