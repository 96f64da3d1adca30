// Package listing owns what listSessions shows: the host's own sessions
// in listing order (Order), the catalogue's external rows a listing shows
// and the showExternalSessions mode that picks them (External), the merge
// of both into pages (Page), in the listing's own order or sorted and
// grouped (Sorting), and the signed cursors pages end at (Cursors).
//
// It knows a session only as an Item: its URI, and its newest row
// (session.ListRow), which the session makes anew whenever what it lists
// changes and which nobody modifies. It never holds a session's lock: a
// page reads an immutable Snapshot of the order, rows and all, made at
// most once per run of changes and shared by every page until the next,
// and the sorted orders are made once per snapshot. What a change of the
// external view must tell clients is queued under the view's lock and
// handed to the host's hooks (Config.Notify, through Config.Sink) once
// that lock is let go.
//
// It must not publish to clients, reach the registry or a session but
// through those hooks and Items, or write anything but the mode's file.
package listing
