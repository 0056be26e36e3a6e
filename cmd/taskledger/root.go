package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"taskledger/client/agent"
	"taskledger/internal/cli"
)

// The command tree (spf13/cobra): one constructor per command
// (newServeCmd, newVerifyCmd, …, agent.NewCommand), every flag a pflag
// flag with its default and, where it has one, the environment variable it
// honours in its help. internal/cli carries exit codes through cobra and
// keeps the standard flag package's single-dash long flags (-data DIR)
// working. Flags may stand before or after positional arguments.

// exitError carries a command's exit code through cobra.
type exitError = cli.ExitError

// runCode adapts a command body that returns an exit code.
func runCode(fn func(args []string) int) func(*cobra.Command, []string) error { return cli.Code(fn) }

// about is a command's Short and Long help.
type about struct{ short, long string }

var abouts = map[string]about{
	"serve": {"run the server", "Run the server: the sequencer, the HTTP API and the operator console.\n" +
		"The first start on an empty data directory creates the ledger and writes a one-time admin token to DATA/initial-admin-token (mode 0600)."},
	"verify": {"check the log: hash chain, seq, invariants, snapshots (offline; --server checks a running server's log here)",
		"Check a stopped ledger: the hash chain, seq density, every invariant, bbolt's consistency check, and that snapshot + tail equals a full replay.\n" +
			"With --server URL (or TASKLEDGER_SERVER) and an admin token (--token-file FILE or TASKLEDGER_TOKEN), the whole log is read through the running server's API (its stored envelopes) and checked here: seqs, hash chain, canonical encoding, invariants and every task's rules; --key VERIFIER also checks its newest signed checkpoint.\n" +
			"With --ledger nats://HOST:PORT[,...] the JetStream log is checked the same way, event by event (--nats-name, --nats-creds).\n" +
			"Exits 1 on the first violation, naming its seq."},
	"migrate": {"copy a stopped bbolt ledger into an empty JetStream stream, and verify the copy",
		"Copy the stopped ledger in --data into the empty JetStream log named by --ledger nats://HOST:PORT[,...]: every event with its stored bytes (same seqs, same hashes), the soft records, the manual clock, the secret key-check value and the admin tokens; then verify the copy and check its head is the source's. --nats-replicas sets the replicas of the stream it creates."},
	"status": {"status --ledger nats://…: the actual replicas and storage of a cluster's stream, buckets and object store",
		"Report the JetStream resources the ledger lives in (the events stream, the SOFT, META and LEASE buckets, the BLOBS object store): each one's configured replicas, how many are current, its leader, storage, messages and bytes, and a warning for each kept on one server of a cluster of several. It only reads: nothing is created or changed."},
	"history": {"a task's full history (offline; --server reads it through the API)",
		"Print a task's full history, human readable or --json. With --server (or TASKLEDGER_SERVER) it is read through a running server's API; with --ledger nats://HOST:PORT[,...] from a JetStream log (read only); otherwise from the stopped ledger in --data."},
	"export": {"the log as NDJSON (offline; --server reads it through the API)",
		"Write the log as NDJSON: one event a line, seq ascending, no secrets. With --server it is read through a running server's API; with --ledger nats://HOST:PORT[,...] from a JetStream log."},
	"snapshot":    {"snapshot create|list: snapshots of a stopped ledger", "Write a snapshot of the projections now (create) or list the snapshots and whether start-up would trust each (list)."},
	"projections": {"projections rebuild: full replay from the log", "Rebuild the projections and the read model of finished tasks from the whole log in one replay, with a progress bar on a terminal; reports events read and events/s, then writes a fresh snapshot. The next start finds both current."},
	"bench":       {"the load generator", "The load generator of the benchmark: raw bbolt baselines, the ledger in process, and over HTTP."},
	"checkpoint-key": {"checkpoint-key export|create: the checkpoint key's public verifier string; a new key",
		"export prints the checkpoint signing key's public verifier string (the note format), which auditors pass to audit-verify --key; it reads DATA/checkpoint-key only. create writes a new key (mode 0600) where there is none and prints its verifier: the key every node of a cluster is given."},
	"audit-bundle": {"one task's audit bundle: its events, inclusion proofs, a signed checkpoint",
		"Write a task's audit bundle (--task ID --out FILE): every event of the task with an inclusion proof against one signed checkpoint, that checkpoint and the key's verifier string. Offline from --data, or from a running server with --server (written only after it verifies here)."},
	"audit-proof": {"audit-proof --consistency --from A --to B: a consistency proof (JSON)",
		"Write the consistency proof between two tree sizes of a stopped ledger, for audit-verify --consistency."},
	"audit-verify": {"check an audit bundle, or that a log only grew, with no ledger and no network",
		"audit-verify FILE [--key VERIFIER]: check an audit bundle (signature, every inclusion proof, the task's own rules) and print the history; any flipped byte fails with the reason.\naudit-verify --consistency OLD NEW --proof FILE --key VERIFIER: check that the log of checkpoint NEW extends the log of OLD."},
	"backup": {"a consistent backup archive of a running server (--server) or a stopped ledger (--data)",
		"backup --out FILE: write one archive (tar) holding the log copied from one read transaction, every blob it references, the checkpoint signing key and a manifest (head seq and hash, Merkle root, a checkpoint of the head signed now, every file's size and SHA-256). With --server URL (or TASKLEDGER_SERVER) and an admin token (--token-file FILE or TASKLEDGER_TOKEN) it is streamed from the running server (GET /api/v1/admin/backup) while it keeps serving; otherwise from the stopped ledger in --data. A progress bar on a terminal; the last line gives bytes and MB/s. The archive holds the checkpoint signing key: keep it like a secret."},
	"restore": {"restore a backup archive into a new data directory, checked completely first",
		"restore --from FILE --data DIR [--key VERIFIER]: refuses a non-empty DIR; unpacks into a temporary directory beside DIR and checks everything there (every entry's size and SHA-256 against the manifest, the checkpoint's signature (by --key when given) and that it covers the manifest's head and root, the whole log as verify checks it, its head, Merkle root and blob set against the manifest), then renames it into place. A damaged archive is refused with the reason and nothing is written."},
}

