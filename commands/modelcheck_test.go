package commands

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"taskledger/events"
	"taskledger/projections"
)

// The model check explores a small world of the pure domain — the Decide
// functions and the fold, no HTTP, log or goroutine — exhaustively,
// breadth-first over every device, operator and clock step, and asserts in
// every reachable state that there is no dead end:
//
//   - a device appears to hold at most one claim (open tasks whose claim
//     names it), and its open-task index names a task it holds;
//   - from every state, every open task either moves (its version changes)
//     or comes to need an operator, along device and clock steps alone;
//   - a task that needs an operator says why (needs_operator_reason) and
//     recover (requeue and fail) is accepted for it;
//   - a replayed claim-next answers what it answered first (or, for a
//     claim no longer current, claim_replay_expired — never another claim,
//     never a claim where "no task" was answered).
//
// The world: 2 devices (ready), 2 tasks (the first authorized under
// "reclaim", the second under "manual"), claim and running leases of 60 s,
// authorizations of 90 s (so a claim lease can be capped by its
// authorization), the clock moving in 30 s steps up to 3 min, at most one
// operator step (authorize, cancel, recover, revoke a device) per path.
// States are deduplicated on an encoding of every field a decision of the
// world reads (modelKey); ids a path generated are not part of it, times
// are, and an expiry that passed is only "expired". It explores about
// 25,700 states (about 15 s of CPU).

const (
	mcStep    = 30 * time.Second
	mcHorizon = 3 * time.Minute
	mcAuthTTL = 90 * time.Second
	mcOps     = 1 // operator steps along one path
)

// mcAct is one step of the world.
type mcAct struct {
	kind string // claim, replay, task call op, authorize, cancel, recover, revoke, clock
	dev  int
	task int
	arg  string
}

// mcDevice is what the model remembers of a device: its last claim-next
// key and what it was answered.
type mcDevice struct {
	key, answer string
	soft        *projections.IdemRecord // its soft record, when it was "no task"
}

// mcNode is a reached state: the steps that lead to it from the start.
type mcNode struct {
	parent *mcNode
	act    mcAct
	depth  int
}

func (n *mcNode) path() []mcAct {
	p := make([]mcAct, n.depth)
	for x := n; x.parent != nil; x = x.parent {
		p[x.depth-1] = x.act
	}
	return p
}

// mcWorld is the world along one path.
type mcWorld struct {
	*world
	start int64
	devs  []Principal
	tasks []string
	sess  []string
	last  []mcDevice
	ops   int // operator steps taken (at most mcOps)
}

func newMCWorld(t testing.TB) *mcWorld {
	w := &mcWorld{world: newWorld(t)}
	w.cfg.ClaimLease, w.cfg.RunningLease, w.cfg.PresenceTTL = time.Minute, time.Minute, time.Hour
	w.start = w.now
	for range 2 {
		p := w.device()
		w.present(p)
		w.devs = append(w.devs, p)
		w.sess = append(w.sess, w.id())
		w.last = append(w.last, mcDevice{})
	}
	for i, policy := range []string{projections.TakeoverReclaim, projections.TakeoverManual} {
		w.given(&CreateTask{AdminReq: w.admin(), Payload: fmt.Sprintf(`{"n":%d}`, i), PayloadSHA256: HashToken(fmt.Sprintf(`{"n":%d}`, i))})
		var id string
		for tid, tk := range w.s.Tasks {
			if int(tk.CreateSeq) == len(w.log) {
				id = tid
			}
		}
		w.tasks = append(w.tasks, id)
		w.given(&Authorize{AdminReq: w.admin(), TaskID: id, ExpectedRevision: 1, TTL: mcAuthTTL, Takeover: policy})
	}
	return w
}

func (w *mcWorld) token(d int) string { return HashToken(fmt.Sprintf("token-%d", d)) }

// answer summarizes a claim-next outcome: what a replay must repeat.
func (w *mcWorld) answer(dec *Decision, err error) string {
	if err != nil {
		return "error:" + err.Error()
	}
	res := dec.Answer(w.s)
	r := res.Record
	switch {
	case r == nil:
		return "no record"
	case r.Outcome == projections.OutcomeAccepted:
		return fmt.Sprintf("claimed %s generation %d", r.TaskID, r.Reply.Generation)
	default:
		return fmt.Sprintf("outcome %v task %s", r.Outcome, r.TaskID)
	}
}

