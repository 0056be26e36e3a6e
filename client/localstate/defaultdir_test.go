package localstate

import (
	"errors"
	"testing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func noDir() (string, error) { return "", errors.New("none") }

// On Windows the state lives under %LOCALAPPDATA% (machine-local), never
// the roaming %AppData%; without an absolute %LOCALAPPDATA% there is no
// default and the agent says so.
func TestDefaultDirWindowsUsesLocalAppData(t *testing.T) {
	env := envOf(map[string]string{"LOCALAPPDATA": `C:\Users\ann\AppData\Local`, "APPDATA": `C:\Users\ann\AppData\Roaming`})
	got, err := defaultDir("windows", env, noDir, func() (string, error) { return `C:\Users\ann\AppData\Roaming`, nil })
	if err != nil || got != `C:\Users\ann\AppData\Local\taskledger` {
		t.Fatalf("got %q %v", got, err)
	}
	if got, _ := defaultDir("windows", envOf(map[string]string{"LOCALAPPDATA": `D:\local\`}), noDir, noDir); got != `D:\local\taskledger` {
		t.Fatalf("trailing separator: %q", got)
	}
	if got, _ := defaultDir("windows", envOf(map[string]string{"LOCALAPPDATA": `\\srv\profiles\ann`}), noDir, noDir); got != `\\srv\profiles\ann\taskledger` {
		t.Fatalf("UNC profile: %q", got)
	}
	for _, bad := range []string{"", "relative", `C:`, `C:relative`} {
		if got, err := defaultDir("windows", envOf(map[string]string{"LOCALAPPDATA": bad}), noDir, noDir); err == nil {
			t.Errorf("LOCALAPPDATA=%q gave %q", bad, got)
		}
	}
}

// Unix: $XDG_STATE_HOME when absolute, else ~/.local/state; macOS: the
// user configuration directory.
func TestDefaultDirUnixAndDarwin(t *testing.T) {
	home := func() (string, error) { return "/home/ann", nil }
	if got, _ := defaultDir("linux", envOf(map[string]string{"XDG_STATE_HOME": "/xdg"}), home, noDir); got != "/xdg/taskledger" {
		t.Fatalf("XDG: %q", got)
	}
	if got, _ := defaultDir("linux", envOf(map[string]string{"XDG_STATE_HOME": "rel"}), home, noDir); got != "/home/ann/.local/state/taskledger" {
		t.Fatalf("home: %q", got)
	}
	if _, err := defaultDir("linux", envOf(nil), noDir, noDir); err == nil {
		t.Fatal("no home directory gave a default")
	}
	cfg := func() (string, error) { return "/Users/ann/Library/Application Support", nil }
	if got, _ := defaultDir("darwin", envOf(nil), home, cfg); got != "/Users/ann/Library/Application Support/taskledger" {
		t.Fatalf("darwin: %q", got)
	}
}
