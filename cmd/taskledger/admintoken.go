package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"
)

// `taskledger admin-token create|revoke NAME` and `admin-token list`: the
// admin tokens of a stopped ledger (stored hashed in its meta records).

func adminTokenCmd(stdout, stderr io.Writer) *cobra.Command {
	top := &cobra.Command{Use: "admin-token", Short: "create, list and revoke admin tokens of a stopped ledger",
		Long: "Manage admin tokens (stored hashed). create prints only the token on stdout and creates the ledger if the data directory is empty. Flags: --data DIR [env TASKLEDGER_DATA]."}
	for _, verb := range []string{"create", "revoke"} {
		verb := verb
		c := &cobra.Command{Use: verb + " NAME [--data DIR]", Short: verb + " an admin token",
			Long:               adminTokenLong[verb],
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				if wantsHelp(args) {
					return cmd.Help()
				}
				if code := cmdAdminToken(append([]string{verb}, args...), stdout, stderr); code != 0 {
					return exitError{code}
				}
				return nil
			}}
		// Declared for --help only: cmdAdminToken parses the arguments
		// itself (flags before or after NAME).
		c.Flags().String("data", "./data", "data directory of the stopped ledger [env TASKLEDGER_DATA]")
		top.AddCommand(c)
	}
	var data string
	list := &cobra.Command{Use: "list [--data DIR]", Short: "list the admin token names", Long: "List the names of the admin tokens of the ledger in --data (never a token or its hash).", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			store, code := openLedger(data, true, stderr)
			if store == nil {
				return exitError{code}
			}
			defer store.Close()
			toks, err := store.AdminTokens()
			if err != nil {
				return err
			}
			names := make([]string, 0, len(toks))
			for n := range toks {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintln(stdout, n)
			}
			return nil
		}}
	list.Flags().StringVar(&data, "data", envDefault("data", "./data"), "data directory [env TASKLEDGER_DATA]")
	top.AddCommand(list)
	return top
}

// adminTokenLong describes create and revoke for --help.
var adminTokenLong = map[string]string{
	"create": "Create the admin token NAME in the stopped ledger of --data DIR (env TASKLEDGER_DATA, default ./data) " +
		"and print the token, once, on stdout; only its SHA-256 is stored. The ledger is created when the data " +
		"directory is empty. NAME is 1–64 characters of [A-Za-z0-9._-], starting with a letter or digit; a name " +
		"in use is refused (revoke it first). The server reads admin tokens when it starts.",
	"revoke": "Revoke (delete) the admin token NAME of the stopped ledger in --data DIR (env TASKLEDGER_DATA, " +
		"default ./data). A missing ledger or an unknown name is refused; no ledger is ever created. The server " +
		"reads admin tokens when it starts.",
}
