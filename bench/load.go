package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Config shapes a load run.
type Config struct {
	// Devices is the number of concurrent simulated devices.
	Devices int
	// Duration ends the run: no device begins a loop after it.
	Duration time.Duration
	// Commands, when > 0, also ends the run once about this many commands
	// were issued (Go benchmarks and tests use it instead of Duration).
	Commands int
	// Loop chooses the loops the devices run (default LoopMix).
	Loop Loop
	// ReleaseEvery makes every ReleaseEvery-th loop of a device a
	// claim → release loop under LoopMix; the others start, heartbeat and
	// are canceled. Default 2 (alternate); 1 releases always.
	ReleaseEvery int
	// Heartbeats before the operator cancels (default 2); one more
	// heartbeat then sees cancel_requested.
	Heartbeats int
	// Tasks is the claimable pool kept (default 2 × Devices): each task
	// canceled is replaced by a new one.
	Tasks int
	// PresenceEvery re-sends presence (default 15s, under the shortest
	// presence TTL the server accepts).
	PresenceEvery time.Duration
	// ManualClock serves in-process nodes with the manual test clock
	// (tests: no lease or presence can expire during the run).
	ManualClock bool
	// StepEachHeartbeat makes every heartbeat report a new step, so each
	// appends an event, as every running heartbeat did before heartbeats
	// that leave the step unchanged became quiet (the before/after figure
	// of the same run). Default: one step per execution, so the first
	// heartbeat appends a task.heartbeat and the others append nothing.
	StepEachHeartbeat bool
	// SetupWorkers bounds the concurrency of registration and creation
	// (default 64).
	SetupWorkers int
}

func (c *Config) defaults() {
	if c.Devices <= 0 {
		c.Devices = 1
	}
	if c.ReleaseEvery <= 0 {
		c.ReleaseEvery = 2
	}
	if c.Heartbeats <= 0 {
		c.Heartbeats = 2
	}
	if c.Tasks <= 0 {
		c.Tasks = 2 * c.Devices
	}
	if c.PresenceEvery <= 0 {
		c.PresenceEvery = 15 * time.Second
	}
	if c.SetupWorkers <= 0 {
		c.SetupWorkers = 64
	}
}

// Loop is the loop a run's devices go through.
type Loop int

// The loops.
const (
	// LoopMix alternates the two loops (every ReleaseEvery-th a release):
	// the benchmark's command mix.
	LoopMix Loop = iota
	// LoopRelease is claim → release only (two commands a loop).
	LoopRelease
	// LoopFull is the full loop only: claim, start, heartbeats, the
	// operator's cancel, the last heartbeat, cancel-ack and the
	// replacement task.
	LoopFull
)

var loopNames = [...]string{LoopMix: "mix", LoopRelease: "release", LoopFull: "full"}

func (l Loop) String() string { return loopNames[l] }

// ParseLoop reads a loop's name (mix, release or full).
func ParseLoop(s string) (Loop, error) {
	for l, name := range loopNames {
		if s == name {
			return Loop(l), nil
		}
	}
	return 0, fmt.Errorf("unknown loop %q: want mix, release or full", s)
}

// releases reports whether a device's n-th loop is a claim → release loop.
func (c *Config) releases(n int) bool {
	switch c.Loop {
	case LoopRelease:
		return true
	case LoopFull:
		return false
	}
	return n%c.ReleaseEvery == 0
}

