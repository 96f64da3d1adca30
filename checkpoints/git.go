package checkpoints

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// GitError reports a git command that failed. Stderr holds git's own
// explanation, which is usually what a person needs to see.
type GitError struct {
	Args   []string // the git subcommand and its arguments
	Stderr string   // git's stderr, trimmed
	Err    error    // the error from running the process
}

func (e *GitError) Error() string {
	name := "git"
	if sub := subcommand(e.Args); sub != "" {
		name += " " + sub
	}
	if e.Stderr == "" {
		return fmt.Sprintf("%s: %v", name, e.Err)
	}
	return fmt.Sprintf("%s: %v: %s", name, e.Err, e.Stderr)
}

func (e *GitError) Unwrap() error { return e.Err }

// subcommand returns the git subcommand in args, skipping global options
// such as -c name=value.
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "-C":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

// strippedEnv lists variables that must not reach git from the daemon's own
// environment. The first group is git's "local repository" set (see
// `git rev-parse --local-env-vars`): inherited, they would point git at some
// other repository, index or object store, for instance when ahpd itself is
// started from a git hook. That set also names the GIT_CONFIG_* variables;
// those are kept, because setting them is how an operator configures git
// for the daemon (safe.directory, say). The rest are set per command where
// needed.
var strippedEnv = []string{
	"GIT_ALTERNATE_OBJECT_DIRECTORIES",
	"GIT_OBJECT_DIRECTORY",
	"GIT_DIR",
	"GIT_WORK_TREE",
	"GIT_IMPLICIT_WORK_TREE",
	"GIT_GRAFT_FILE",
	"GIT_INDEX_FILE",
	"GIT_NO_REPLACE_OBJECTS",
	"GIT_REPLACE_REF_BASE",
	"GIT_PREFIX",
	"GIT_INTERNAL_SUPER_PREFIX",
	"GIT_SHALLOW_FILE",
	"GIT_COMMON_DIR",
	"GIT_NAMESPACE",
	"GIT_AUTHOR_NAME",
	"GIT_AUTHOR_EMAIL",
	"GIT_AUTHOR_DATE",
	"GIT_COMMITTER_NAME",
	"GIT_COMMITTER_EMAIL",
	"GIT_COMMITTER_DATE",
	"GIT_TERMINAL_PROMPT",
	"GIT_OPTIONAL_LOCKS",
}

// baseEnv returns the daemon's environment without the variables above,
// plus settings that keep git from ever waiting on a person.
func baseEnv() []string {
	env := os.Environ()
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(strippedEnv, name) {
			out = append(out, kv)
		}
	}
	return append(out,
		"GIT_TERMINAL_PROMPT=0",
		// Reads must not refresh the user's index behind their back.
		"GIT_OPTIONAL_LOCKS=0",
	)
}

// gitCmd is one git invocation.
type gitCmd struct {
	dir   string    // working directory
	env   []string  // added to baseEnv
	stdin io.Reader // optional
	args  []string
	yield bool // run at a lower CPU priority (Repo.Yielding)
}

// cancelGrace is how long a cancelled git process has to remove its lock
// files after SIGTERM before it is killed.
const cancelGrace = 5 * time.Second

// run runs c and returns its stdout. A failure is a *GitError carrying git's
// stderr.
//
// git's stdin, stdout and stderr are files, not pipes. With pipes, os/exec
// copies in goroutines and Wait waits for them to reach end of file, which
// comes only when every process holding the pipe has closed it: a process
// a hook started in the background keeps it open long after git exits,
// and so, for an instant, does every process forked meanwhile. A
// WaitDelay bounds that wait, but then a busy machine turns a capture that
// succeeded into "WaitDelay expired before I/O complete", with the output
// lost. A file is complete the moment git exits, whoever else holds it, so
// the only wait left is for git itself, and WaitDelay now bounds only the
// time a cancelled git gets to go.
func (c gitCmd) run(ctx context.Context) ([]byte, error) {
	stdout, err := c.runFile(ctx)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	out, err := readBack(stdout)
	if err != nil {
		return nil, fmt.Errorf("git %s: reading its output: %w", subcommand(c.args), err)
	}
	return out, nil
}

// runFile is run, its stdout left in the scratch file it was written to,
// for a caller that reads a part of it (Patch); the caller closes it.
func (c gitCmd) runFile(ctx context.Context) (*os.File, error) {
	stdout, err := scratch(nil)
	if err != nil {
		return nil, fmt.Errorf("git %s: %w", subcommand(c.args), err)
	}
	ok := false
	defer func() {
		if !ok {
			stdout.Close()
		}
	}()
	stderr, err := scratch(nil)
	if err != nil {
		return nil, fmt.Errorf("git %s: %w", subcommand(c.args), err)
	}
	defer stderr.Close()

	if !holding(ctx) && !remoteCommand(c.args) {
		// What nobody waits for (yield) queues behind what somebody does.
		p := Now
		if c.yield {
			p = Later
		}
		if err := slots.acquire(ctx, At(p)); err != nil {
			return nil, fmt.Errorf("git %s: waiting for its turn: %w", subcommand(c.args), err)
		}
		defer slots.release()
	}
	cmd := exec.CommandContext(ctx, "git", c.args...)
	cmd.Dir = c.dir
	cmd.Env = append(baseEnv(), c.env...)
	if c.stdin != nil {
		in, err := scratch(c.stdin)
		if err != nil {
			return nil, fmt.Errorf("git %s: stdin: %w", subcommand(c.args), err)
		}
		defer in.Close()
		cmd.Stdin = in
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A killed git can leave *.lock files behind (a ref's, an index's) that
	// make the next command fail. git removes them itself on SIGTERM, so ask
	// politely first and kill only if it does not go.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = cancelGrace
	runErr := cmd.Start()
	if runErr == nil {
		if c.yield {
			// What git starts (filters, hooks) inherits it, unless it
			// starts in the instant before.
			lowerPriority(cmd.Process.Pid)
		}
		runErr = cmd.Wait()
	}
	if runErr != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			runErr = fmt.Errorf("%w (%v)", ctxErr, runErr)
		}
		msg, _ := readBack(stderr)
		return nil, &GitError{
			Args:   c.args,
			Stderr: strings.TrimSpace(string(msg)),
			Err:    runErr,
		}
	}
	ok = true
	return stdout, nil
}

// remoteCommand reports whether args talk to a remote, which waits on
// the network rather than the CPU and takes no slot (slots.go).
func remoteCommand(args []string) bool {
	switch subcommand(args) {
	case "push", "fetch", "ls-remote":
		return true
	}
	return false
}

// scratch returns an anonymous file (removed from its folder at once, so
// nothing is left behind whatever happens) holding what r reads, if r is
// not nil, positioned at its start.
func scratch(r io.Reader) (*os.File, error) {
	f, err := os.CreateTemp("", "ahpd-git-")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	if r == nil {
		return f, nil
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readBack returns what was written to a scratch file.
func readBack(f *os.File) ([]byte, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// git runs git in the repository's top-level directory.
func (r *Repo) git(ctx context.Context, args ...string) ([]byte, error) {
	return gitCmd{dir: r.root, yield: r.yielding, args: args}.run(ctx)
}

// gitLine runs git in the repository and returns the first line of its
// output, for commands that print a single object id.
func (r *Repo) gitLine(ctx context.Context, args ...string) (string, error) {
	out, err := r.git(ctx, args...)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}