// claimNext decides a claim-next and folds it, returning its answer.
func (w *mcWorld) claimNext(c *ClaimNext) (string, *projections.IdemRecord) {
	x := w.ctx()
	dec, err := c.Decide(x)
	if err == nil {
		w.fold(dec)
	}
	var soft *projections.IdemRecord
	if err == nil {
		if r := dec.Answer(w.s).Record; r != nil && r.Outcome == projections.OutcomeNoTask {
			soft = r
		}
	}
	return w.answer(dec, err), soft
}

// clone copies the world: the event-derived projections by folding its
// events again (the fold is deterministic: replay gives the same state),
// the soft state the world's decisions read (presence, running leases, the
// devices' last "no task" records) beside it.
func (w *mcWorld) clone() *mcWorld {
	s := projections.New(projections.Config{})
	for _, f := range w.log {
		if err := s.ApplyDecoded(f.ev, f.body); err != nil {
			w.t.Fatalf("refold %s: %v", f.ev.Type, err)
		}
	}
	for id, p := range w.s.Presence {
		s.Presence[id] = p
	}
	for _, l := range w.s.SoftLeases() {
		s.ApplySoftLease(&l)
	}
	c := &mcWorld{world: &world{t: w.t, s: s, head: w.head, now: w.now, cfg: w.cfg, ids: w.ids, keys: w.keys,
		log: w.log[:len(w.log):len(w.log)]},
		start: w.start, devs: w.devs, tasks: w.tasks, sess: w.sess, last: append([]mcDevice(nil), w.last...), ops: w.ops}
	for _, l := range c.last {
		if l.soft != nil {
			raw, err := projections.EncodeSoftIdem(l.soft)
			if err != nil {
				w.t.Fatal(err)
			}
			s.Idem.PutSoft(l.soft, raw)
		}
	}
	return c
}

// held returns the open task device d holds, or nil.
func (w *mcWorld) held(d int) *projections.Task {
	for _, id := range w.tasks {
		if t := w.s.Tasks[id]; t.Open() && t.Claim != nil && t.Claim.DeviceID == w.devs[d].DeviceID {
			return t
		}
	}
	return nil
}

// do takes one step; it reports whether the step could be taken at all.
func (w *mcWorld) do(a mcAct) error {
	if !a.deviceStep() {
		w.ops++
	}
	switch a.kind {
	case "clock":
		w.now += mcStep.Milliseconds()
		return nil
	case "claim":
		key := w.key()
		c := &ClaimNext{Device: w.devs[a.dev], Key: key, Fingerprint: []byte(key), SessionID: w.sess[a.dev], TokenHash: w.token(a.dev)}
		ans, soft := w.claimNext(c)
		w.last[a.dev] = mcDevice{key: key, answer: ans, soft: soft}
		return nil
	case "replay":
		l := w.last[a.dev]
		c := &ClaimNext{Device: w.devs[a.dev], Key: l.key, Fingerprint: []byte(l.key), SessionID: w.sess[a.dev], TokenHash: w.token(a.dev)}
		got, _ := w.claimNext(c)
		expired := strings.HasPrefix(l.answer, "claimed") && got == "error:"+ErrClaimReplayExpired.Error()
		revoked := w.s.Devices[w.devs[a.dev].DeviceID].Status != projections.DeviceStatusActive &&
			got == "error:"+ErrDeviceRevoked.Error()
		if got != l.answer && !expired && !revoked {
			return fmt.Errorf("claim-next replay answered %q, first %q", got, l.answer)
		}
		return nil
	}
	if c := w.command(a); c != nil {
		_, _ = w.decide(c)
	}
	return nil
}

