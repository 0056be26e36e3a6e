package main

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
	"taskledger/snapshots"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// offlineFlags are the settings of the commands that derive projections
// offline: they must be the server's for the snapshot to be loadable.
type offlineFlags struct {
	data, retention, secret string
}

func (f *offlineFlags) register(fs *pflag.FlagSet) {
	envStringVar(fs, &f.data, "data", "./data", "data directory")
	envStringVar(fs, &f.retention, "idempotency-retention", "72h",
		"the server's --idempotency-retention (snapshots record it)")
	envStringVar(fs, &f.secret, "claim-token-secret", "",
		"the server's claim-token secret: recompute the server-issued claims and record its key-check value")
}

func (f *offlineFlags) config() (projections.Config, []byte, error) {
	d, err := duration("idempotency-retention", f.retention, time.Hour, 720*time.Hour)
	if err != nil {
		return projections.Config{}, nil, err
	}
	var secret []byte
	if f.secret != "" {
		if !secretRE.MatchString(f.secret) {
			return projections.Config{}, nil, fmt.Errorf("--claim-token-secret must be exactly 64 lowercase hex characters")
		}
		secret = hexBytes(f.secret)
	}
	return projections.Config{IdempotencyRetentionMs: d.Milliseconds()}, secret, nil
}

// keyCheck verifies every server-issued claim of the log under secret and
// returns the key-check value a snapshot may record (nil without secret:
// the claims it covers are then recomputed at the next start).
func keyCheck(store *ledger.Store, secret []byte) ([]byte, error) {
	if secret == nil {
		return nil, nil
	}
	kcv := commands.SecretCheck(secret)
	stored, err := store.SecretCheck()
	if err != nil {
		return nil, err
	}
	if stored != nil && subtle.ConstantTimeCompare(stored, kcv) != 1 {
		return nil, node.ErrSecret
	}
	if err := node.VerifyServerClaims(store, secret, 0); err != nil {
		return nil, err
	}
	return kcv, nil
}

// cmdSnapshot: `snapshot create` and `snapshot list`.
func newSnapshotCmd(stdout, stderr io.Writer) *cobra.Command {
	var f offlineFlags
	top := command("snapshot", nil)
	f.register(top.PersistentFlags())
	create := &cobra.Command{Use: "create", Short: "write a snapshot of the projections now",
		Long: "Write a snapshot of the projections of a stopped ledger now (full replay, then the snapshot file). The settings must be the server's, for start-up to load it.",
		Args: cobra.NoArgs, RunE: runCode(func([]string) int { return snapshotRun(&f, "create", stdout, stderr) })}
	list := &cobra.Command{Use: "list", Short: "list the snapshots and whether start-up would trust each",
		Long: "List the snapshots of a stopped ledger with their seq, schema and size, and whether start-up would trust each (or why not).",
		Args: cobra.NoArgs, RunE: runCode(func([]string) int { return snapshotRun(&f, "list", stdout, stderr) })}
	top.AddCommand(create, list)
	return top
}

// snapshotRun is `snapshot create` and `snapshot list`.
func snapshotRun(f *offlineFlags, verb string, stdout, stderr io.Writer) int {
	cfg, secret, err := f.config()
	if err != nil {
		return fail(stderr, "%v", err)
	}
	if verb == "list" {
		return snapshotList(f.data, cfg, stdout, stderr)
	}
	store, code := openLedger(f.data, false, stderr)
	if store == nil {
		return code
	}
	defer store.Close()
	kcv, err := keyCheck(store, secret)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	l, err := node.LoadProjections(store, cfg, zerolog.New(stderr).Level(zerolog.WarnLevel))
	if err != nil {
		return fail(stderr, "load projections: %v", err)
	}
	path, err := writeSnapshot(store, l.State, kcv)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	fmt.Fprintf(stdout, "snapshot created: %s (seq %d)\n", path, l.State.Head.Seq)
	return 0
}

