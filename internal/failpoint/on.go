//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"sync"
)

// Enabled is true: this build has failpoints.
const Enabled = true

var (
	mu      sync.RWMutex
	envOnce sync.Once
	active  = map[string]action{}
)

// loadEnv applies Env once; a bad list ends the process with status 2.
func loadEnv() {
	envOnce.Do(func() {
		spec, err := Parse(os.Getenv(Env))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", Env, err)
			os.Exit(2)
		}
		mu.Lock()
		defer mu.Unlock()
		for name, act := range spec {
			a, _ := resolve(name, act)
			active[name] = a
		}
	})
}

// Eval runs the point name: nil when it is off, its error for an error
// action; a kill action ends the process and never returns.
func Eval(name string) error {
	loadEnv()
	mu.RLock()
	a, ok := active[name]
	mu.RUnlock()
	if !ok {
		return nil
	}
	if a.kill {
		kill(name)
	}
	return a.err
}

// Enable turns point name on with act (in-process tests) until disable is
// called; disable restores the point's previous setting.
func Enable(name, act string) (disable func(), err error) {
	loadEnv()
	a, err := resolve(name, act)
	if err != nil {
		return func() {}, err
	}
	mu.Lock()
	defer mu.Unlock()
	prev, had := active[name]
	active[name] = a
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if had {
			active[name] = prev
		} else {
			delete(active, name)
		}
	}, nil
}

// kill ends the process at once, as SIGKILL does: no deferred function
// runs, no buffer is flushed, nothing more is answered.
func kill(name string) {
	_, _ = os.Stderr.WriteString("failpoint " + name + " reached: kill\n")
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	os.Exit(137) // not reached where Kill works
}