// Setup registers the devices, creates the task pool and sends each
// device's first presence. It is not measured.
func Setup(ctx context.Context, drv Driver, cfg Config) ([]*Device, error) {
	cfg.defaults()
	devs := make([]*Device, cfg.Devices)
	err := parallel(cfg.SetupWorkers, cfg.Devices, func(i int) error {
		d, err := drv.RegisterDevice(ctx)
		if err != nil {
			return fmt.Errorf("register device: %w", err)
		}
		devs[i] = d
		if err := drv.Presence(ctx, d); err != nil {
			return fmt.Errorf("presence: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = parallel(cfg.SetupWorkers, cfg.Tasks, func(int) error {
		_, err := drv.CreateTask(ctx)
		if err != nil {
			return fmt.Errorf("create task: %w", err)
		}
		return nil
	})
	return devs, err
}

// parallel runs fn(0..n-1) on at most workers goroutines; the first error
// wins.
func parallel(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// Run drives the devices (from Setup) until cfg.Duration or cfg.Commands,
// each finishing the loop it is in, and reports the durable commands.
func Run(ctx context.Context, drv Driver, devs []*Device, cfg Config, name string) *Result {
	cfg.defaults()
	var issued atomic.Int64
	cpu0, start := processCPU(), time.Now()
	stop := func() bool {
		return ctx.Err() != nil || (cfg.Duration > 0 && time.Since(start) >= cfg.Duration) ||
			(cfg.Commands > 0 && issued.Load() >= int64(cfg.Commands))
	}
	recs := make([]*recorder, len(devs))
	var wg sync.WaitGroup
	for i, d := range devs {
		recs[i] = &recorder{}
		wg.Add(1)
		go func(d *Device, rec *recorder, offset int) {
			defer wg.Done()
			dv := &device{drv: drv, d: d, rec: rec, cfg: &cfg, issued: &issued, presenceAt: start}
			for n := offset; !stop(); n++ {
				if err := dv.loop(ctx, cfg.releases(n)); err != nil {
					rec.fail(err)
					return // a device that saw an error leaves the run
				}
			}
		}(d, recs[i], i)
	}
	wg.Wait()
	res := merge(name, len(devs), time.Since(start), recs)
	res.CPU = processCPU() - cpu0
	return res
}

// device is one simulated device's loop state.
type device struct {
	drv        Driver
	d          *Device
	rec        *recorder
	cfg        *Config
	issued     *atomic.Int64
	presenceAt time.Time
}

// timed runs one command and records its latency when it succeeded.
func (v *device) timed(op Op, fn func() error) error {
	v.issued.Add(1)
	t0 := time.Now()
	err := fn()
	if err == nil {
		v.rec.add(op, time.Since(t0))
	}
	return err
}

// loop is one claim and what follows it.
func (v *device) loop(ctx context.Context, release bool) error {
	drv, d := v.drv, v.d
	if time.Since(v.presenceAt) >= v.cfg.PresenceEvery {
		if err := v.timed(OpPresence, func() error { return drv.Presence(ctx, d) }); err != nil {
			return fmt.Errorf("presence: %w", err)
		}
		v.presenceAt = time.Now()
	}
	v.issued.Add(1)
	t0 := time.Now()
	c, err := drv.Claim(ctx, d)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if c == nil {
		// A 204 is durable too (it is recorded); it is counted on its own.
		v.rec.add(OpClaimEmpty, time.Since(t0))
		return nil
	}
	v.rec.add(OpClaim, time.Since(t0))
	if release {
		if err := v.timed(OpRelease, func() error { return drv.Release(ctx, d, c) }); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		return nil
	}
	if err := v.timed(OpStart, func() error { return drv.Start(ctx, d, c) }); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	beat := 0
	step := func() {
		beat++
		c.Step = "working"
		if v.cfg.StepEachHeartbeat {
			c.Step = fmt.Sprintf("step-%d", beat)
		}
	}
	for range v.cfg.Heartbeats {
		step()
		if err := v.timed(OpHeartbeat, func() error {
			cr, err := drv.Heartbeat(ctx, d, c)
			if err == nil && cr {
				return fmt.Errorf("%w: cancel_requested before the cancel", ErrUnexpected)
			}
			return err
		}); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
	}
	if err := v.timed(OpCancel, func() error { return drv.Cancel(ctx, c.TaskID) }); err != nil {
		return fmt.Errorf("cancel: %w", err)
	}
	step()
	if err := v.timed(OpHeartbeat, func() error {
		cr, err := drv.Heartbeat(ctx, d, c)
		if err == nil && !cr {
			return fmt.Errorf("%w: heartbeat after the cancel without cancel_requested", ErrUnexpected)
		}
		return err
	}); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	if err := v.timed(OpCancelAck, func() error { return drv.CancelAck(ctx, d, c) }); err != nil {
		return fmt.Errorf("cancel-ack: %w", err)
	}
	// The operator replaces the canceled task: the pool stays constant.
	if err := v.timed(OpCreate, func() error { _, err := drv.CreateTask(ctx); return err }); err != nil {
		return fmt.Errorf("create task: %w", err)
	}
	return nil
}