// command is the command of an operator step or a device's task call, or
// nil (the clock, claim-next, a task call of a device that holds none).
func (w *mcWorld) command(a mcAct) Command {
	switch a.kind {
	case "clock", "claim", "replay":
		return nil
	case "revoke":
		return &RevokeDevice{AdminReq: w.admin(), DeviceID: w.devs[a.dev].DeviceID, Reason: "lost"}
	case "authorize":
		t := w.s.Tasks[w.tasks[a.task]]
		return &Authorize{AdminReq: w.admin(), TaskID: t.ID, ExpectedRevision: t.Revision, TTL: mcAuthTTL, Takeover: a.arg}
	case "cancel":
		return &Cancel{AdminReq: w.admin(), TaskID: w.tasks[a.task], Reason: "stop"}
	case "recover":
		return w.recoverCmd(a.task, a.arg)
	}
	t := w.held(a.dev)
	if t == nil {
		return nil
	}
	c := &TaskCall{Op: a.kind, Device: w.devs[a.dev], TaskID: t.ID, Key: w.key(), Fingerprint: []byte{1},
		TokenHash: w.token(a.dev), Generation: t.Claim.Generation, Version: t.Version, SessionID: w.sess[a.dev],
		ExpectedAt: t.Claim.LeaseExpiresAt, Result: `{"ok":true}`, ReasonCode: "broken"}
	if t.Exec != nil {
		c.ExecutionID = t.Exec.ID
	}
	return c
}

// refused reports whether step a is a command refused from w's state: it
// changes nothing, so it leads back to the same state (refusals change
// nothing: TestDecide checks it), and an operator step refused is not
// counted.
func (w *mcWorld) refused(a mcAct) bool {
	switch a.kind {
	case "clock", "claim", "replay":
		return false
	}
	c := w.command(a)
	if c == nil {
		return true
	}
	_, err := c.Decide(w.ctx())
	return err != nil
}

func (w *mcWorld) recoverCmd(task int, decision string) *Recover {
	t := w.s.Tasks[w.tasks[task]]
	return &Recover{AdminReq: w.admin(), TaskID: t.ID, Decision: decision, Reason: "x", ExpectedVersion: t.Version}
}

// ctx is the decision context at the world's time.
func (w *mcWorld) ctx() *Ctx {
	return &Ctx{State: w.s, Now: w.now, Cfg: &w.cfg, IDs: w.id, Nonce: func(b []byte) error { return nil }}
}

// fold stamps, seals and applies what a decision decided (world.decide
// without the Decide).
func (w *mcWorld) fold(d *Decision) {
	w.world.fold(d)
}

// acts lists every step of the world from its state.
func (w *mcWorld) acts() []mcAct {
	var as []mcAct
	for d := range w.devs {
		as = append(as, mcAct{kind: "claim", dev: d})
		if w.last[d].key != "" {
			as = append(as, mcAct{kind: "replay", dev: d})
		}
		if t := w.held(d); t != nil {
			ops := []string{OpStart, OpRenew, OpRelease}
			if t.Started() {
				ops = []string{OpHeartbeat, OpComplete, OpFail, OpCancelAck}
			}
			for _, op := range ops {
				as = append(as, mcAct{kind: op, dev: d})
			}
		}
		if w.ops < mcOps && w.s.Devices[w.devs[d].DeviceID].Status == projections.DeviceStatusActive {
			as = append(as, mcAct{kind: "revoke", dev: d})
		}
	}
	for i := range w.tasks {
		if w.ops >= mcOps || w.s.Tasks[w.tasks[i]].Terminal() {
			continue
		}
		// an authorization keeps the task's policy: the first task is
		// under "reclaim", the second under "manual"
		policy := []string{projections.TakeoverReclaim, projections.TakeoverManual}[i]
		as = append(as, mcAct{kind: "authorize", task: i, arg: policy},
			mcAct{kind: "cancel", task: i},
			mcAct{kind: "recover", task: i, arg: events.RecoverRequeue},
			mcAct{kind: "recover", task: i, arg: events.RecoverFail})
	}
	if w.now-w.start < mcHorizon.Milliseconds() {
		as = append(as, mcAct{kind: "clock"})
	}
	return as
}

// deviceStep reports whether a is a step devices or the clock take.
func (a mcAct) deviceStep() bool {
	switch a.kind {
	case "authorize", "cancel", "recover", "revoke":
		return false
	}
	return true
}

