package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"taskledger/client/agent"
)

// The command tree (spf13/cobra). The ledger's offline commands keep their
// own flag sets (flags before or after positional arguments, TASKLEDGER_*
// fallbacks): cobra dispatches to them unparsed, one entry per command
// below. The commands that talk to a running server (task, device, events,
// admin-token list) are cobra commands with pflag flags (remote.go).

// exitError carries a command's exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// legacy is a command whose flags its own function parses.
type legacy struct {
	use, short, long string
	fn               func(args []string, stdout, stderr io.Writer) int
}

var legacyCommands = []legacy{
	{"serve", "run the server", "Run the server: the sequencer, the HTTP API and the operator console.\n" +
		"The first start on an empty data directory creates the ledger and writes a one-time admin token to DATA/initial-admin-token (mode 0600).",
		func(a []string, _, e io.Writer) int { return cmdServe(a, e) }},
	{"verify", "check the log: hash chain, seq, invariants, snapshots (offline; --server checks a running server's log here)",
		"Check a stopped ledger: the hash chain, seq density, every invariant, bbolt's consistency check, and that snapshot + tail equals a full replay.\n" +
			"With --server URL (or TASKLEDGER_SERVER) and an admin token (--token-file FILE or TASKLEDGER_TOKEN), the whole log is read through the running server's API (its stored envelopes) and checked here: seqs, hash chain, canonical encoding, invariants and every task's rules; --key VERIFIER also checks its newest signed checkpoint.\n" +
			"With --ledger nats://HOST:PORT[,...] the JetStream log is checked the same way, event by event (--nats-name, --nats-creds).\n" +
			"Exits 1 on the first violation, naming its seq.", cmdVerify},
	{"migrate", "copy a stopped bbolt ledger into an empty JetStream stream, and verify the copy",
		"Copy the stopped ledger in --data into the empty JetStream log named by --ledger nats://HOST:PORT[,...]: every event with its stored bytes (same seqs, same hashes), the soft records, the manual clock, the secret key-check value and the admin tokens; then verify the copy and check its head is the source's. --nats-replicas sets the replicas of the stream it creates.", cmdMigrate},
	{"status", "status --ledger nats://…: the actual replicas and storage of a cluster's stream, buckets and object store",
		"Report the JetStream resources the ledger lives in (the events stream, the SOFT, META and LEASE buckets, the BLOBS object store): each one's configured replicas, how many are current, its leader, storage, messages and bytes, and a warning for each kept on one server of a cluster of several. It only reads: nothing is created or changed.", cmdStatus},
	{"history", "a task's full history (offline; --server reads it through the API)",
		"Print a task's full history, human readable or --json. With --server (or TASKLEDGER_SERVER) it is read through a running server's API; with --ledger nats://HOST:PORT[,...] from a JetStream log (read only); otherwise from the stopped ledger in --data.", cmdHistoryAny},
	{"export", "the log as NDJSON (offline; --server reads it through the API)",
		"Write the log as NDJSON: one event a line, seq ascending, no secrets. With --server it is read through a running server's API; with --ledger nats://HOST:PORT[,...] from a JetStream log.", cmdExportAny},
	{"snapshot", "snapshot create|list: snapshots of a stopped ledger", "Write a snapshot of the projections now (create) or list the snapshots and whether start-up would trust each (list).", cmdSnapshot},
	{"projections", "projections rebuild: full replay from the log", "Rebuild the projections from the whole log with a progress bar on a terminal; reports events read and events/s, then writes a fresh snapshot.", cmdProjections},
	{"bench", "the load generator", "The load generator of the benchmark: raw bbolt baselines, the ledger in process, and over HTTP.", cmdBench},
	{"checkpoint-key", "checkpoint-key export|create: the checkpoint key's public verifier string; a new key",
		"export prints the checkpoint signing key's public verifier string (the note format), which auditors pass to audit-verify --key; it reads DATA/checkpoint-key only. create writes a new key (mode 0600) where there is none and prints its verifier: the key every node of a cluster is given.", cmdCheckpointKey},
	{"audit-bundle", "one task's audit bundle: its events, inclusion proofs, a signed checkpoint",
		"Write a task's audit bundle (--task ID --out FILE): every event of the task with an inclusion proof against one signed checkpoint, that checkpoint and the key's verifier string. Offline from --data, or from a running server with --server (written only after it verifies here).", cmdAuditBundle},
	{"audit-proof", "audit-proof --consistency --from A --to B: a consistency proof (JSON)",
		"Write the consistency proof between two tree sizes of a stopped ledger, for audit-verify --consistency.", cmdAuditProof},
	{"audit-verify", "check an audit bundle, or that a log only grew, with no ledger and no network",
		"audit-verify FILE [--key VERIFIER]: check an audit bundle (signature, every inclusion proof, the task's own rules) and print the history; any flipped byte fails with the reason.\naudit-verify --consistency OLD NEW --proof FILE --key VERIFIER: check that the log of checkpoint NEW extends the log of OLD.", cmdAuditVerify},
	{"backup", "a consistent backup archive of a running server (--server) or a stopped ledger (--data)",
		"backup --out FILE: write one archive (tar) holding the log copied from one read transaction, every blob it references, the checkpoint signing key and a manifest (head seq and hash, Merkle root, a checkpoint of the head signed now, every file's size and SHA-256). With --server URL (or TASKLEDGER_SERVER) and an admin token (--token-file FILE or TASKLEDGER_TOKEN) it is streamed from the running server (GET /api/v1/admin/backup) while it keeps serving; otherwise from the stopped ledger in --data. A progress bar on a terminal; the last line gives bytes and MB/s. The archive holds the checkpoint signing key: keep it like a secret.", cmdBackup},
	{"restore", "restore a backup archive into a new data directory, checked completely first",
		"restore --from FILE --data DIR [--key VERIFIER]: refuses a non-empty DIR; unpacks into a temporary directory beside DIR and checks everything there (every entry's size and SHA-256 against the manifest, the checkpoint's signature (by --key when given) and that it covers the manifest's head and root, the whole log as verify checks it, its head, Merkle root and blob set against the manifest), then renames it into place. A damaged archive is refused with the reason and nothing is written.", cmdRestore},
	{"agent", "the device agent (enroll, run, status, resolve)", "The device agent: enroll a device, run it against a server, show its status, resolve a stuck task.", agent.Main},
}

