package jetstream

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"taskledger/ledger"
)

// Pipelined appends.
//
// Start publishes a batch's message and returns at once; the returned
// wait gives the outcome once the stream acknowledged it (or refused it,
// or the answer did not come within the Timeout). A batch started while
// earlier ones are pending continues the newest of them: b.Expected is
// the head that batch ends at, and the message is published expecting
// the JetStream sequence that batch's message will get and, as that
// sequence alone would match another writer's message stored in N's
// place, also N's message id (Nats-Msg-Id: the hex of N's last event's
// hash, unique by the chain). So the stream stores batch N+1 only right
// after batch N: if N is refused, N+1 is refused too. The waits are called in the order of the Starts, and a
// failure is sticky: when a pending append fails, every append started
// before that failure was awaited fails as well (ErrPipelineBroken),
// whatever the stream answered for it, and writes no soft records, so a
// caller that answers its commands in order never acknowledges anything
// decided on top of a failed batch. Once every pending append was
// awaited, the next Start reads the stream afresh.

// ErrPipelineBroken is returned by the wait of an append started while an
// earlier one was pending, when that earlier one failed (it wraps that
// failure).
var ErrPipelineBroken = errors.New("jetstream: an earlier pipelined append failed")

// errCodeWrongLastMsgID is the server's JSStreamWrongLastMsgIDErrF: the
// stream's last message is not the one a pipelined batch continues.
const errCodeWrongLastMsgID natsjs.ErrorCode = 10070

// errOutOfOrder is a wait called before the waits of earlier Starts.
var errOutOfOrder = errors.New("jetstream: pipelined appends awaited out of order")

// pendingAppend is one started append.
type pendingAppend struct {
	batch     *ledger.Batch
	fut       natsjs.PubAckFuture // nil: no message (soft records only) or err
	err       error               // failed before or while publishing
	js        uint64              // the JetStream sequence its message is to get
	head      ledger.Head         // after its last event
	checkHead bool                // soft records only: check the stream's head first
	started   time.Time
}

// Start begins appending b and returns the wait for its outcome (see the
// comment above). A batch of soft records only publishes nothing: its
// wait checks, after the earlier pending appends, that the stream's head
// is still b.Expected (ledger.ErrHeadMoved otherwise) and writes its
// records.
func (l *Log) Start(b *ledger.Batch) (wait func() error) {
	return l.start(b, true)
}

func (l *Log) start(b *ledger.Batch, checkSoftHead bool) func() error {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	p := &pendingAppend{batch: b, checkHead: checkSoftHead && len(b.Events) == 0}
	p.err = l.publishAsync(p)
	l.pending = append(l.pending, p)
	return func() error { return l.await(p) }
}

// publishAsync checks b against the newest head (the pending tail, else
// the stream's) and publishes its message without waiting (l.pmu held).
func (l *Log) publishAsync(p *pendingAppend) error {
	b := p.batch
	if l.broken != nil {
		return fmt.Errorf("%w: %w", ErrPipelineBroken, l.broken)
	}
	var head ledger.Head
	var lastJS uint64
	if len(l.pending) > 0 {
		head, lastJS = l.tail, l.tailJS
	} else {
		var closed bool
		l.mu.Lock()
		head, lastJS, closed = l.head, l.lastJS, l.shut.Load()
		l.mu.Unlock()
		if closed {
			return ledger.ErrClosed
		}
		if !sameHead(head, b.Expected) {
			if err := l.sync(); err != nil {
				return err
			}
			l.mu.Lock()
			head, lastJS = l.head, l.lastJS
			l.mu.Unlock()
		}
		l.tail, l.tailJS, l.tailID = head, lastJS, ""
	}
	if !sameHead(head, b.Expected) {
		return fmt.Errorf("%w: head is %d, batch expects %d", ledger.ErrHeadMoved, head.Seq, b.Expected.Seq)
	}
	if len(b.Events) == 0 {
		return nil
	}
	h := head
	for _, e := range b.Events {
		if e.Seq != h.Seq+1 || !bytes.Equal(e.PrevHash, h.Hash) {
			return fmt.Errorf("%w: event seq %d after head %d", ledger.ErrBadBatch, e.Seq, h.Seq)
		}
		h = ledger.Head{Seq: e.Seq, Hash: e.Hash, At: e.At}
	}
	body, err := encodeBatch(b)
	if err != nil {
		return err
	}
	if max := l.nc.MaxPayload(); int64(len(body))+1024 > max {
		return fmt.Errorf("%w: %d events, %d bytes, max_payload %d", ErrBatchTooLarge, len(b.Events), len(body), max)
	}
	msg := &nats.Msg{Subject: l.subject, Data: body, Header: nats.Header{}}
	msg.Header.Set("Taskledger-Seqs", fmt.Sprintf("%d-%d", head.Seq+1, h.Seq))
	id := hex.EncodeToString(h.Hash)
	opts := []natsjs.PublishOpt{natsjs.WithMsgID(id), natsjs.WithExpectLastSequence(lastJS), natsjs.WithExpectStream(l.streamName)}
	if len(l.pending) > 0 && l.tailID != "" { // on top of a pending batch: that one, not another in its place
		opts = append(opts, natsjs.WithExpectLastMsgID(l.tailID))
	}
	p.started = time.Now() //tl:wallclock bounds the wait for the acknowledgement
	fut, err := l.js.PublishMsgAsync(msg, opts...)
	if err != nil {
		return fmt.Errorf("jetstream: publish batch %d-%d: %w", head.Seq+1, h.Seq, err)
	}
	p.fut, p.js, p.head = fut, lastJS+1, h
	l.tail, l.tailJS, l.tailID = h, lastJS+1, id
	return nil
}