// modelKey encodes every field a decision of the world reads, with tasks
// and devices by their place in the world and times from its start.
func (w *mcWorld) modelKey() string {
	var b strings.Builder
	rel := func(ms int64) int64 { return ms - w.start }
	// an expiry that passed is only "expired": the clock never goes back,
	// and no step of the world reads how long ago it was
	exp := func(ms int64) string {
		if w.now >= ms {
			return "expired"
		}
		return fmt.Sprint(rel(ms))
	}
	fmt.Fprintf(&b, "now=%d,ops=%d;", rel(w.now), w.ops)
	devIdx := map[string]int{}
	for i, p := range w.devs {
		devIdx[p.DeviceID] = i
	}
	taskIdx := map[string]int{}
	for i, id := range w.tasks {
		taskIdx[id] = i
	}
	for i, p := range w.devs {
		d := w.s.Devices[p.DeviceID]
		open := -1
		if j, ok := taskIdx[d.OpenTask]; ok {
			open = j
		}
		// a recorded claim matters only as current (still this device's
		// open claim) or not: generations only grow
		ans := w.last[i].answer
		for j, id := range w.tasks {
			t := w.s.Tasks[id]
			if strings.HasPrefix(ans, "claimed "+id+" ") {
				cur := t.Open() && t.Claim != nil && t.Claim.DeviceID == p.DeviceID &&
					ans == fmt.Sprintf("claimed %s generation %d", id, t.Claim.Generation)
				ans = fmt.Sprintf("claimed task%d current=%v", j, cur)
			}
			ans = strings.ReplaceAll(ans, id, fmt.Sprint("task", j))
		}
		if d.Status != projections.DeviceStatusActive {
			// every step of a revoked device is refused, replays too
			fmt.Fprintf(&b, "d%d=%s;", i, d.Status)
			continue
		}
		fmt.Fprintf(&b, "d%d=%s,open=%d,last=%q;", i, d.Status, open, ans)
	}
	for i, id := range w.tasks {
		t := w.s.Tasks[id]
		// versions and generations are only compared with what the
		// world's steps send (always the current ones): not part of the key
		if t.Terminal() {
			fmt.Fprintf(&b, "t%d=%s;", i, t.State)
			continue
		}
		fmt.Fprintf(&b, "t%d=%s,r%d,c%v;", i, t.State, t.Revision, t.CancelRequested)
		if a := t.Auth; a != nil {
			at := "-" // a consumed or revoked authorization's expiry is read by nothing
			if a.Status == projections.AuthActive {
				at = exp(a.ExpiresAt)
			}
			fmt.Fprintf(&b, "auth=%s,%s,%s,%d;", a.Status, at, a.Takeover, a.Revision)
		}
		if c := t.Claim; c != nil {
			fmt.Fprintf(&b, "claim=%d", devIdx[c.DeviceID])
			if !t.Started() {
				fmt.Fprintf(&b, ",%s,%s", exp(c.LeaseExpiresAt), exp(c.AuthorizationExpiresAt))
			}
			b.WriteString(";")
		}
		if x := t.Exec; x != nil && t.Started() {
			fmt.Fprintf(&b, "exec=%s;", exp(x.Lease()))
		}
	}
	return b.String()
}

// check asserts the invariants of one state; progress is checked over
// the whole graph afterwards.
func (w *mcWorld) check() error {
	for i, p := range w.devs {
		n := 0
		for _, id := range w.tasks {
			if t := w.s.Tasks[id]; t.Open() && t.Claim != nil && t.Claim.DeviceID == p.DeviceID {
				n++
			}
		}
		if n > 1 {
			return fmt.Errorf("device %d appears to hold %d claims", i, n)
		}
		if o := w.s.Devices[p.DeviceID].OpenTask; o != "" {
			if t := w.s.Tasks[o]; t == nil || t.Claim == nil || t.Claim.DeviceID != p.DeviceID {
				return fmt.Errorf("device %d's open task %s is not held by it", i, o)
			}
		}
	}
	for i, id := range w.tasks {
		t := w.s.Tasks[id]
		reason := w.s.OperatorReason(t, w.now)
		if (reason != "") != w.s.NeedsOperator(t, w.now) {
			return fmt.Errorf("task %d: needs_operator without a reason", i)
		}
		if reason == "" {
			continue
		}
		for _, decision := range []string{events.RecoverRequeue, events.RecoverFail} {
			dec, err := w.recoverCmd(i, decision).Decide(w.ctx())
			if err != nil || len(dec.Events) != 1 || dec.Events[0].Type != events.EvTaskRecovered {
				return fmt.Errorf("task %d needs an operator (%s) but recover %s is refused: %v", i, reason, decision, err)
			}
		}
	}
	return nil
}

