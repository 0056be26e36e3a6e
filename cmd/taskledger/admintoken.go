package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"taskledger/api"
	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
	"taskledger/wire"
)

// `taskledger admin-token create NAME | list | revoke NAME`. Each is an
// event in the log (admin_token.created / admin_token.revoked): through a
// running server's API with --server (or TASKLEDGER_SERVER), which honours
// the change from its answer on; otherwise appended to the stopped ledger
// in --data by this process.

type adminTokenDoc struct {
	Name         string `json:"name"`
	Status       string `json:"status"`
	Role         string `json:"role"`
	Origin       string `json:"origin"`
	CreatedAt    string `json:"created_at"`
	CreatedBy    string `json:"created_by"`
	RevokedAt    string `json:"revoked_at"`
	RevokedBy    string `json:"revoked_by"`
	RevokeReason string `json:"revoke_reason"`
	Token        string `json:"token"`
}

const adminTokenLong = `Manage admin tokens. Each creation and revocation is an event in the log; the
server keeps only the token's SHA-256.

With --server URL (or env TASKLEDGER_SERVER) the command goes through the
running server's API, authenticated by an admin token from --token-file FILE
or env TASKLEDGER_TOKEN; a token created or revoked is honoured by the server
from its answer on. Without it, the command works on the stopped ledger in
--data DIR (env TASKLEDGER_DATA, default ./data); create makes the ledger when
the directory is empty.

Names are 1–64 characters of [A-Za-z0-9._-], starting with a letter or digit.

Each token has a role (--role on create, default admin): admin may do
everything; operator works tasks and devices but not admin tokens; auditor
only reads (tasks, devices, history, the event stream, export, verify,
checkpoints, proofs and audit bundles). A token never creates or revokes a
token of a role above its own.`