// await is the wait Start returned: the outcome of p, then its soft
// records and meta changes.
func (l *Log) await(p *pendingAppend) error {
	err := p.err
	var ack *natsjs.PubAck
	if err == nil && p.fut != nil {
		ack, err = l.ackOf(p)
	}
	l.pmu.Lock()
	if len(l.pending) == 0 || l.pending[0] != p {
		l.pmu.Unlock()
		return errOutOfOrder
	}
	l.pending = l.pending[1:]
	switch {
	case l.broken != nil:
		err = fmt.Errorf("%w: %w", ErrPipelineBroken, l.broken)
	case err != nil && p.fut != nil:
		err = l.publishFailed(p, err)
	case err == nil && ack != nil:
		err = l.stored(p, ack)
	case err == nil && p.checkHead:
		err = l.headStill(p.batch.Expected, l.pending)
	}
	if err != nil && l.broken == nil && len(l.pending) > 0 {
		l.broken = err
	}
	if len(l.pending) == 0 {
		l.broken = nil
	}
	l.pmu.Unlock()
	if err != nil {
		return err
	}
	return l.writeRecords(p.batch)
}

// ackOf waits for p's acknowledgement, at most the Timeout after it was
// published.
func (l *Log) ackOf(p *pendingAppend) (*natsjs.PubAck, error) {
	t := time.NewTimer(l.cfg.Timeout - time.Since(p.started)) //tl:wallclock
	defer t.Stop()
	select {
	case ack := <-p.fut.Ok():
		return ack, nil
	case err := <-p.fut.Err():
		return nil, err
	case <-t.C:
		return nil, natsjs.ErrAsyncPublishTimeout
	}
}

// stored indexes p's message once the stream acknowledged it (l.pmu held).
func (l *Log) stored(p *pendingAppend, ack *natsjs.PubAck) error {
	if ack.Sequence != p.js {
		return fmt.Errorf("%w: stored as message %d, expected %d", ErrMessage, ack.Sequence, p.js)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastJS >= ack.Sequence { // a concurrent read already indexed it
		return nil
	}
	if l.lastJS+1 != ack.Sequence || !sameHead(l.head, p.batch.Expected) {
		return fmt.Errorf("%w: message %d does not follow message %d as read", ErrMessage, ack.Sequence, l.lastJS)
	}
	l.indexOwn(ack.Sequence, p.batch.Events)
	return nil
}

// publishFailed classifies a failed publish of p (l.pmu held). The answer
// may have been lost after the message was stored: if the stream now ends
// with this batch, it was stored once, and it is ours.
func (l *Log) publishFailed(p *pendingAppend, err error) error {
	if serr := l.sync(); serr == nil {
		l.mu.Lock()
		ours := sameHead(l.head, p.head)
		l.mu.Unlock()
		if ours {
			return nil
		}
	}
	first := p.batch.Expected.Seq + 1
	var apiErr *natsjs.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequenceConstant || apiErr.ErrorCode == errCodeWrongLastMsgID) {
		return fmt.Errorf("%w: another writer appended after seq %d", ledger.ErrHeadMoved, first-1)
	}
	return fmt.Errorf("jetstream: publish batch %d-%d: %w", first, p.head.Seq, err)
}

// headStill checks that the stream's head is expected, or the head of a
// batch this Log started after it (later: still pending), whose hash chains
// it to expected through this Log's own batches only (l.pmu held): a batch
// of soft records only is written on the state it was decided on.
func (l *Log) headStill(expected ledger.Head, later []*pendingAppend) error {
	if err := l.sync(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ours := sameHead(l.head, expected)
	for _, p := range later {
		if p.fut != nil && l.head.Seq > expected.Seq && sameHead(l.head, p.head) {
			ours = true
		}
	}
	if !ours {
		return fmt.Errorf("%w: the stream is at seq %d, the batch expects %d", ledger.ErrHeadMoved, l.head.Seq, expected.Seq)
	}
	return nil
}
