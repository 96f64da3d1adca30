package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// runIn runs ahpd in this process, as main does, and returns what it
// wrote and its exit status. Nothing here reaches a daemon.
func runIn(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// TestCompletionBash sources what `ahpd completion bash` writes in a
// real bash and completes with it, as bash does on TAB: the script asks
// the binary (`ahpd __complete ...`, the one the tests built, on PATH)
// and offers the commands, a group's commands and a command's flags.
func TestCompletionBash(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, stderr, code := runIn(t, "completion", "bash")
	if code != 0 || !strings.Contains(script, "__start_ahpd") {
		t.Fatalf("ahpd completion bash: exit %d, stderr %q, script:\n%.300s", code, stderr, script)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "ahpd.bash")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	// complete LINE sets what bash sets for a TAB at the end of LINE and
	// calls the function the script registered for ahpd. The script
	// wants the bash-completion package's _get_comp_words_by_ref; where
	// that is not installed, a stand-in takes bash's words as they are.
	driver := `source "$1"
if ! declare -F _get_comp_words_by_ref >/dev/null; then
	_get_comp_words_by_ref() {
		cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cword=$COMP_CWORD
		words=("${COMP_WORDS[@]}")
	}
fi
complete_line() {
	COMP_LINE=$1 COMP_POINT=${#1} COMP_TYPE=9 COMP_KEY=9
	read -r -a COMP_WORDS <<<"$1"
	[[ $1 == *" " ]] && COMP_WORDS+=("")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	fn=$(complete -p ahpd | sed -E 's/.* -F ([^ ]+) .*/\1/')
	"$fn" ahpd "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
	echo "$1=> ${COMPREPLY[*]}"
}
complete_line "ahpd sta"
complete_line "ahpd su"
complete_line "ahpd automations sh"
complete_line "ahpd ls --j"
complete_line "ahpd completion z"
`
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", driver, "bash", file)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(ahpdBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("bash: %v\n%s%s", err, out.String(), errb.String())
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		line, offered, _ := strings.Cut(line, "=> ")
		got[line] = strings.Fields(offered)
	}
	for line, want := range map[string][]string{
		"ahpd sta":            {"status"},
		"ahpd su":             {"suspend"},
		"ahpd automations sh": {"show"},
		"ahpd ls --j":         {"--json"},
		"ahpd completion z":   {"zsh"},
	} {
		if !slices.Equal(got[line], want) {
			t.Errorf("%q completes to %q, want %q\n%s", line, got[line], want, errb.String())
		}
	}
}

// TestCompletionScripts: each shell's script is written on stdout, and
// a shell that is not one is a usage error.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for shell, mark := range map[string]string{
		"bash": "complete -o default -F __start_ahpd ahpd", "zsh": "#compdef ahpd",
		"fish": "complete -c ahpd", "powershell": "Register-ArgumentCompleter",
	} {
		out, errOut, code := runIn(t, "completion", shell)
		if code != 0 || !strings.Contains(out, mark) || errOut != "" {
			t.Errorf("ahpd completion %s: exit %d, stderr %q, and the script has no %q", shell, code, errOut, mark)
		}
	}
	if _, errOut, code := runIn(t, "completion", "tcsh"); code != exitUsage || !strings.Contains(errOut, "bash, zsh, fish or powershell") {
		t.Errorf("ahpd completion tcsh: exit %d, stderr %q", code, errOut)
	}
}

