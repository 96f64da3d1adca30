package checkpoints

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Checkpoint is one turn's recorded tree.
type Checkpoint struct {
	Turn   int    // 0 for the tree the session started from
	Ref    string // refs/agents/<session>/checkpoints/turn/<Turn>
	Commit string // the commit the ref points at
}

// Identity written into checkpoint commits, so that capturing needs no
// user.name or user.email from anyone's git configuration.
const (
	authorName  = "ahpd"
	authorEmail = "ahpd@localhost"
)

// Capture records the working tree as it is on disk as the checkpoint of
// the given turn of a session and returns the commit's id. Turn 0 is the
// tree the session started from; turn N the tree when turn N ended.
//
// The commit's parent is the checkpoint the turn started from (see
// RecordStart), else the session's latest checkpoint before turn, if
// there is one, so a session's checkpoints form a history that `git log`
// can walk, and each turn's commit against its parent is what changed
// during the turn. Capturing a turn that already has a checkpoint replaces it.
// The user's index, HEAD, branches, stash and files are not touched.
//
// Captures of different sessions may run at once; captures of one session
// must not, or the parent chosen for each is unpredictable.
func (r *Repo) Capture(ctx context.Context, sessionID string, turn int) (string, error) {
	if err := checkSessionID(sessionID); err != nil {
		return "", err
	}
	ref, err := turnRef(sessionID, turn)
	if err != nil {
		return "", fmt.Errorf("checkpoints: capture: %w", err)
	}

	// Looking for the parent costs a process; do it while git add, by far
	// the slowest step, is running.
	type parentResult struct {
		commit string
		err    error
	}
	parentc := make(chan parentResult, 1)
	if turn == 0 {
		parentc <- parentResult{}
	} else {
		go func() {
			c, err := r.parent(ctx, sessionID, turn)
			parentc <- parentResult{c, err}
		}()
	}
	tree, err := r.Snapshot(ctx)
	parent := <-parentc
	if err != nil {
		return "", err
	}
	if parent.err != nil {
		return "", parent.err
	}
	return r.commit(ctx, ref, sessionID, fmt.Sprintf("turn %d", turn), tree, parent.commit)
}

// Record records tree, written earlier by Snapshot, as the checkpoint of
// the given turn of a session, as Capture does, and returns the commit's
// id. A caller that must not let the working tree change before it is
// captured (the next turn waits for it) can Snapshot first, let the tree
// change, and Record after.
func (r *Repo) Record(ctx context.Context, sessionID string, turn int, tree string) (string, error) {
	parent := ""
	if turn > 0 {
		if err := checkSessionID(sessionID); err != nil {
			return "", err
		}
		var err error
		if parent, err = r.parent(ctx, sessionID, turn); err != nil {
			return "", err
		}
	}
	return r.RecordAfter(ctx, sessionID, turn, tree, parent)
}

// RecordAfter is Record with the commit's parent given: the session's
// latest checkpoint before turn, as the caller, which recorded it, knows;
// "" for none. It saves looking it up.
func (r *Repo) RecordAfter(ctx context.Context, sessionID string, turn int, tree, parent string) (string, error) {
	if err := checkSessionID(sessionID); err != nil {
		return "", err
	}
	ref, err := turnRef(sessionID, turn)
	if err != nil {
		return "", fmt.Errorf("checkpoints: record: %w", err)
	}
	if !isObjectID(tree) {
		return "", fmt.Errorf("checkpoints: record %s: %q is not a tree id", ref, tree)
	}
	if parent != "" && !isObjectID(parent) {
		return "", fmt.Errorf("checkpoints: record %s: %q is not a commit id", ref, parent)
	}
	return r.commit(ctx, ref, sessionID, fmt.Sprintf("turn %d", turn), tree, parent)
}

// RecordStart records tree, written by Snapshot as a turn was about to
// start, as the checkpoint the given turn starts from, under
// refs/agents/<session>/checkpoints/start/<turn>, and returns the commit's
// id. Its parent is parent, the session's latest checkpoint before the
// turn, or, when "", the one it has. The turn's own checkpoint, recorded
// later, then has it as its parent (Record looks it up; RecordAfter is
// given it), so that the turn's commit against its parent is what changed
// during the turn, whatever changed in the folder before it (Own).
//
// A caller need record one only when the folder changed since the
// session's latest checkpoint: a turn without one starts from that
// checkpoint. A start whose turn never got a checkpoint (it was
// cancelled) is the start of the next turn that does, and Record takes it
// as such.
func (r *Repo) RecordStart(ctx context.Context, sessionID string, turn int, tree, parent string) (string, error) {
	if err := checkSessionID(sessionID); err != nil {
		return "", err
	}
	ref, err := startRef(sessionID, turn)
	if err != nil {
		return "", fmt.Errorf("checkpoints: record start: %w", err)
	}
	if !isObjectID(tree) {
		return "", fmt.Errorf("checkpoints: record %s: %q is not a tree id", ref, tree)
	}
	if parent == "" {
		if parent, err = r.latestBefore(ctx, sessionID, turn, false); err != nil {
			return "", err
		}
	} else if !isObjectID(parent) {
		return "", fmt.Errorf("checkpoints: record %s: %q is not a commit id", ref, parent)
	}
	return r.commit(ctx, ref, sessionID, fmt.Sprintf("start of turn %d", turn), tree, parent)
}