// newRoot builds the command tree writing to stdout and stderr.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "taskledger",
		Short:         "an event-sourced task ledger: server, operator CLI and auditor tools",
		Long:          "taskledger is one binary: the server (serve), the operator commands that talk to a running server (task, device, admin-token, events), and the offline commands that read a stopped ledger (verify, history, export, snapshot, projections).\n\nEvery offline command takes --data DIR (env TASKLEDGER_DATA, default ./data).",
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("taskledger {{.Version}}\n")
	for _, l := range legacyCommands {
		l := l
		c := &cobra.Command{
			Use:                l.use,
			Short:              l.short,
			Long:               l.long,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				if wantsHelp(args) {
					return legacyHelp(cmd, l, stdout)
				}
				if code := l.fn(args, stdout, stderr); code != 0 {
					return exitError{code}
				}
				return nil
			},
		}
		root.AddCommand(c)
	}
	root.AddCommand(adminTokenCmd(stdout, stderr), taskCmd(stdout, stderr), deviceCmd(stdout, stderr),
		eventsCmd(stdout, stderr), versionCmd(stdout))
	return root
}

func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "--help" || a == "-help" {
			return true
		}
	}
	return false
}

// legacyHelp prints the command's description and its flag set's defaults
// (which name each flag's environment variable) on stdout, exit 0.
func legacyHelp(cmd *cobra.Command, l legacy, stdout io.Writer) error {
	var flags bytes.Buffer
	l.fn([]string{"--help"}, io.Discard, &flags)
	fmt.Fprintf(stdout, "%s\n\nUsage:\n  taskledger %s [flags]\n\n%s", l.long, l.use, flags.String())
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		root := newRoot(stdout, stderr)
		root.SetOut(stderr)
		_ = root.Usage()
		return 2
	}
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case strings.HasPrefix(err.Error(), "unknown command"):
		fmt.Fprintf(stderr, "taskledger: %v\n", err)
		return 2
	default:
		var ae *apiError
		if errors.As(err, &ae) {
			fmt.Fprintf(stderr, "taskledger: %s\n", ae.Error())
			return 1
		}
		fmt.Fprintf(stderr, "taskledger: %v\n", err)
		if isUsage(err) {
			return 2
		}
		return 1
	}
}

// usageErr marks an error of the command line itself (exit 2).
type usageErr struct{ error }

func isUsage(err error) bool {
	var u usageErr
	if errors.As(err, &u) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "flag") || strings.Contains(s, "accepts") || strings.Contains(s, "requires")
}
