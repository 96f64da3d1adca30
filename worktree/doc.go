// Package worktree makes, finds and removes the git worktrees that sessions
// with worktree isolation work in, and answers the in-process git reads the
// host needs about a folder: whether it is a repository, its branches (for
// completions), the branch checked out and the default branch.
//
// The split between the two halves is deliberate. Everything that changes a
// repository goes through the git CLI (go-git v5 cannot make linked worktrees,
// and the CLI honours hooks, filters, LFS and sparse checkouts); a Manager
// serializes those commands per repository so two sessions cutting trees at
// once do not trip over git's lock files. Everything read on a hot path
// (completion while someone types) goes through go-git, so it costs no process.
//
// A tree lives at <repo>.worktrees/<name> beside its repository, or at
// <root>/<repo-name>/<name> when the Manager has a worktrees root. After git
// has made it, the git-ignored folders named by Spec.SymlinkFolders are linked
// into it and then the git-ignored files named by Spec.IncludeFiles are copied
// into it; both are best effort, pattern by pattern.
//
// A tree is claimed, with a file beside its folder, from before git makes
// anything until the caller has recorded it (Settle); a crash in between
// leaves the claim, and a sweep (Sweep, and every Create) takes away what
// it names unless the caller's records hold the tree. pending.go tells
// how.
//
// No string from a user reaches git where it could be read as an option:
// paths follow "--", and branch names are refused when they start with '-'
// and are checked with "git check-ref-format --branch" before use.
package worktree