func writeSnapshot(store *ledger.Store, st *projections.State, kcv []byte) (string, error) {
	s, err := node.NewSnapshot(st, kcv)
	if err != nil {
		return "", err
	}
	dir := snapshots.Dir(node.DataDir(store))
	path, err := snapshots.Write(dir, s)
	if err != nil {
		return "", err
	}
	if err := snapshots.Prune(dir, snapshots.Keep); err != nil {
		return path, err
	}
	return path, nil
}

// snapshotList prints every snapshot file, newest first, and whether
// start-up would trust it.
func snapshotList(dir string, cfg projections.Config, stdout, stderr io.Writer) int {
	store, code := openLedger(dir, true, stderr)
	if store == nil {
		return code
	}
	defer store.Close()
	list, err := snapshots.List(snapshots.Dir(dir))
	if err != nil {
		return fail(stderr, "%v", err)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no snapshots")
		return 0
	}
	for _, e := range list {
		status := "ok"
		schema := "-"
		s, err := snapshots.Read(e.Path)
		if err == nil {
			schema = fmt.Sprint(s.Schema)
			err = snapshots.Check(s, node.SnapshotWant(cfg), store)
		}
		if err != nil {
			status = "refused: " + err.Error()
		}
		fmt.Fprintf(stdout, "%s  seq=%d  schema=%s  bytes=%d  %s\n", filepath.Base(e.Path), e.Seq, schema, e.Size, status)
	}
	return 0
}

// cmdProjections: `projections rebuild`.
func newProjectionsCmd(stdout, stderr io.Writer) *cobra.Command {
	var f offlineFlags
	top := command("projections", nil)
	f.register(top.PersistentFlags())
	rebuild := &cobra.Command{Use: "rebuild", Short: "rebuild the projections and the read model by a full replay of the log, then write a snapshot",
		Long: abouts["projections"].long, Args: cobra.NoArgs,
		RunE: runCode(func([]string) int { return projectionsRebuild(&f, stdout, stderr) })}
	top.AddCommand(rebuild)
	return top
}

// projectionsRebuild is `projections rebuild`.
func projectionsRebuild(f *offlineFlags, stdout, stderr io.Writer) int {
	cfg, secret, err := f.config()
	if err != nil {
		return fail(stderr, "%v", err)
	}
	store, code := openLedger(f.data, false, stderr)
	if store == nil {
		return code
	}
	defer store.Close()
	head, err := store.Head()
	if err != nil {
		return fail(stderr, "%v", err)
	}
	var bar *progressbar.ProgressBar
	if isTerminal(stderr) {
		bar = progressbar.NewOptions64(int64(head.Seq), progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("replaying the log"), progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("events"), progressbar.OptionShowIts(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	start := time.Now() //tl:wallclock rebuild duration, reported to the operator
	var read uint64
	// The read model of settled tasks is rewritten in the same replay, so
	// that the next start finds it current too.
	st, err := node.RebuildWithReadModel(store, cfg, func(seq uint64) {
		read++
		if bar != nil && read%1024 == 0 {
			_ = bar.Set64(int64(read))
		}
	})
	if err == nil {
		err = st.LoadSoft(store)
	}
	elapsed := time.Since(start)
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		var ae *projections.ApplyError
		if errors.As(err, &ae) {
			return fail(stderr, "rebuild stopped at seq %d: %v (run taskledger verify)", ae.Seq, err)
		}
		return fail(stderr, "rebuild: %v", err)
	}
	kcv, err := keyCheck(store, secret)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	path, err := writeSnapshot(store, st, kcv)
	if err != nil {
		return fail(stderr, "snapshot after the rebuild: %v", err)
	}
	rate := float64(read) / max(elapsed.Seconds(), 1e-9)
	fmt.Fprintf(stdout, "rebuilt projections from the log: %d events read in %.3fs (%.0f events/s); snapshot %s (seq %d)\n",
		read, elapsed.Seconds(), rate, path, st.Head.Seq)
	return 0
}

// isTerminal reports whether w is a terminal (progress bars only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