// openVersions returns, per task, its version if it is open (CLAIMED,
// RUNNING, WAITING_CONFIRMATION) and does not need an operator, else -1.
func (w *mcWorld) openVersions() []int64 {
	vs := make([]int64, len(w.tasks))
	for i, id := range w.tasks {
		t := w.s.Tasks[id]
		vs[i] = -1
		if t.Open() && !w.s.NeedsOperator(t, w.now) {
			vs[i] = int64(t.Version)
		}
	}
	return vs
}

// mcState is an explored state: its node, the versions of its tasks that
// still wait for a device, its time, and its device/clock successors.
type mcState struct {
	node  *mcNode
	world *mcWorld // dropped once expanded
	open  []int64
	now   int64
	next  []mcEdge
}

// mcEdge is a device or clock step to state to; moved[i]: task i's
// version changed on the way.
type mcEdge struct {
	to    int
	moved [2]bool
}

// TestModelNoDeadEnds explores the world and checks every reachable state.
func TestModelNoDeadEnds(t *testing.T) {
	root := &mcNode{}
	seen := map[string]int{}
	var states []*mcState
	rebuild := func(n *mcNode) *mcWorld {
		w := newMCWorld(t)
		for _, a := range n.path() {
			if err := w.do(a); err != nil {
				t.Fatalf("rebuilding %v: %v", n.path(), err)
			}
		}
		return w
	}
	add := func(w *mcWorld, n *mcNode) int {
		k := w.modelKey()
		if i, ok := seen[k]; ok {
			return i
		}
		if err := w.check(); err != nil {
			t.Fatalf("after %v: %v\nstate %s", n.path(), err, k)
		}
		seen[k] = len(states)
		states = append(states, &mcState{node: n, world: w, open: w.openVersions(), now: w.now - w.start})
		return len(states) - 1
	}
	add(newMCWorld(t), root)
	for i := 0; i < len(states); i++ {
		s := states[i]
		base := s.world
		s.world = nil
		for _, a := range base.acts() {
			if base.refused(a) {
				continue
			}
			w := base.clone()
			if err := w.do(a); err != nil {
				t.Fatalf("after %v then %v: %v", s.node.path(), a, err)
			}
			n := &mcNode{parent: s.node, act: a, depth: s.node.depth + 1}
			var e mcEdge
			for k, id := range w.tasks {
				e.moved[k] = w.s.Tasks[id].Version != base.s.Tasks[id].Version
			}
			e.to = add(w, n)
			if a.deviceStep() && (e.to != i || e.moved != [2]bool{}) {
				s.next = append(s.next, e)
			}
		}
	}

	// Progress: from every state in which a task is open and needs no
	// operator, device and clock steps alone reach a state where it moved
	// (another version) or needs an operator. States within one claim or
	// running lease of the horizon are not judged: the clock stops there.
	judged := mcHorizon - time.Minute
	for task := range 2 {
		// moved[i]: from state i the task moves or gets flagged
		moved := make([]bool, len(states))
		for i, s := range states {
			moved[i] = s.open[task] < 0
		}
		for changed := true; changed; {
			changed = false
			for i, s := range states {
				if moved[i] {
					continue
				}
				for _, e := range s.next {
					if moved[e.to] || e.moved[task] {
						moved[i], changed = true, true
						break
					}
				}
			}
		}
		for i, s := range states {
			if !moved[i] && s.now <= judged.Milliseconds() {
				w := rebuild(s.node)
				t.Fatalf("dead end: task %d can neither move nor is shown as needing an operator after %v\nstate %s",
					task, s.node.path(), w.modelKey())
			}
		}
	}
	t.Logf("model check: %d states explored, no dead end", len(states))
	if len(states) < 100 {
		t.Fatalf("only %d states: the world is not explored", len(states))
	}
}
