package agent

import (
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"taskledger/node/nodetest/proc"
)

var bins proc.Binaries

// helperArg makes the test binary act as the agent's work command.
const helperArg = "taskledger-test-helper"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == helperArg {
		os.Exit(helperMain())
	}
	os.Exit(proc.RunTests(m, "tl-agent-test", &bins))
}

// helperMain is the work command: it reads the task payload on stdin and
// acts on "mode": ok (print a result), exit (exit with "code"), block
// (wait for SIGTERM), bad (print something that is not JSON). Every run
// appends a line to the file named by "runs".
func helperMain() int {
	var p struct {
		Mode string `json:"mode"`
		N    int    `json:"n"`
		Code int    `json:"code"`
		Runs string `json:"runs"`
		// Evidence is where mode "png" writes a screenshot.
		Evidence string `json:"evidence"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&p); err != nil {
		fmt.Fprintln(os.Stderr, "helper: bad payload:", err)
		return 90
	}
	if p.Runs != "" {
		f, err := os.OpenFile(p.Runs, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%s %d\n", p.Mode, p.N)
			f.Close()
		}
	}
	fmt.Fprintf(os.Stderr, "helper running mode=%s n=%d\n", p.Mode, p.N)
	switch p.Mode {
	case "ok":
		fmt.Printf("{\"ok\": %d}\n", p.N)
		return 0
	case "exit":
		return p.Code
	case "block":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		<-ch
		return 0
	case "bad":
		fmt.Println("not json")
		return 0
	case "png": // leave a screenshot, succeed
		f, err := os.Create(p.Evidence)
		if err != nil {
			return 92
		}
		img := image.NewGray(image.Rect(0, 0, 2, 2))
		if err := png.Encode(f, img); err != nil || f.Close() != nil {
			return 93
		}
		fmt.Printf("{\"ok\": %d}\n", p.N)
		return 0
	case "noisy": // 5000 bytes of stderr ending in a marker, then fail
		fmt.Fprint(os.Stderr, strings.Repeat("early noise ", 400), "\nLAST-MARKER-", p.N, "\n")
		return 3
	}
	return 91
}
