package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// GitError is a git command that failed. Its message is git's own reason
// (its stderr), which is what a person needs to see to fix the cause.
type GitError struct {
	Dir    string   // the directory git ran in
	Args   []string // the arguments after "git"
	Stderr string   // what git wrote to stderr, trimmed
	Err    error    // the error from running the process
}

func (e *GitError) Error() string {
	reason := e.Stderr
	if reason == "" {
		reason = e.Err.Error()
	}
	return fmt.Sprintf("git %s: %s", e.command(), reason)
}

func (e *GitError) Unwrap() error { return e.Err }

// command names the subcommand ("worktree add", "ls-files") without the
// rest of the arguments, which may be long or carry user input.
func (e *GitError) command() string {
	if len(e.Args) == 0 {
		return ""
	}
	if e.Args[0] == "worktree" && len(e.Args) > 1 {
		return "worktree " + e.Args[1]
	}
	return e.Args[0]
}

// scrubbedEnv is the environment git runs in. Variables that point git at a
// particular repository or index are dropped: ahpd may itself run under a git
// hook or inside another tool that set them, and then every command would act
// on that repository instead of the one in cmd.Dir.
var scrubbedEnv = func() []string {
	drop := map[string]bool{
		"GIT_DIR":                          true,
		"GIT_WORK_TREE":                    true,
		"GIT_INDEX_FILE":                   true,
		"GIT_COMMON_DIR":                   true,
		"GIT_OBJECT_DIRECTORY":             true,
		"GIT_ALTERNATE_OBJECT_DIRECTORIES": true,
		"GIT_NAMESPACE":                    true,
		"GIT_PREFIX":                       true,
		"GIT_TERMINAL_PROMPT":              true,
		"GIT_OPTIONAL_LOCKS":               true,
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	// No prompt can be answered by a daemon; optional locks off keeps our
	// status reads from contending with the person's own git in the tree.
	return append(env, "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
}()

// runGit runs git with args in dir and returns its stdout. A failure is a
// *GitError carrying git's stderr.
func runGit(ctx context.Context, dir string, args ...string) (string, error) {
	return runGitHolding(ctx, dir, nil, args...)
}

// runGitHolding is runGit with files git and what it starts hold open for
// as long as they run: a claim's locked file (pending.go).
func runGitHolding(ctx context.Context, dir string, hold []*os.File, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = scrubbedEnv
	cmd.ExtraFiles = hold
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return stdout.String(), &GitError{Dir: dir, Args: args, Stderr: strings.TrimSpace(stderr.String()), Err: err}
	}
	return stdout.String(), nil
}

// exitCode reports the exit status of a failed git command, or -1 when the
// failure was not an exit (git missing, context cancelled).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// ErrBadBranch is wrapped by the errors for branch names git would not take.
var ErrBadBranch = errors.New("invalid branch name")

// checkBranch refuses a branch name that could be read as an option or that
// git does not accept as a branch name. It must run before the name is given
// to any other git command.
func checkBranch(ctx context.Context, dir, name string) error {
	if name == "" || strings.HasPrefix(name, "-") {
		return fmt.Errorf("%w: %q", ErrBadBranch, name)
	}
	out, err := runGit(ctx, dir, "check-ref-format", "--branch", name)
	if err != nil {
		var ge *GitError
		if errors.As(err, &ge) && ge.Stderr != "" {
			return fmt.Errorf("%w: %q: %s", ErrBadBranch, name, ge.Stderr)
		}
		return fmt.Errorf("%w: %q: %v", ErrBadBranch, name, err)
	}
	// --branch expands "@{-1}" and friends to another branch; a name that
	// does not come back as itself is not the literal name it looked like.
	if strings.TrimSpace(out) != name {
		return fmt.Errorf("%w: %q names another branch (%s)", ErrBadBranch, name, strings.TrimSpace(out))
	}
	return nil
}

// lines splits NUL- or newline-terminated git output, dropping empty entries.
func lines(out string, sep byte) []string {
	var res []string
	for _, l := range strings.Split(out, string(sep)) {
		if l != "" {
			res = append(res, l)
		}
	}
	return res
}