func newAdminTokenCmd(stdout, stderr io.Writer) *cobra.Command {
	top := &cobra.Command{Use: "admin-token", Short: "create, list and revoke admin tokens (running server or stopped ledger)",
		Long: adminTokenLong}
	var r remoteFlags
	var data, reason, role string
	r.registerConn(top.PersistentFlags(), true)
	top.PersistentFlags().StringVar(&r.idemKey, "idempotency-key", "", "with --server: retry a command with the key of an earlier invocation (default: a fresh UUIDv4)")
	top.PersistentFlags().BoolVar(&r.json, "json", false, "print the API's JSON answer instead of text")
	envStringVar(top.PersistentFlags(), &data, "data", "./data", "data directory of a stopped ledger, used without --server")
	remote := func() bool { return r.server != "" }

	create := &cobra.Command{Use: "create NAME", Short: "create an admin token; prints only the token, once",
		Long: "Create the admin token NAME and print it on stdout, once (everything else goes to stderr).\n\n" + adminTokenLong,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			name := a[0]
			if !api.AdminTokenName.MatchString(name) {
				return usageErr{Err: errors.New("admin token names are 1–64 characters of [A-Za-z0-9._-], starting with a letter or digit")}
			}
			newRole, ok := wire.ParseRole(role)
			if !ok || role == "" {
				return usageErr{Err: fmt.Errorf("--role must be admin, operator or auditor, not %q", role)}
			}
			if !remote() {
				return offlineAdminToken(data, stdout, stderr, name, newRole, "")
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			_, raw, err := c.do(http.MethodPost, "/admin/admin-tokens", map[string]any{"name": name, "role": newRole}, "")
			if err != nil {
				return err
			}
			if r.json {
				return printJSON(stdout, raw)
			}
			var d adminTokenDoc
			if err := json.Unmarshal(raw, &d); err != nil {
				return err
			}
			if d.Token == "" {
				fmt.Fprintf(stderr, "taskledger: admin token %q was created by an earlier invocation with this idempotency key; its token was shown then\n", name)
				return nil
			}
			fmt.Fprintln(stdout, d.Token)
			fmt.Fprintf(stderr, "taskledger: admin token %q (%s) created (stored hashed; shown only now)\n", name, d.Role)
			return nil
		}}
	create.Flags().StringVar(&role, "role", string(wire.RoleAdmin), "what the token may do: admin, operator or auditor")

	revoke := &cobra.Command{Use: "revoke NAME", Short: "revoke an admin token",
		Long: "Revoke the admin token NAME: the server refuses it from then on. The last active admin token cannot be revoked.\n\n" + adminTokenLong,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			name := a[0]
			if !remote() {
				return offlineAdminToken(data, stdout, stderr, "", "", name)
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			_, raw, err := c.do(http.MethodPost, "/admin/admin-tokens/"+url.PathEscape(name)+"/revoke", map[string]any{"reason": reason}, "")
			if err != nil {
				return err
			}
			if r.json {
				return printJSON(stdout, raw)
			}
			fmt.Fprintf(stderr, "taskledger: admin token %q revoked\n", name)
			return nil
		}}
	revoke.Flags().StringVar(&reason, "reason", "", "why (recorded on the event)")

	list := &cobra.Command{Use: "list", Short: "list the admin token names (never a token or its hash)",
		Long: "List every admin token name with its status, origin and when it was created or revoked.\n\n" + adminTokenLong,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var docs []adminTokenDoc
			var raw []byte
			if remote() {
				c, err := r.client()
				if err != nil {
					return err
				}
				if _, raw, err = c.do(http.MethodGet, "/admin/admin-tokens", nil, ""); err != nil {
					return err
				}
			} else {
				var err error
				if raw, err = offlineAdminTokenList(data); err != nil {
					return err
				}
			}
			if r.json {
				return printJSON(stdout, raw)
			}
			var page struct {
				AdminTokens []adminTokenDoc `json:"admin_tokens"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				return err
			}
			docs = page.AdminTokens
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATUS\tROLE\tORIGIN\tCREATED\tREVOKED")
			for _, d := range docs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Name, d.Status, d.Role, d.Origin, dash(d.CreatedAt), dash(d.RevokedAt))
			}
			return tw.Flush()
		}}
	top.AddCommand(create, revoke, list)
	return top
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// offlineAdminToken creates (create != "") or revokes an admin token of
// the stopped ledger in dir by appending its event here.
func offlineAdminToken(dir string, stdout, stderr io.Writer, create string, role wire.Role, revoke string) error {
	if revoke != "" && !ledger.Exists(dir) {
		// Never create a ledger just to revoke: the first serve would then
		// find it and write no initial admin token.
		return exitError{Code: fail(stderr, "no ledger in %s (--data)", dir)}
	}
	nd, err := node.Open(node.Config{DataDir: dir, Offline: true, Commands: commands.DefaultConfig(), Logger: zerolog.Nop()})
	if errors.Is(err, ledger.ErrInUse) {
		return exitError{Code: fail(stderr, "the ledger in %s is in use by a running server: give --server URL (and its admin token) to do this through its API", dir)}
	}
	if err != nil {
		return exitError{Code: fail(stderr, "%v", err)}
	}
	defer nd.Close()
	req := commands.AdminReq{Key: uuid.NewString()}
	var cmd commands.Command
	var token string
	if create != "" {
		if token, err = api.NewAdminToken(); err != nil {
			return err
		}
		req.Fingerprint = []byte("offline " + create)
		req.Fingerprint = append(req.Fingerprint, " "+string(role)...)
		cmd = &commands.CreateAdminToken{AdminReq: req, Name: create, TokenHash: commands.HashToken(token), Role: role}
	} else {
		req.Fingerprint = []byte("offline revoke " + revoke)
		cmd = &commands.RevokeAdminToken{AdminReq: req, Name: revoke, Reason: "revoked offline"}
	}
	_, err = nd.Engine.Do(context.Background(), cmd)
	switch {
	case errors.Is(err, commands.ErrAdminTokenExists):
		return exitError{Code: fail(stderr, "an admin token named %q exists; revoke it first", create)}
	case errors.Is(err, commands.ErrAdminTokenNotFound):
		return exitError{Code: fail(stderr, "no admin token named %q", revoke)}
	case errors.Is(err, commands.ErrLastAdminToken):
		return exitError{Code: fail(stderr, "%q is the last active admin token; create another first", revoke)}
	case err != nil:
		return exitError{Code: fail(stderr, "%v", err)}
	}
	if create != "" {
		fmt.Fprintln(stdout, token)
		fmt.Fprintf(stderr, "taskledger: admin token %q (%s) created (stored hashed; shown only now)\n", create, role)
	} else {
		fmt.Fprintf(stderr, "taskledger: admin token %q revoked\n", revoke)
	}
	return nil
}

// offlineAdminTokenList is the API's list document, read from the stopped
// ledger in dir.
func offlineAdminTokenList(dir string) ([]byte, error) {
	if !ledger.Exists(dir) {
		return nil, fmt.Errorf("no ledger in %s (--data)", dir)
	}
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if errors.Is(err, ledger.ErrInUse) {
		return nil, fmt.Errorf("the ledger in %s is in use by a running server: give --server URL to list through its API", dir)
	}
	if err != nil {
		return nil, err
	}
	defer store.Close()
	state, err := node.Load(store, projections.Config{}, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	outside, err := store.AdminTokens()
	if err != nil {
		return nil, err
	}
	cfg := commands.Config{OutsideAdminTokens: map[string]string{}}
	for n := range outside {
		cfg.OutsideAdminTokens[n] = ""
	}
	return json.Marshal(map[string]any{"admin_tokens": api.AdminTokenDocs(state, &cfg)})
}
