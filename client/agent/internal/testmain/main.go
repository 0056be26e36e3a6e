// Command testmain runs agent.Main as a standalone binary, for the agent's
// crash tests (`testmain run …` is `taskledger agent run …`).
package main

import (
	"os"

	"taskledger/client/agent"
)

func main() { os.Exit(agent.Main(os.Args[1:], os.Stdout, os.Stderr)) }
