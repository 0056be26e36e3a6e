package main

// The command tree against its documentation: every flag of every command
// (name, default, environment variable) is in the command-line reference
// of docs/operations.md (the agent's in docs/client.md) and every flag the
// reference names exists; every command has its help text, and its --help
// lists each of its flags.

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"taskledger/internal/cli"
)

var updateCLIDocs = flag.Bool("update-cli-docs", false, "rewrite the command-line reference tables in docs/ from the command tree")

const (
	refBegin = "<!-- cli-reference:begin (go test ./cmd/taskledger -run TestCLIReferenceMatchesDocs -update-cli-docs rewrites it) -->"
	refEnd   = "<!-- cli-reference:end -->"
)

// cliTree is the command tree as the binary builds it, with no
// TASKLEDGER_* variable set (their values would become the defaults).
func cliTree(t *testing.T) *cobra.Command {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "TASKLEDGER_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	var out, errb bytes.Buffer
	root := newRoot(&out, &errb)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return root
}

// generated reports the commands cobra adds itself (help, completion),
// which the reference leaves out.
func generated(c *cobra.Command) bool {
	for p := c; p != nil; p = p.Parent() {
		if p.Name() == "help" || p.Name() == "completion" {
			return true
		}
	}
	return false
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, s := range c.Commands() {
		walk(s, fn)
	}
}

// ownFlags are the flags a command defines itself (its persistent ones
// included, its parents' not), without help.
func ownFlags(c *cobra.Command) []*pflag.Flag {
	var fs []*pflag.Flag
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && f.Name != "version" {
			fs = append(fs, f)
		}
	})
	return fs
}

// allFlags are the flags a command accepts: its own and its parents'
// persistent ones.
func allFlags(c *cobra.Command) []*pflag.Flag {
	seen := map[string]bool{}
	var fs []*pflag.Flag
	add := func(f *pflag.Flag) {
		if !seen[f.Name] && f.Name != "help" {
			seen[f.Name] = true
			fs = append(fs, f)
		}
	}
	c.LocalFlags().VisitAll(add)
	c.InheritedFlags().VisitAll(add)
	return fs
}

func docFile(c *cobra.Command) string {
	if strings.HasPrefix(c.CommandPath(), "taskledger agent") {
		return "../../docs/client.md"
	}
	return "../../docs/operations.md"
}

func envOf(f *pflag.Flag) string {
	if e := f.Annotations[cli.EnvAnnotation]; len(e) == 1 {
		return e[0]
	}
	return ""
}

// docRow is one flag as the reference states it.
type docRow struct{ def, env string }

var (
	refHeadingRE = regexp.MustCompile("^#+ `(taskledger[a-z -]*)`")
	refRowRE     = regexp.MustCompile("^\\| `--([a-z0-9-]+)` \\| ([^|]*) \\| ([^|]*) \\|")
)

func cell(s string) string {
	s = strings.TrimSpace(s)
	if s == "none" || s == "—" {
		return ""
	}
	return strings.Trim(s, "`")
}

// parseReference reads the reference region of a doc: command path →
// flag name → row.
func parseReference(t *testing.T, text string) map[string]map[string]docRow {
	t.Helper()
	a, b := strings.Index(text, refBegin), strings.Index(text, refEnd)
	if a < 0 || b < a {
		t.Fatalf("no command-line reference (%q … %q)", refBegin, refEnd)
	}
	ref := map[string]map[string]docRow{}
	var cur string
	for _, line := range strings.Split(text[a:b], "\n") {
		if m := refHeadingRE.FindStringSubmatch(line); m != nil {
			cur = m[1]
			ref[cur] = map[string]docRow{}
			continue
		}
		if m := refRowRE.FindStringSubmatch(line); m != nil && cur != "" {
			ref[cur][m[1]] = docRow{def: cell(m[2]), env: cell(m[3])}
		}
	}
	return ref
}

func mdCell(s string) string {
	if s == "" {
		return "none"
	}
	return "`" + s + "`"
}

func envCell(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + s + "`"
}

