package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/node"
)

// OpenNode opens a fresh node in dir with the wall clock, the default
// configuration and fsync on: what `taskledger serve` runs.
func OpenNode(dir string) (*node.Node, error) { return openNode(dir, false) }

func openNode(dir string, manual bool) (*node.Node, error) { return openNodeProbed(dir, manual, nil) }

func openNodeProbed(dir string, manual bool, p *pauseProbe) (*node.Node, error) {
	cfg := node.Config{DataDir: dir, Manual: manual, Commands: commands.DefaultConfig(), SnapshotEvery: 100000,
		Logger: zerolog.Nop()}
	if p != nil {
		cfg.WrapLog, cfg.SnapshotTimed, cfg.Phases = p.wrap, p.snapshot, p.phase
	}
	return node.Open(cfg)
}

// InProcessScenario opens a fresh node in dir, registers cfg.Devices
// devices and the task pool, drives them through the sequencer directly
// and closes the node (dir keeps the ledger for verification).
func InProcessScenario(ctx context.Context, dir string, cfg Config) (*Result, error) {
	probe := &pauseProbe{}
	n, err := openNodeProbed(dir, cfg.ManualClock, probe)
	if err != nil {
		return nil, err
	}
	drv := &InProcess{Engine: n.Engine, Operator: "initial"}
	devs, err := Setup(ctx, drv, cfg)
	if err != nil {
		n.Close()
		return nil, err
	}
	before := drv.Head()
	probe.start()
	res := Run(ctx, drv, devs, cfg, fmt.Sprintf("in-process, %d devices", len(devs)))
	res.Pauses = probe.stop()
	res.Events = drv.Head() - before
	if err := n.Close(); err != nil {
		return nil, err
	}
	return res, nil
}

// HTTPScenario registers cfg.Devices devices and the task pool on the
// server at base and drives them over HTTP through cfg.Loop.
func HTTPScenario(ctx context.Context, base, adminToken string, cfg Config) (*Result, error) {
	cfg.defaults()
	drv := NewHTTP(base, adminToken, cfg.Devices)
	defer drv.Close()
	devs, err := Setup(ctx, drv, cfg)
	if err != nil {
		return nil, err
	}
	return Run(ctx, drv, devs, cfg, fmt.Sprintf("http, %d devices", len(devs))+cfg.Loop.label()), nil
}

// label names a loop in a result line ("" for the mix, whose lines keep
// their name so that runs before and after compare).
func (l Loop) label() string {
	switch l {
	case LoopRelease:
		return ", claim → release loop"
	case LoopFull:
		return ", full loop"
	}
	return ""
}

// LocalServer is a node served over loopback HTTP in this process.
type LocalServer struct {
	URL        string
	AdminToken string
	node       *node.Node
	srv        *http.Server
	done       chan error
}

// ServeLocal opens a fresh node in dir and serves its API on an
// ephemeral loopback port (real HTTP, the same handler as serve).
func ServeLocal(dir string, manual bool) (*LocalServer, error) {
	n, err := openNode(dir, manual)
	if err != nil {
		return nil, err
	}
	tok, err := os.ReadFile(filepath.Join(dir, node.InitialTokenFile))
	if err != nil {
		n.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.Close()
		return nil, err
	}
	ls := &LocalServer{URL: "http://" + ln.Addr().String(), AdminToken: strings.TrimSpace(string(tok)), node: n,
		srv: &http.Server{Handler: n.API.Handler(), ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	go func() { ls.done <- ls.srv.Serve(ln) }()
	return ls, nil
}

// Close stops the server and the node.
func (l *LocalServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l.node.API.Stopping()
	err := l.srv.Shutdown(ctx)
	if serr := <-l.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return errors.Join(err, l.node.Close())
}
