// Package session is one session of a host: its state and its chats, the
// record the store keeps of it, and everything that changes them —
// creating and restoring it, dispatching its clients' actions, its turns
// and their ends, titles, marks, metadata, edits and change counts, the
// views of its chats, its worktree and checkpoints (its git work, one job
// at a time), its snapshots and restart points in the journal, its
// residency (pins, sleep, wake), and moving chats in and out.
//
// A session's lock is its own: no code outside the package can take it,
// and within it only *Session's methods do (and the outbox's hand-on,
// which lets it go and takes it again; the lockcheck build checks it).
// A change made under the lock queues what it means for the rest of the
// host in the session's outbox (package outbox), which is handed on,
// holding no lock, as the lock is let go.
//
// The host makes sessions with [New] and [Restore] and reaches them only
// through their methods; a session reaches its host only through [Env]:
// the settings and parts all sessions share, and the small interfaces of
// [Host] (journal, records, catalogue, git, notices, policy) that the
// host implements.
//
// It must not know the host's other sessions, its connections beyond the
// one a request came on, the cluster's leases, or the method table: what
// it asks of those, it asks through Env.
package session
