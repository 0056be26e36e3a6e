package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"taskledger/api"
	"taskledger/audit/checkpoint"
	"taskledger/audit/merkle"
	"taskledger/audit/transparency"

	"github.com/spf13/cobra"
)

// The transparency commands: checkpoint-key export, audit-proof
// --consistency (offline) and audit-verify --consistency (no ledger, no
// network).

// cmdCheckpointKey prints the checkpoint key's verifier string:
// `checkpoint-key export [--data DIR]`. It reads the key file only.
func newCheckpointKeyCmd(stdout, stderr io.Writer) *cobra.Command {
	var data string
	top := command("checkpoint-key", nil)
	envStringVar(top.PersistentFlags(), &data, "data", "./data", "data directory")
	export := &cobra.Command{Use: "export", Short: "print the checkpoint key's public verifier string", Long: abouts["checkpoint-key"].long,
		Args: cobra.NoArgs, RunE: runCode(func([]string) int { return checkpointKeyExport(data, stdout, stderr) })}
	create := &cobra.Command{Use: "create", Short: "write a new checkpoint key (mode 0600) where there is none and print its verifier", Long: abouts["checkpoint-key"].long,
		Args: cobra.NoArgs, RunE: runCode(func([]string) int { return checkpointKeyCreate(data, stdout, stderr) })}
	top.AddCommand(export, create)
	return top
}

// checkpointKeyCreate is `checkpoint-key create`: a new key where there is
// none, its verifier printed; the key a cluster's nodes are all given (a
// cluster node never creates one).
func checkpointKeyCreate(data string, stdout, stderr io.Writer) int {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fail(stderr, "%v", err)
	}
	k, created, err := checkpoint.LoadOrCreateKey(data)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	if !created {
		return fail(stderr, "%s already holds a checkpoint key (verifier %s); it is kept", data, k.Verifier())
	}
	fmt.Fprintln(stdout, k.Verifier())
	return 0
}

// checkpointKeyExport is `checkpoint-key export`.
func checkpointKeyExport(dataDir string, stdout, stderr io.Writer) int {
	data := &dataDir
	k, err := checkpoint.LoadKey(*data)
	if err != nil {
		return fail(stderr, "%v (the server creates it at its first start)", err)
	}
	fmt.Fprintln(stdout, k.Verifier())
	return 0
}

// cmdAuditProof writes a consistency proof between two tree sizes of a
// stopped ledger, with both signed checkpoints when they were stored:
// `audit-proof --consistency --from A --to B [--data DIR]` (JSON, the
// answer of GET /api/v1/admin/proofs/consistency).
func newAuditProofCmd(stdout, stderr io.Writer) *cobra.Command {
	var data *string
	var consistency *bool
	var from, to *uint64
	c := command("audit-proof", func(pos []string) int {
		if len(pos) != 0 || !*consistency || *from == 0 || *to == 0 {
			fmt.Fprintln(stderr, "usage: taskledger audit-proof --consistency --from A --to B [--data DIR]")
			return 2
		}
		store, code := openLedger(*data, true, stderr)
		if store == nil {
			return code
		}
		defer store.Close()
		tree, err := transparency.Build(store)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		hashes, err := tree.Consistency(*from, *to)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		r1, _ := tree.Root(*from)
		r2, _ := tree.Root(*to)
		if hashes == nil {
			hashes = [][]byte{}
		}
		out := api.ConsistencyProofJSON{From: *from, To: *to, FromRoot: r1, ToRoot: r2, Hashes: hashes}
		if n, err := store.Checkpoint(*from); err == nil {
			s := string(n)
			out.FromCheckpoint = &s
		}
		if n, err := store.Checkpoint(*to); err == nil {
			s := string(n)
			out.ToCheckpoint = &s
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return fail(stderr, "%v", err)
		}
		return 0
	})
	fs := c.Flags()
	data = envString(fs, "data", "./data", "data directory")
	consistency = fs.Bool("consistency", false, "a consistency proof")
	from = fs.Uint64("from", 0, "the older tree size")
	to = fs.Uint64("to", 0, "the newer tree size")
	return c
}

