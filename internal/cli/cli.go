// Package cli is the plumbing every taskledger command tree shares (the
// binary's and the device agent's): exit codes carried through cobra, the
// normalisation of single-dash long flags the standard flag package
// accepted, and one Execute that maps errors to exit codes.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ExitError carries a command's exit code through cobra; the command has
// said why on stderr already.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// UsageError is a mistake in the command line itself: exit 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, a ...any) error { return UsageError{fmt.Errorf(format, a...)} }

// Code adapts a command body that returns an exit code to cobra's RunE.
func Code(fn func(args []string) int) func(*cobra.Command, []string) error {
	return func(_ *cobra.Command, args []string) error {
		if code := fn(args); code != 0 {
			return ExitError{code}
		}
		return nil
	}
}

// Prepare readies a tree for Execute: flag errors become usage errors
// that name the command's help; a command below root that only groups
// subcommands refuses a missing or unknown subcommand (exit 2) instead of
// printing its help with exit 0 (cobra checks root's itself), and answers
// `GROUP help COMMAND` as `taskledger help GROUP COMMAND`.
func Prepare(root *cobra.Command) {
	root.SilenceUsage, root.SilenceErrors = true, true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return Usagef("%v (see `%s --help`)", err, c.CommandPath())
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root && c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(c *cobra.Command, args []string) error {
				names := []string{}
				for _, s := range c.Commands() {
					if s.IsAvailableCommand() {
						names = append(names, s.Name())
					}
				}
				if len(args) == 0 {
					// The path below root: Execute's prefix names the program.
					name := strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
					return Usagef("%s needs a command: %s (see `%s --help`)", name, strings.Join(names, ", "), c.CommandPath())
				}
				return Usagef("unknown command %q for %q: use one of %s (see `%s --help`)", args[0], c.CommandPath(),
					strings.Join(names, ", "), c.CommandPath())
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
		if c.HasSubCommands() && c != root {
			c.AddCommand(helpCmd(c))
		}
	}
	walk(root)
}

// helpCmd is `GROUP help [COMMAND]` (as `taskledger help GROUP COMMAND`):
// the help of a subcommand of group, or of group itself.
func helpCmd(group *cobra.Command) *cobra.Command {
	return &cobra.Command{Use: "help [command]", Short: "help about any command of " + group.CommandPath(), Hidden: true,
		Long: "Show the help of a command of " + group.CommandPath() + ", as `COMMAND --help` does.",
		RunE: func(_ *cobra.Command, args []string) error {
			target, rest, err := group.Find(args)
			if err != nil || len(rest) != 0 || target == nil {
				return Usagef("unknown command %q for %q (see `%s --help`)", strings.Join(args, " "), group.CommandPath(), group.CommandPath())
			}
			return target.Help()
		}}
}

// Execute runs root with args and returns the exit code: 0 on success,
// an ExitError's code, 2 for a mistake in the command line (unknown
// command or flag, a bad flag value, wrong arguments), else 1. Errors
// other than ExitError are printed on stderr after prefix.
func Execute(root *cobra.Command, args []string, stderr io.Writer, prefix string) int {
	root.SetArgs(Normalize(root, args))
	err := root.Execute()
	var ee ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
	if IsUsage(err) {
		return 2
	}
	return 1
}

// IsUsage says whether err is a mistake in the command line: a
// UsageError, or one of cobra's argument and command checks.
func IsUsage(err error) bool {
	var u UsageError
	if errors.As(err, &u) {
		return true
	}
	s := err.Error()
	return strings.HasPrefix(s, "unknown command") || strings.HasPrefix(s, "accepts ") ||
		strings.HasPrefix(s, "requires ") || strings.HasPrefix(s, "required flag") ||
		strings.HasPrefix(s, "unknown flag") || strings.HasPrefix(s, "invalid argument")
}

// Normalize rewrites the single-dash long flags the standard flag package
// accepted (-data DIR, -data=DIR) to pflag's --data (an unknown one too,
// so that the error names --bogus, not a shorthand b). Values are left
// alone (the word after a flag of the command named by the leading words
// that takes one), as is everything after "--" and the shorthands -h, -v.
func Normalize(root *cobra.Command, args []string) []string {
	out := make([]string, 0, len(args))
	cmd, descend, needValue := root, true, false
	for i, a := range args {
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case needValue:
			needValue = false
		case !strings.HasPrefix(a, "-") || a == "-":
			if descend {
				if sub := findSub(cmd, a); sub != nil {
					cmd = sub
				} else {
					descend = false
				}
			}
		default:
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !strings.HasPrefix(a, "--") && len(name) > 1 {
				a = "-" + a // the only shorthands are -h and root's -v
			}
			f := Lookup(cmd, name)
			needValue = f != nil && !hasValue && f.NoOptDefVal == ""
		}
		out = append(out, a)
	}
	return out
}

func findSub(c *cobra.Command, name string) *cobra.Command {
	for _, s := range c.Commands() {
		if s.Name() == name || s.HasAlias(name) {
			return s
		}
	}
	return nil
}

// Lookup finds flag name of c: its own or a persistent flag of c or of a
// parent.
func Lookup(c *cobra.Command, name string) *pflag.Flag {
	if f := c.Flags().Lookup(name); f != nil {
		return f
	}
	for p := c; p != nil; p = p.Parent() {
		if f := p.PersistentFlags().Lookup(name); f != nil {
			return f
		}
	}
	return nil
}

// EnvAnnotation is the pflag annotation naming a flag's environment
// variable; the help shows it and the docs test reads it.
const EnvAnnotation = "env"

// WithEnv records on fs that flag name honours the environment variable
// env, and says so in its help line: "(env TASKLEDGER_DATA)".
func WithEnv(fs *pflag.FlagSet, name, env string) {
	f := fs.Lookup(name)
	f.Usage += " (env " + env + ")"
	_ = fs.SetAnnotation(name, EnvAnnotation, []string{env})
}
