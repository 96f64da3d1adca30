package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The command tree, on github.com/spf13/cobra: the root runs the daemon
// (and so does `ahpd serve`), and each cli_*.go file registers the
// commands it makes. Cobra gives them their generated help (`ahpd help
// run`, `ahpd run --help`), "did you mean" for a mistyped command, and
// `ahpd completion bash|zsh|fish|powershell`.
//
// The daemon's own flags stay a flag.FlagSet (config.go): their order of
// precedence over AHPD_<FLAG> and the config file is built on its Visit
// and Set, and its errors and spelling (`ahpd -listen :0`, `flag provided
// but not defined: -bogus`) are what scripts and the tests know. So the
// root and serve disable cobra's flag parsing and hand their arguments to
// parseConfig; their flags are mirrored onto cobra's set only so that
// completion offers them. Arguments that start with a flag are the
// daemon's, as they always were: they go to serve.

func init() {
	// Commands are listed in commandOrder, not by name.
	cobra.EnableCommandSorting = false
}

// commandMakers make the subcommands. Each run makes a new tree, so that
// runs (tests make several at once) share no flag values.
var commandMakers []func() *cobra.Command

// register adds commands to ahpd.
func register(makers ...func() *cobra.Command) {
	commandMakers = append(commandMakers, makers...)
}

// commandOrder is the order the help lists the commands in, as docs/CLI.md
// does; one not named here comes after them.
var commandOrder = []string{"run", "send", "pending", "answer", "approve", "deny", "ls", "show", "cancel", "status",
	"suspend", "resume", "rm", "events", "automations", "webhooks", "user", "cluster", "version"}

func listed(name string) int {
	if i := slices.Index(commandOrder, name); i >= 0 {
		return i
	}
	return len(commandOrder)
}

// exitStatus is a command's exit status once it has said why.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitWith is the error a command returns for its exit status.
func exitWith(code int) error {
	if code == exitOK {
		return nil
	}
	return exitStatus(code)
}

// flagError is a flag cobra could not parse, for a usage error.
type flagError struct {
	cmd *cobra.Command
	err error
}

func (e *flagError) Error() string { return e.err.Error() }

// ioOf is what cmd reads and writes.
func ioOf(cmd *cobra.Command) cliIO {
	return cliIO{stdin: cmd.InOrStdin(), stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), cmd: cmd}
}

// cmdName is cmd's path without the leading "ahpd ": "automations ls".
func cmdName(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// execute runs the command args name, and returns its exit status.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if isVersionArg(args) {
		printVersion(stdout, version, readBuildInfo())
		return exitOK
	}
	if len(args) > 0 && strings.HasPrefix(args[0], "-") {
		// Flags first are the daemon's, as they were before there were
		// commands: a command's name comes first. (Cobra, looking for
		// a command among the words, would take the value of a flag
		// for one: ahpd -host-id run.)
		args = append([]string{"serve"}, args...)
	}
	root := newRoot(stdin, stdout, stderr)
	// Not nil: cobra reads os.Args for nil.
	root.SetArgs(append([]string{}, longDashes(root, args)...))
	_, err := root.ExecuteContextC(ctx)
	var status exitStatus
	var fe *flagError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &status):
		return int(status)
	case errors.As(err, &fe):
		return cmdUsageError(ioOf(fe.cmd), cmdName(fe.cmd), fe.err)
	}
	fmt.Fprintln(stderr, "ahpd:", err)
	return exitUsage
}

// newRoot makes the command tree, on these streams.
func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:                "ahpd",
		Short:              "ahpd hosts AI coding-agent sessions over the Agent Host Protocol.",
		Args:               cobra.ArbitraryArgs,
		DisableFlagParsing: true,
		SilenceErrors:      true,
		SilenceUsage:       true,
		RunE:               daemonCommand,
	}
	serve := &cobra.Command{
		Use:                "serve [flags]",
		Short:              "serve AHP: what ahpd does with no command",
		Args:               cobra.ArbitraryArgs,
		DisableFlagParsing: true,
		RunE:               daemonCommand,
	}
	// Before the completion command, which keeps the stdout it is made
	// with.
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	mirrorDaemonFlags(root.Flags())
	mirrorDaemonFlags(serve.Flags())
	var cmds []*cobra.Command
	for _, make := range commandMakers {
		cmds = append(cmds, make())
	}
	slices.SortStableFunc(cmds, func(a, b *cobra.Command) int { return listed(a.Name()) - listed(b.Name()) })
	root.AddCommand(cmds...)
	root.AddCommand(serve)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &flagError{cmd, err}
	})
	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if cmd == root || cmd == serve {
			fmt.Fprint(cmd.OutOrStdout(), usage, "\n", commandList(root), "\n", connUsage)
			return
		}
		defaultHelp(cmd, args)
	})
	root.SetHelpCommand(helpCommand(root))
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Use = "completion bash|zsh|fish|powershell"
			c.Short = "a shell completion script for ahpd (docs/CLI.md says how to install it)"
			asGroup(c)
		}
	}
	return root
}

// commandList lists the commands for the root's help.
func commandList(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString("Commands (ahpd help COMMAND, or ahpd COMMAND --help, tells more; see docs/CLI.md):\n")
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() && c.Name() != "serve" {
			fmt.Fprintf(&b, "  ahpd %s   %s\n", strings.TrimSuffix(c.Use, " [flags]"), c.Short)
		}
	}
	b.WriteString("  ahpd help [COMMAND]   this, or what a command takes\n")
	return b.String()
}