// commit writes the checkpoint commit of tree and points ref at it; what
// names the checkpoint in its message.
func (r *Repo) commit(ctx context.Context, ref, sessionID, what, tree, parent string) (string, error) {
	args := []string{
		"commit-tree",
		// commit-tree honours commit.gpgSign; a checkpoint must never
		// wait on a passphrase prompt or fail for want of a key.
		"--no-gpg-sign",
		"-m", fmt.Sprintf("ahpd checkpoint: %s\n\nSession: %s\n", what, strconv.Quote(sessionID)),
	}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	args = append(args, tree)
	date := fmt.Sprintf("@%d +0000", time.Now().Unix())
	out, err := gitCmd{
		dir:   r.root,
		yield: r.yielding,
		env: []string{
			"GIT_AUTHOR_NAME=" + authorName,
			"GIT_AUTHOR_EMAIL=" + authorEmail,
			"GIT_AUTHOR_DATE=" + date,
			"GIT_COMMITTER_NAME=" + authorName,
			"GIT_COMMITTER_EMAIL=" + authorEmail,
			"GIT_COMMITTER_DATE=" + date,
		},
		args: args,
	}.run(ctx)
	if err != nil {
		return "", fmt.Errorf("checkpoints: capture %s: %w", ref, err)
	}
	commit := strings.TrimSpace(string(out))
	if !isObjectID(commit) {
		return "", fmt.Errorf("checkpoints: capture %s: unexpected output from git commit-tree: %q", ref, out)
	}

	// --no-deref: if something made our ref a symbolic ref, replace it
	// rather than write through it to a ref outside the session.
	if _, err := r.git(ctx, "update-ref", "--no-deref", "-m", "ahpd checkpoint", ref, commit); err != nil {
		return "", fmt.Errorf("checkpoints: capture %s: %w", ref, err)
	}
	return commit, nil
}

// parent returns the commit turn's checkpoint follows: the start
// checkpoint of turn when there is one, else the session's latest
// checkpoint before turn, or "" if there is none.
func (r *Repo) parent(ctx context.Context, sessionID string, turn int) (string, error) {
	return r.latestBefore(ctx, sessionID, turn, true)
}

// latestBefore returns the session's latest checkpoint before turn, or
// with start the start checkpoint of turn when there is one; "" if there
// is none. One git process reads both kinds.
func (r *Repo) latestBefore(ctx context.Context, sessionID string, turn int, start bool) (string, error) {
	if err := checkSessionID(sessionID); err != nil {
		return "", err
	}
	prefix := RefPrefix(sessionID)
	if err := checkRefName(prefix + "turn/0"); err != nil {
		return "", fmt.Errorf("checkpoints: list: %w", err)
	}
	out, err := r.git(ctx, "for-each-ref", "--format=%(objectname) %(refname)", prefix)
	if err != nil {
		return "", fmt.Errorf("checkpoints: list %s: %w", prefix, err)
	}
	latest, latestTurn := "", -1
	for line := range strings.Lines(string(out)) {
		commit, ref, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if !ok {
			continue
		}
		if n, ok := parseTurn(ref, startsPrefix(sessionID)); ok && start && n == turn {
			return commit, nil
		}
		if n, ok := parseTurn(ref, turnsPrefix(sessionID)); ok && n < turn && n > latestTurn {
			latest, latestTurn = commit, n
		}
	}
	return latest, nil
}

// Checkpoints returns a session's checkpoints sorted by turn. A session
// without any has none, and that is not an error.
func (r *Repo) Checkpoints(ctx context.Context, sessionID string) ([]Checkpoint, error) {
	if err := checkSessionID(sessionID); err != nil {
		return nil, err
	}
	prefix := turnsPrefix(sessionID)
	if err := checkRefName(prefix + "0"); err != nil {
		return nil, fmt.Errorf("checkpoints: list: %w", err)
	}
	out, err := r.git(ctx, "for-each-ref", "--format=%(objectname) %(refname)", prefix)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: list %s: %w", prefix, err)
	}
	var cps []Checkpoint
	for line := range strings.Lines(string(out)) {
		commit, ref, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if !ok {
			continue
		}
		// Refs this package did not write (turn/x, turn/1/y) are not
		// checkpoints; leave them out rather than fail.
		if turn, ok := parseTurn(ref, prefix); ok {
			cps = append(cps, Checkpoint{Turn: turn, Ref: ref, Commit: commit})
		}
	}
	slices.SortFunc(cps, func(a, b Checkpoint) int { return a.Turn - b.Turn })
	return cps, nil
}

// Delete removes every ref under refs/agents/<session>/, checkpoints and
// anything else kept there, and nothing outside it. The commits stay in the
// object database until git gc finds them unreachable. Deleting a session
// that has no refs does nothing.
func (r *Repo) Delete(ctx context.Context, sessionID string) error {
	if err := checkSessionID(sessionID); err != nil {
		return err
	}
	root := sessionRoot(sessionID)
	if err := checkRefName(strings.TrimSuffix(root, "/")); err != nil {
		return fmt.Errorf("checkpoints: delete: %w", err)
	}
	out, err := r.git(ctx, "for-each-ref", "--format=%(refname)", root)
	if err != nil {
		return fmt.Errorf("checkpoints: delete %s: %w", root, err)
	}
	var batch strings.Builder
	for line := range strings.Lines(string(out)) {
		ref := strings.TrimSuffix(line, "\n")
		// for-each-ref already matched the prefix; checking again costs
		// nothing and keeps a surprise in its pattern matching from
		// reaching another session's refs.
		if strings.HasPrefix(ref, root) {
			fmt.Fprintf(&batch, "delete %s\n", ref)
		}
	}
	if batch.Len() == 0 {
		return nil
	}
	// One transaction: either every ref goes or none does.
	cmd := gitCmd{
		dir:   r.root,
		stdin: strings.NewReader(batch.String()),
		args:  []string{"update-ref", "--no-deref", "--stdin"},
	}
	if _, err := cmd.run(ctx); err != nil {
		return fmt.Errorf("checkpoints: delete %s: %w", root, err)
	}
	return nil
}