// renderReference writes the reference tables of the commands of one doc.
func renderReference(cmds []*cobra.Command, level string) string {
	var b strings.Builder
	b.WriteString(refBegin + "\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "\n%s `%s`\n\n%s.\n", level, c.CommandPath(), strings.TrimSuffix(c.Short, "."))
		fs := ownFlags(c)
		if len(fs) == 0 {
			continue
		}
		b.WriteString("\n| flag | default | env | what |\n| --- | --- | --- | --- |\n")
		for _, f := range fs {
			env := envOf(f)
			usage := strings.TrimSuffix(f.Usage, " (env "+env+")")
			fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, mdCell(f.DefValue), envCell(env), strings.ReplaceAll(usage, "|", "\\|"))
		}
	}
	b.WriteString("\n" + refEnd)
	return b.String()
}

func TestCLIReferenceMatchesDocs(t *testing.T) {
	root := cliTree(t)
	byDoc := map[string][]*cobra.Command{}
	walk(root, func(c *cobra.Command) {
		if c != root && !generated(c) {
			byDoc[docFile(c)] = append(byDoc[docFile(c)], c)
		}
	})
	docs := make([]string, 0, len(byDoc))
	for d := range byDoc {
		docs = append(docs, d)
	}
	sort.Strings(docs)
	for _, doc := range docs {
		cmds := byDoc[doc]
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		if *updateCLIDocs {
			a, b := strings.Index(text, refBegin), strings.Index(text, refEnd)
			if a < 0 || b < a {
				t.Fatalf("%s: no reference markers", doc)
			}
			level := "###"
			if strings.HasSuffix(doc, "client.md") {
				level = "####"
			}
			text = text[:a] + renderReference(cmds, level) + text[b+len(refEnd):]
			if err := os.WriteFile(doc, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ref := parseReference(t, text)
		seen := map[string]bool{}
		for _, c := range cmds {
			path := c.CommandPath()
			seen[path] = true
			rows, ok := ref[path]
			if !ok {
				t.Errorf("%s: the command %q is not in the reference", doc, path)
				continue
			}
			real := map[string]bool{}
			for _, f := range ownFlags(c) {
				real[f.Name] = true
				row, ok := rows[f.Name]
				switch {
				case !ok:
					t.Errorf("%s: `%s --%s` is not documented", doc, path, f.Name)
				case row.def != f.DefValue:
					t.Errorf("%s: `%s --%s` documented default %q, the command's is %q", doc, path, f.Name, row.def, f.DefValue)
				case row.env != envOf(f):
					t.Errorf("%s: `%s --%s` documented env %q, the command's is %q", doc, path, f.Name, row.env, envOf(f))
				}
			}
			for name := range rows {
				if !real[name] {
					t.Errorf("%s: `%s --%s` is documented but the command has no such flag", doc, path, name)
				}
			}
		}
		for path := range ref {
			if !seen[path] {
				t.Errorf("%s: the reference names %q, which is no command", doc, path)
			}
		}
	}
}

// Every command says what it does, and its --help (and `taskledger help
// PATH`) lists every flag it accepts, each environment variable it honours
// and each non-empty default.
func TestEveryCommandHelpListsItsFlags(t *testing.T) {
	root := cliTree(t)
	n := 0
	walk(root, func(c *cobra.Command) {
		if generated(c) {
			return
		}
		n++
		path := strings.Fields(c.CommandPath())[1:]
		if c.Short == "" || c.Long == "" {
			t.Errorf("%q: Short %q, Long %q", c.CommandPath(), c.Short, c.Long)
		}
		for _, args := range [][]string{append(append([]string{}, path...), "--help"), append([]string{"help"}, path...)} {
			r := reviewCLI(args...)
			if r.code != 0 {
				t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
				continue
			}
			for _, f := range allFlags(c) {
				if !strings.Contains(r.stdout, "--"+f.Name+" ") {
					t.Errorf("%v does not list --%s:\n%s", args, f.Name, r.stdout)
				}
				if e := envOf(f); e != "" && !strings.Contains(r.stdout, "(env "+e+")") {
					t.Errorf("%v does not name --%s's variable %s", args, f.Name, e)
				}
				if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" &&
					!strings.Contains(r.stdout, f.DefValue) {
					t.Errorf("%v does not show --%s's default %q", args, f.Name, f.DefValue)
				}
			}
		}
	})
	if n < 40 {
		t.Fatalf("walked %d commands: the tree is smaller than it should be", n)
	}
}