// cmdAuditVerify checks, with no ledger and no network:
// `audit-verify --consistency OLD NEW --proof FILE --key VERIFIER` — both
// checkpoints are signed by the key, OLD is not larger than NEW, and the
// proof shows the tree of NEW extends the tree of OLD.
func newAuditVerifyCmd(stdout, stderr io.Writer) *cobra.Command {
	var consistency *bool
	var proofFile, key *string
	c := command("audit-verify FILE | audit-verify --consistency OLD NEW --proof FILE --key VERIFIER", func(pos []string) int {
		if !*consistency {
			if len(pos) != 1 {
				fmt.Fprintln(stderr, "usage: taskledger audit-verify FILE [--key VERIFIER] | audit-verify --consistency OLD NEW --proof FILE --key VERIFIER")
				return 2
			}
			return auditVerifyBundle(pos[0], *key, stdout, stderr)
		}
		if len(pos) != 2 || *proofFile == "" || *key == "" {
			fmt.Fprintln(stderr, "usage: taskledger audit-verify --consistency OLD_CHECKPOINT NEW_CHECKPOINT --proof FILE --key VERIFIER")
			return 2
		}
		if err := verifyConsistency(pos[0], pos[1], *proofFile, *key); err != nil {
			fmt.Fprintf(stderr, "taskledger: audit-verify FAILED: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "ok: %s extends %s\n", pos[1], pos[0])
		return 0
	})
	fs := c.Flags()
	consistency = fs.Bool("consistency", false, "check that NEW extends OLD")
	proofFile = fs.String("proof", "", "the consistency proof (JSON)")
	key = fs.String("key", "", "the log's verifier string (taskledger checkpoint-key export)")
	return c
}

// decodeProofFile reads a consistency proof strictly: known fields only,
// and in the canonical form audit-proof or the API writes (so every byte
// of it counts: base64 with other padding bits is refused).
func decodeProofFile(raw []byte) (*api.ConsistencyProofJSON, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p api.ConsistencyProofJSON
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a consistency proof: %w", err)
	}
	compact, err1 := json.Marshal(&p)
	indented, err2 := json.MarshalIndent(&p, "", "  ")
	if err1 != nil || err2 != nil || (string(raw) != string(compact)+"\n" && string(raw) != string(indented)+"\n") {
		return nil, errors.New("the proof is not in canonical form")
	}
	return &p, nil
}

func verifyConsistency(oldPath, newPath, proofPath, key string) error {
	open := func(path string) (*checkpoint.Checkpoint, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cp, err := checkpoint.Open(b, key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return cp, nil
	}
	oldCP, err := open(oldPath)
	if err != nil {
		return err
	}
	newCP, err := open(newPath)
	if err != nil {
		return err
	}
	if oldCP.Size > newCP.Size {
		return fmt.Errorf("the old checkpoint (size %d) is larger than the new one (size %d)", oldCP.Size, newCP.Size)
	}
	raw, err := os.ReadFile(proofPath)
	if err != nil {
		return err
	}
	p, err := decodeProofFile(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", proofPath, err)
	}
	oldText, _ := os.ReadFile(oldPath)
	newText, _ := os.ReadFile(newPath)
	if !bytes.Equal(p.FromRoot, oldCP.Root) || !bytes.Equal(p.ToRoot, newCP.Root) {
		return errors.New("the proof's roots are not the checkpoints' roots")
	}
	if (p.FromCheckpoint != nil && *p.FromCheckpoint != string(oldText)) || (p.ToCheckpoint != nil && *p.ToCheckpoint != string(newText)) {
		return errors.New("the checkpoints inside the proof are not the ones given")
	}
	if p.From != oldCP.Size || p.To != newCP.Size {
		return fmt.Errorf("the proof is between sizes %d and %d, the checkpoints are of %d and %d", p.From, p.To, oldCP.Size, newCP.Size)
	}
	if oldCP.Size == 0 {
		return nil // every log extends the empty one
	}
	if err := merkle.VerifyConsistency(oldCP.Size, newCP.Size, p.Hashes, oldCP.Root, newCP.Root); err != nil {
		return errors.New("the new checkpoint's log does not extend the old one's: " + err.Error())
	}
	return nil
}
