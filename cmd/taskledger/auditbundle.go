package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"taskledger/commands"
	"taskledger/events"
	"taskledger/ledger"
	"taskledger/ledger/checkpoint"
	"taskledger/ledger/merkle"
	"taskledger/ledger/transparency"
	"taskledger/projections"
)

// BundleFormat names the audit bundle's format version.
const BundleFormat = "taskledger-audit-bundle/1"

// Bundle is one task's history with the proofs that it is in the log:
// every event's stored envelope, its inclusion proof against one signed
// checkpoint, the checkpoint and the verifier string of its key.
type Bundle struct {
	Format     string        `json:"format"`
	TaskID     string        `json:"task_id"`
	Verifier   string        `json:"verifier"`
	Checkpoint string        `json:"checkpoint"`
	Events     []BundleEvent `json:"events"`
}

// BundleEvent is one event of a bundle.
type BundleEvent struct {
	Seq      uint64   `json:"seq"`
	Envelope []byte   `json:"envelope"` // the stored msgpack bytes, base64
	Proof    [][]byte `json:"proof"`
}

func init() {
	prev := runMore
	runMore = func(args []string, stdout, stderr io.Writer) (int, bool) {
		if args[0] == "audit-bundle" {
			return cmdAuditBundle(args[1:], stdout, stderr), true
		}
		return prev(args, stdout, stderr)
	}
}

// cmdAuditBundle writes a task's audit bundle from a stopped ledger:
// `audit-bundle --task ID --out FILE [--data DIR]`. The proofs are against
// the latest stored checkpoint when it covers the task's events, else
// against a checkpoint of the whole log signed now.
func cmdAuditBundle(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit-bundle", stderr)
	data := fs.String("data", envDefault("data", "./data"), "data directory")
	task := fs.String("task", "", "the task id")
	out := fs.String("out", "", "the bundle file to write")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 0 || *task == "" || *out == "" {
		fmt.Fprintln(stderr, "usage: taskledger audit-bundle --task ID --out FILE [--data DIR]")
		return 2
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
	doc, _ := json.MarshalIndent(b, "", "  ")
	if err := os.WriteFile(*out, append(doc, '\n'), 0o644); err != nil {
		return fail(stderr, "%v", err)
	}
	fmt.Fprintf(stderr, "taskledger: bundle of task %s: %d events, proofs against the checkpoint of size %s\n", *task, len(b.Events), sizeLine(b.Checkpoint))
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
	var seqs []uint64
	if err := store.Stream(events.TaskStream(task), func(e *ledger.Event) error {
		seqs = append(seqs, e.Seq)
		return nil
	}); err != nil {
		return nil, err
	}
	if len(seqs) == 0 {
		return nil, fmt.Errorf("no task %s in the log", task)
	}
	size, note, err := store.LatestCheckpoint()
	if err != nil || size < seqs[len(seqs)-1] || size > tree.Size() {
		size = tree.Size()
		root, err := tree.Root(size)
		if err != nil {
			return nil, err
		}
		head, err := store.Head()
		if err != nil {
			return nil, err
		}
		at := max(commands.Ms(commands.WallClock{}.Now()), head.At)
		if note, err = key.Sign(checkpoint.Checkpoint{Size: size, Root: root, Time: at}); err != nil {
			return nil, err
		}
		if err := store.PutCheckpoint(size, note); err != nil {
			return nil, err
		}
	}
	b := &Bundle{Format: BundleFormat, TaskID: task, Verifier: key.Verifier(), Checkpoint: string(note)}
	raws := map[uint64][]byte{}
	for _, seq := range seqs {
		_ = store.RangeRaw(seq-1, func(s uint64, raw []byte) error {
			raws[s] = append([]byte(nil), raw...)
			return ledger.ErrStop
		})
	}
	for _, seq := range seqs {
		p, err := tree.Inclusion(seq-1, size)
		if err != nil {
			return nil, err
		}
		if p == nil {
			p = [][]byte{}
		}
		b.Events = append(b.Events, BundleEvent{Seq: seq, Envelope: raws[seq], Proof: p})
	}
	return b, nil
}

// verifyBundle checks a bundle file with no ledger and no network and
// returns the task's events in order.
func verifyBundle(raw []byte, key string) (*Bundle, []ledger.Event, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var b Bundle
	if err := dec.Decode(&b); err != nil {
		return nil, nil, fmt.Errorf("not an audit bundle: %w", err)
	}
	canon, _ := json.MarshalIndent(&b, "", "  ")
	if !bytes.Equal(raw, append(canon, '\n')) {
		return nil, nil, errors.New("the bundle is not in canonical form (a byte was changed)")
	}
	if b.Format != BundleFormat {
		return nil, nil, fmt.Errorf("unknown bundle format %q", b.Format)
	}
	if key == "" {
		key = b.Verifier
	} else if key != b.Verifier {
		return nil, nil, errors.New("the bundle names another key than --key")
	}
	cp, err := checkpoint.Open([]byte(b.Checkpoint), key)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	if len(b.Events) == 0 {
		return nil, nil, errors.New("the bundle holds no event")
	}
	stream := events.TaskStream(b.TaskID)
	var evs []ledger.Event
	for i, be := range b.Events {
		if err := merkle.VerifyInclusion(be.Seq, cp.Size, merkle.LeafHash(be.Envelope), be.Proof, cp.Root); err != nil {
			return nil, nil, fmt.Errorf("seq %d: not in the log of the checkpoint: %v", be.Seq, err)
		}
		e, err := ledger.DecodeEvent(be.Envelope)
		if err != nil {
			return nil, nil, fmt.Errorf("seq %d: %w", be.Seq, err)
		}
		if re, err := ledger.Marshal(&e); err != nil || !bytes.Equal(re, be.Envelope) {
			return nil, nil, fmt.Errorf("seq %d: the envelope is not canonical", be.Seq)
		}
		if h, err := ledger.ComputeHash(&e); err != nil || !bytes.Equal(h, e.Hash) {
			return nil, nil, fmt.Errorf("seq %d: the event's hash does not match its content", be.Seq)
		}
		if e.Seq != be.Seq || e.Stream != stream {
			return nil, nil, fmt.Errorf("seq %d: the envelope is of seq %d, stream %s", be.Seq, e.Seq, e.Stream)
		}
		if e.StreamVersion != uint64(i)+1 {
			return nil, nil, fmt.Errorf("seq %d: stream version %d, want %d (an event of the task is missing)", e.Seq, e.StreamVersion, i+1)
		}
		if i > 0 && e.Seq <= evs[i-1].Seq {
			return nil, nil, fmt.Errorf("seq %d: events out of order", e.Seq)
		}
		if i > 0 && e.At < evs[i-1].At {
			return nil, nil, fmt.Errorf("seq %d: time goes back", e.Seq)
		}
		if _, err := events.DecodeBody(e.Type, e.Schema, e.Body); err != nil {
			return nil, nil, fmt.Errorf("seq %d: body: %w", e.Seq, err)
		}
		evs = append(evs, e)
	}
	if err := projections.CheckTaskHistory(evs); err != nil {
		return nil, nil, fmt.Errorf("the task's history breaks its rules: %w", err)
	}
	return &b, evs, nil
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