// TestDidYouMean: a mistyped command is a usage error that names the
// nearest commands, by spelling or by what they are for.
func TestDidYouMean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, "\tstatus\n"},
		{[]string{"sesions", "--all"}, "\tls\n"}, // ls lists the sessions
		{[]string{"automaton", "ls"}, "\tautomations\n"},
		{[]string{"automations", "shwo", "nightly"}, "\tshow\n"},
		{[]string{"user", "lsit"}, "\tlist\n"},
		{[]string{"help", "pendng"}, "\tpending\n"},
	} {
		out, errOut, code := runIn(t, tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "Did you mean this?\n") || !strings.Contains(errOut, tc.want) {
			t.Errorf("ahpd %s: exit %d, stdout %q, stderr %q; want 2 suggesting %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
	// What is near nothing suggests nothing, and the root still calls a
	// word it does not know an unexpected argument.
	if _, errOut, code := runIn(t, "zzzzzz"); code != exitUsage || strings.Contains(errOut, "Did you mean") ||
		!strings.HasPrefix(errOut, `ahpd: unexpected argument "zzzzzz"`) {
		t.Errorf("ahpd zzzzzz: exit %d, stderr %q", code, errOut)
	}
}

// TestCommandHelp: every spelling of help for a command prints its
// generated help on stdout, naming its flags and the connection flags,
// and exits 0.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"help", "run"}, []string{"Usage:\n  ahpd run [--folder DIR]", "Exit status: 0", "--approve MODE", "--url URL", "Examples:"}},
		{[]string{"run", "--help"}, []string{"Usage:\n  ahpd run [--folder DIR]", "--input-timeout D"}},
		{[]string{"run", "-h"}, []string{"Usage:\n  ahpd run [--folder DIR]"}},
		{[]string{"run", "-help"}, []string{"Usage:\n  ahpd run [--folder DIR]"}},
		{[]string{"ls", "--all", "--help"}, []string{"Usage:\n  ahpd ls [--all] [--json]\n", "--all ", "--token-file F"}},
		{[]string{"automations", "add", "--help"}, []string{"Usage:\n  ahpd automations add --title T", "--cron EXPR", "--on EVENT"}},
		{[]string{"help", "automations", "add"}, []string{"--cron EXPR"}},
		{[]string{"automations", "help", "add"}, []string{"--cron EXPR"}},
		{[]string{"automations", "--help"}, []string{"Available Commands:", "rm  ", "docs/AUTOMATIONS.md"}},
		{[]string{"automations"}, []string{"Available Commands:"}},
		{[]string{"user", "--help"}, []string{"Available Commands:", "revoke", "Only a hash of each token is kept"}},
		{[]string{"user", "add", "--help"}, []string{"--role ROLE", "--users FILE"}},
		{[]string{"cluster", "credentials", "--help"}, []string{"--out DIR", "nats.node.hosts"}},
		{[]string{"webhooks", "log", "--help"}, []string{"--limit N"}},
		{[]string{"completion", "--help"}, []string{"bash", "powershell"}},
		{[]string{"help"}, []string{"ahpd [serve] [flags]", "--shutdown-grace", "ahpd completion bash|zsh|fish|powershell", "ahpd events [--follow]"}},
		{[]string{"help", "serve"}, []string{"ahpd [serve] [flags]", "--connection-token"}},
	} {
		out, errOut, code := runIn(t, tc.args...)
		if code != 0 || errOut != "" {
			t.Errorf("ahpd %s: exit %d, stderr %q", strings.Join(tc.args, " "), code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("ahpd %s does not say %q:\n%s", strings.Join(tc.args, " "), w, out)
			}
		}
	}
}

// TestCommandFlagErrors: a flag cobra refuses is a usage error (2) that
// names the flag and the command's usage, as before.
func TestCommandFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", "--bogus"}, "ahpd ls: unknown flag: --bogus (usage: ahpd ls [--all] [--json])"},
		{[]string{"ls", "-bogus"}, "ahpd ls: unknown shorthand flag: 'b' in -bogus"},
		{[]string{"webhooks", "log", "--limit", "soon"}, `ahpd webhooks log: invalid argument "soon" for "--limit" flag`},
		{[]string{"run", "--folder"}, "ahpd run: flag needs an argument: --folder"},
		{[]string{"answer", "--answer", "x", "4f2a"}, `--answer "x": give ID=VALUE`},
		{[]string{"user", "add", "ada", "--nope", "--users", "u.yaml"}, "ahpd user add: unknown flag: --nope"},
		{[]string{"version", "now"}, "ahpd version: it takes no arguments"},
	} {
		out, errOut, code := runIn(t, tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("ahpd %s: exit %d, stdout %q, stderr %q; want 2 with %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
}

// TestSingleDashFlags: a command's long flags with one dash, as Go's flag
// package took them, still work; a flag's value and what follows "--"
// are left as they are.
func TestSingleDashFlags(t *testing.T) {
	t.Parallel()
	_, errOut, code := runIn(t, "ls", "-json", "-url", "ws://127.0.0.1:1", "-all=true", "-state-dir", t.TempDir())
	if code != exitFailed || !strings.Contains(errOut, "no ahpd answers at ws://127.0.0.1:1") {
		t.Errorf("ahpd ls -json -url ...: exit %d, stderr %q", code, errOut)
	}
	got := longDashes(newRoot(nil, io.Discard, io.Discard), []string{"automations", "add", "-message", "-json", "-disabled", "-x", "--", "-title"})
	want := []string{"automations", "add", "--message", "-json", "--disabled", "-x", "--", "-title"}
	if !slices.Equal(got, want) {
		t.Errorf("longDashes = %q, want %q", got, want)
	}
}

// TestCompleteSessions: a command's SESSION completes with the ids of
// the running daemon's sessions, each with its title.
func TestCompleteSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	serveDaemon(t, e)
	r := cli(t, e, "run", "--provider", "script", "--title", "First of all", "say one")
	m := sessionLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("run: %d %q", r.code, r.stderr)
	}
	id := m[1]
	for _, args := range [][]string{{"show", id[:4]}, {"send", ""}, {"approve", id[:2]}} {
		// As the shell asks: the command, its flags, and the word to
		// complete last.
		cmd := exec.Command(ahpdBin, "__complete", args[0], "--state-dir", e.state, args[1])
		cmd.Env = e.environ()
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), id+"\tFirst of all\n") {
			t.Errorf("ahpd __complete %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