// daemonCommand is ahpd with no command, and ahpd serve: it parses the
// daemon's flags itself (config.go) and serves.
func daemonCommand(cmd *cobra.Command, args []string) error {
	io := ioOf(cmd)
	if !cmd.HasParent() && len(args) > 0 {
		// The root's first word is not a command's name (flags first
		// went to serve).
		fmt.Fprintf(io.stderr, "ahpd: unexpected argument %q: there is no such command (see ahpd --help)\n%s", limitText(args[0], 40), didYouMean(cmd, args[0]))
		return exitStatus(exitUsage)
	}
	cfg, err := parseConfig(args, io.stderr)
	if errors.Is(err, flag.ErrHelp) {
		// -help, -h or --help, after other flags too: the flag package's
		// own spelling.
		return cmd.Help()
	}
	if err != nil {
		fmt.Fprintln(io.stderr, "ahpd:", err)
		return exitStatus(exitUsage)
	}
	if err := serve(cmd.Context(), cfg, io.stdin, io.stdout, io.stderr); err != nil {
		fmt.Fprintln(io.stderr, "ahpd:", err)
		return exitStatus(exitFailed)
	}
	return nil
}

// mirrorDaemonFlags declares the daemon's flags on fs, which never parses
// them: for completion.
func mirrorDaemonFlags(fs *pflag.FlagSet) {
	var cfg config
	var file string
	flagSet(&cfg, &file).VisitAll(func(f *flag.Flag) {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			fs.Bool(f.Name, false, "")
			return
		}
		fs.String(f.Name, "", "")
	})
}

// asGroup makes c a command of commands: given none, or help, it shows
// its help; given another word, it says there is no such command, and
// which there are. It parses no flags, so that the connection flags the
// commands take may come before the command's name.
func asGroup(c *cobra.Command) *cobra.Command {
	c.DisableFlagParsing = true
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 || isHelpArg(args[0]) {
			if len(args) > 1 {
				if sub, _, err := cmd.Find(args[1:]); err == nil && sub != cmd {
					return sub.Help()
				}
			}
			return cmd.Help()
		}
		var names []string
		for _, s := range cmd.Commands() {
			if s.IsAvailableCommand() {
				names = append(names, s.Name())
			}
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "ahpd %s: unknown command %q: %s (see ahpd %s --help)\n%s",
			cmdName(cmd), limitText(args[0], 40), orList(names), cmdName(cmd), didYouMean(cmd, args[0]))
		return exitStatus(exitUsage)
	}
	return c
}

// newGroup is a command of the commands subs.
func newGroup(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Long: long, DisableFlagsInUseLine: true}
	c.AddCommand(subs...)
	return asGroup(c)
}

func isHelpArg(s string) bool {
	return s == "help" || s == "-h" || s == "--help" || s == "-help"
}

// orList is "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// didYouMean names the commands of parent near typed, as cobra does
// (by edit distance and prefix, and each command's SuggestFor), and
// also those whose SuggestFor words are near it (`ahpd sesions`: ls).
func didYouMean(parent *cobra.Command, typed string) string {
	parent.SuggestionsMinimumDistance = 2
	found := parent.SuggestionsFor(typed)
	for _, c := range parent.Commands() {
		if !c.IsAvailableCommand() || slices.Contains(found, c.Name()) {
			continue
		}
		for _, w := range c.SuggestFor {
			if editDistance(strings.ToLower(typed), strings.ToLower(w)) <= 2 {
				found = append(found, c.Name())
				break
			}
		}
	}
	if len(found) == 0 {
		return ""
	}
	return "\nDid you mean this?\n\t" + strings.Join(found, "\n\t") + "\n"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}

// helpCommand is `ahpd help [COMMAND...]`: cobra's, but a command it
// does not know is a usage error that says what there is.
func helpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]",
		Short: "what ahpd, or a command of it, takes",
		Args:  cobra.ArbitraryArgs,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			parent, _, err := root.Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, c := range parent.Commands() {
				if c.IsAvailableCommand() && strings.HasPrefix(c.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(c.Name(), c.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			target := root
			for _, a := range args {
				next := findSub(target, a)
				if next == nil {
					prefix := "ahpd"
					if target != root {
						prefix += " " + cmdName(target)
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: no help for %q: there is no such command (see ahpd --help)\n%s", prefix, limitText(a, 40), didYouMean(target, a))
					return exitStatus(exitUsage)
				}
				target = next
			}
			return target.Help()
		},
	}
}

// findSub is parent's command name, or nil.
func findSub(parent *cobra.Command, name string) *cobra.Command {
	for _, c := range parent.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

// longDashes spells the command's long flags given with one dash, as Go's
// flag package took them (`ahpd ls -json`), with two, as cobra's take
// them. Only the names of the command's flags are respelled, and never a
// flag's value or what follows "--".
func longDashes(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd.DisableFlagParsing {
		return args
	}
	lookup := func(name string) *pflag.Flag {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f
		}
		return cmd.InheritedFlags().Lookup(name)
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := lookup(name)
		if !strings.HasPrefix(a, "--") && len(name) > 1 && (f != nil || name == "help") {
			a = "-" + a
		}
		out = append(out, a)
		if f != nil && f.NoOptDefVal == "" && !hasValue && strings.HasPrefix(a, "--") && i+1 < len(args) {
			// The next word is this flag's value.
			i++
			out = append(out, args[i])
		}
	}
	return out
}
