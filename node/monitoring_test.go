package node_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

// monitoringFiles are the dashboard and the alert rules operators import.
var monitoringFiles = []string{"taskledger-dashboard.json", "taskledger-alerts.yml", "taskledger-alerts.test.yml"}

var metricName = regexp.MustCompile(`taskledger_[a-z0-9_]+`)

// exported lists the sample names of a scrape (histograms as their
// _bucket, _sum and _count series).
func exported(text string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// Every series the dashboard and the alert rules (and their unit tests)
// name is exported by a live server, so an import never shows an empty
// panel or an alert that cannot fire.
func TestMonitoringNamesOnlyExportedSeries(t *testing.T) {
	n := nodetest.Start(t)
	n.CreateTask(nil) // a command and a request: the labelled series exist
	have := exported(scrape(t, n))
	checked := 0
	for _, f := range monitoringFiles {
		raw, err := os.ReadFile(filepath.Join("..", "docs", "monitoring", f))
		if err != nil {
			t.Fatal(err)
		}
		names := metricName.FindAllString(string(raw), -1)
		slices.Sort(names)
		names = slices.Compact(names)
		if len(names) == 0 {
			t.Errorf("%s names no taskledger series", f)
		}
		for _, name := range names {
			checked++
			if !have[name] {
				t.Errorf("%s names %s, which the server does not export", f, name)
			}
		}
	}
	// Every alert the issue asks for is there, and tested.
	rules, _ := os.ReadFile(filepath.Join("..", "docs", "monitoring", "taskledger-alerts.yml"))
	tests, _ := os.ReadFile(filepath.Join("..", "docs", "monitoring", "taskledger-alerts.test.yml"))
	for _, alert := range []string{"TaskledgerNoSequencer", "TaskledgerCommitsFailing", "TaskledgerNotReady", "TaskledgerDiskFilling",
		"TaskledgerSnapshotTooOld", "TaskledgerLeaseExpiriesSpiking", "TaskledgerTasksNeedOperator"} {
		if !strings.Contains(string(rules), "alert: "+alert+"\n") {
			t.Errorf("no alert %s in the rules", alert)
		}
		if !strings.Contains(string(tests), "alertname: "+alert+"\n") {
			t.Errorf("no unit test of %s", alert)
		}
	}
	if checked < 15 {
		t.Fatalf("only %d series names checked", checked)
	}
}