// command is a cobra command named in abouts, running fn with its
// positional arguments.
func command(use string, fn func(args []string) int) *cobra.Command {
	name, _, _ := strings.Cut(use, " ")
	ab, ok := abouts[name]
	if !ok {
		panic("no help text for command " + name)
	}
	c := &cobra.Command{Use: use, Short: ab.short, Long: ab.long}
	if fn != nil {
		c.RunE = runCode(fn)
	}
	return c
}

// newRoot builds the command tree writing to stdout and stderr.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "taskledger",
		Short: "an event-sourced task ledger: server, operator CLI and auditor tools",
		Long: "taskledger is one binary: the server (serve), the operator commands that talk to a running server (task, device, admin-token, events), the offline commands that read a stopped ledger (verify, history, export, snapshot, projections), the auditor tools and the device agent (agent).\n\n" +
			"Every offline command takes --data DIR (env TASKLEDGER_DATA, default ./data). Flags may stand before or after the arguments, and a long flag may be written with one dash (-data DIR) as well as two. `taskledger help COMMAND...` or `COMMAND --help` shows each command's flags with their defaults and environment variables.",
		Version: versionString(),
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("taskledger {{.Version}}\n")
	root.AddCommand(
		newServeCmd(stderr), newVerifyCmd(stdout, stderr), newMigrateCmd(stdout, stderr), newStatusCmd(stdout, stderr),
		newHistoryCmd(stdout, stderr), newExportCmd(stdout, stderr), newSnapshotCmd(stdout, stderr),
		newProjectionsCmd(stdout, stderr), newBenchCmd(stdout, stderr), newCheckpointKeyCmd(stdout, stderr),
		newAuditBundleCmd(stdout, stderr), newAuditProofCmd(stdout, stderr), newAuditVerifyCmd(stdout, stderr),
		newBackupCmd(stdout, stderr), newRestoreCmd(stdout, stderr), agent.NewCommand(stdout, stderr),
		newAdminTokenCmd(stdout, stderr), newTaskCmd(stdout, stderr), newDeviceCmd(stdout, stderr),
		newEventsCmd(stdout, stderr), newVersionCmd(stdout))
	cli.Prepare(root)
	return root
}

func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	if len(args) == 0 {
		root.SetOut(stderr)
		_ = root.Usage()
		return 2
	}
	return cli.Execute(root, args, stderr, "taskledger")
}

// usageErr marks an error of the command line itself (exit 2).
type usageErr = cli.UsageError
