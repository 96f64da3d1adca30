// Package checkpoints records a session's working tree as git commits, one
// per turn, and computes the change counts clients show next to a session.
//
// A checkpoint is an ordinary commit kept under
// refs/agents/<session>/checkpoints/turn/<N>: turn 0 is the tree the session
// started from and turn N the tree as it stood when turn N ended. Capturing
// one never touches what belongs to the user: the index, HEAD, branches, the
// stash and the files on disk are left exactly as they were. The package
// writes through a throwaway index file (GIT_INDEX_FILE) seeded from a copy
// of the real one, so files that have not changed since the user's last git
// command are not hashed again.
//
// A turn of a session working in a folder others share may also have a
// start checkpoint, refs/agents/<session>/checkpoints/start/<N>: the tree
// as the turn started, recorded when the folder changed since the
// session's checkpoint before (RecordStart). Turn N's checkpoint is its
// child, so every turn's commit against its parent is what changed during
// that turn.
//
// Two counts are derived from these trees. Session Changes combines what
// changed during each of a session's turns, file by file (own.go), so
// neither a commit the user makes nor what other sessions in the same
// folder change between its turns reaches it. Branch Changes, for a
// session that has a worktree of its own, compares the point its branch
// was cut from with the worktree as it is on disk, committed or not.
//
// Everything goes through the git CLI rather than an in-process
// implementation, so clean and smudge filters, Git LFS, sparse checkouts and
// repository extensions behave as they do for the user. Session ids become
// ref name components only after they have been sanitized (see RefPrefix), and
// no caller-supplied string reaches git where it could be read as an option.
//
// Capture is Snapshot, which writes the tree into the object database and
// is all that must happen before the files move on, then Record, which
// commits it and points the turn's ref at it. A caller that must not keep
// the next turn waiting can call the two apart: the next turn waits for
// the snapshot only. Snapshot is itself two steps, Stage (git add into a
// scratch index: the files are written down, one process) and
// Staged.Tree (write-tree); Staged.Diff counts against an older tree
// from the staged index, without the tree.
//
// The package's git processes run a few at a time host-wide (slots.go:
// DefaultProcesses, GOMAXPROCS and no fewer than two), the work somebody
// waits for first; a caller running several in a row takes one slot for
// all of them (Acquire, TryAcquire). Pushes and fetches take none.
//
// Push, PushRemoval and Fetch share a session's checkpoint refs through a
// remote of the repository, under the same names, so that another machine
// working in a clone can read them (remote.go). The remote is checked
// (CheckRemote) and always follows "--".
//
// A Repo is safe for concurrent use: two sessions may capture in the same
// repository at once. Captures of one session must be made one at a time
// by the caller, which knows the order its turns end in.
package checkpoints
