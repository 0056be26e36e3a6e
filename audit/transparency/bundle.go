package transparency

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"taskledger/audit/checkpoint"
	"taskledger/audit/merkle"
	"taskledger/events"
	"taskledger/ledger"
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

// Encode is the bundle's file: indented JSON and a newline, the one form
// OpenBundle accepts.
func (b *Bundle) Encode() []byte {
	doc, _ := json.MarshalIndent(b, "", "  ")
	return append(doc, '\n')
}

// Bundle builds the audit bundle of a task from the running node's tree
// (see BuildBundle).
func (l *Log) Bundle(task string) (*Bundle, error) {
	if err := l.CatchUp(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return BuildBundle(l.store, l.tree, l.key, l.clock.Now().UnixMilli(), task)
}

// BuildBundle writes one task's events with their inclusion proofs against
// the latest stored checkpoint when it covers the task's last event, else
// against a checkpoint of the whole tree signed at now (and stored).
func BuildBundle(store Store, tree *merkle.Tree, key *checkpoint.Key, now int64, task string) (*Bundle, error) {
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
		if note, err = key.Sign(checkpoint.Checkpoint{Size: size, Root: root, Time: now}); err != nil {
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

// OpenBundle checks a bundle file with no ledger and no network — its
// canonical form, the checkpoint's signature by key (the bundle's own
// verifier when key is ""), every event's inclusion proof, envelope,
// hash, stream, stream version, order and body — and returns the task's
// events in order. The task's own rules are the caller's to check
// (projections.CheckTaskHistory).
func OpenBundle(raw []byte, key string) (*Bundle, []ledger.Event, error) {
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
	return &b, evs, nil
}
