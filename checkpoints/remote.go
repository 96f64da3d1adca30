package checkpoints

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Sharing a session's checkpoints through a remote of its repository, so
// that another machine working in a clone of it can read them (docs/
// CLUSTER.md). The remote is the operator's, not a client's; it is still
// checked (CheckRemote) and passed after "--", so it can never be read as
// an option.

// maxRemoteLen bounds a remote's name or URL.
const maxRemoteLen = 2048

// CheckRemote checks a remote as an operator gives it: a remote's name
// (origin), looked up in each repository, or a URL or path that git push
// takes as it is. It must not be empty, start with '-', or hold control
// characters.
func CheckRemote(remote string) error {
	switch {
	case remote == "":
		return errors.New("the remote is empty")
	case remote[0] == '-':
		return fmt.Errorf("the remote %q starts with '-': give a remote's name or a URL", clip(remote))
	case len(remote) > maxRemoteLen:
		return fmt.Errorf("the remote is longer than %d bytes", maxRemoteLen)
	}
	for _, c := range []byte(remote) {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("the remote %q holds a control character", clip(remote))
		}
	}
	return nil
}

// clip shortens a remote for a message, its credentials left out.
func clip(s string) string {
	s = Redacted(s)
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Redacted returns remote as a log may show it: a URL's user and password
// (https://user:token@host/...) replaced by "***".
func Redacted(remote string) string {
	scheme, rest, ok := strings.Cut(remote, "://")
	if !ok {
		return remote
	}
	host := rest
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		host = rest[:i]
	}
	at := strings.LastIndexByte(host, '@')
	if at < 0 {
		return remote
	}
	return scheme + "://***@" + rest[at+1:]
}

// IsRemoteName reports whether remote (checked by CheckRemote) is the name
// of a remote, to be looked up in a repository's config, rather than a URL
// or a path: letters, digits, '.', '_' and '-', not starting with '.'.
func IsRemoteName(remote string) bool {
	if remote == "" || remote[0] == '.' || remote[0] == '-' {
		return false
	}
	for i := 0; i < len(remote); i++ {
		if !safeByte(remote[i]) {
			return false
		}
	}
	return true
}

// HasRemote reports whether the repository has a remote of that name.
// git is given no part of name: it lists the remotes, and they are
// compared here.
func (r *Repo) HasRemote(ctx context.Context, name string) (bool, error) {
	out, err := r.git(ctx, "remote")
	if err != nil {
		return false, fmt.Errorf("checkpoints: listing remotes: %w", err)
	}
	for line := range strings.Lines(string(out)) {
		if strings.TrimSpace(line) == name {
			return true, nil
		}
	}
	return false, nil
}

// checkpointsRefspec is the refspec that maps a session's checkpoint refs
// to the same names on the other side, replacing what is there (a turn
// recorded again moves its ref).
func checkpointsRefspec(sessionID string) (string, error) {
	if err := checkSessionID(sessionID); err != nil {
		return "", err
	}
	prefix := RefPrefix(sessionID)
	if err := checkRefName(prefix + "turn"); err != nil {
		return "", err
	}
	return "+" + prefix + "*:" + prefix + "*", nil
}

// Push sends a session's checkpoint refs to remote, under the same names,
// and, when branch is not "", the branch refs/heads/<branch> too. The
// checkpoints are forced (they are the session's, and a turn recorded
// again moves its ref); the branch is not: a push that would lose commits
// on the remote's branch is refused by the remote, and reported. Hooks
// (pre-push) do not run: this is the daemon's bookkeeping, not a person's
// push. A refused ref does not keep the others from being sent; the error
// says which failed.
func (r *Repo) Push(ctx context.Context, remote, sessionID, branch string) error {
	if err := CheckRemote(remote); err != nil {
		return fmt.Errorf("checkpoints: push: %w", err)
	}
	spec, err := checkpointsRefspec(sessionID)
	if err != nil {
		return fmt.Errorf("checkpoints: push: %w", err)
	}
	args := []string{"push", "--quiet", "--no-verify", "--", remote, spec}
	if branch != "" {
		ref := "refs/heads/" + branch
		// checkRefName's alphabet has no ':', '*', '+' or space, which
		// would change what the refspec means.
		if err := checkRefName(ref); err != nil {
			return fmt.Errorf("checkpoints: push: %w", err)
		}
		args = append(args, ref+":"+ref)
	}
	if _, err := r.git(ctx, args...); err != nil {
		return fmt.Errorf("checkpoints: push to %s: %w", clip(remote), err)
	}
	return nil
}

// PushRemoval makes the session's checkpoint refs on remote what the
// repository has: it pushes those it has, as Push does, and removes those
// it no longer has (after Delete, all of them). Nothing outside the
// session's checkpoints is touched there.
func (r *Repo) PushRemoval(ctx context.Context, remote, sessionID string) error {
	if err := CheckRemote(remote); err != nil {
		return fmt.Errorf("checkpoints: push: %w", err)
	}
	spec, err := checkpointsRefspec(sessionID)
	if err != nil {
		return fmt.Errorf("checkpoints: push: %w", err)
	}
	// --prune with the session's pattern deletes, on the remote, the refs
	// under it that have no local counterpart.
	if _, err := r.git(ctx, "push", "--quiet", "--no-verify", "--prune", "--", remote, spec); err != nil {
		return fmt.Errorf("checkpoints: removing from %s: %w", clip(remote), err)
	}
	return nil
}

// Fetch copies a session's checkpoint refs from remote, under the same
// names, replacing those the repository has: a machine that takes over a
// session reads the checkpoints the one before it pushed.
func (r *Repo) Fetch(ctx context.Context, remote, sessionID string) error {
	if err := CheckRemote(remote); err != nil {
		return fmt.Errorf("checkpoints: fetch: %w", err)
	}
	spec, err := checkpointsRefspec(sessionID)
	if err != nil {
		return fmt.Errorf("checkpoints: fetch: %w", err)
	}
	// --no-write-fetch-head: FETCH_HEAD is the user's, for their own
	// fetches; --no-auto-gc: no gc started behind the daemon.
	args := []string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-gc", "--", remote, spec}
	if _, err := r.git(ctx, args...); err != nil {
		return fmt.Errorf("checkpoints: fetch from %s: %w", clip(remote), err)
	}
	return nil
}

// HasCheckpoint reports whether the session's checkpoint of turn is in the
// repository.
func (r *Repo) HasCheckpoint(ctx context.Context, sessionID string, turn int) (bool, error) {
	if err := checkSessionID(sessionID); err != nil {
		return false, err
	}
	ref, err := turnRef(sessionID, turn)
	if err != nil {
		return false, fmt.Errorf("checkpoints: %w", err)
	}
	out, err := r.git(ctx, "for-each-ref", "--format=%(refname)", ref)
	if err != nil {
		return false, fmt.Errorf("checkpoints: looking for %s: %w", ref, err)
	}
	return strings.TrimSpace(string(out)) == ref, nil
}
