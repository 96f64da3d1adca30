// Package catalogue finds the sessions that backends wrote transcripts
// for on this machine, and keeps what it found fresh.
//
// A Catalogue reads the transcript folders the backends name (Config.Roots,
// each backend's plugins.TranscriptLister), makes one Row per transcript,
// and watches them all with a single fsnotify watcher, so that a
// transcript that grows, appears or goes away is reported as a Change
// within a debounce interval. What a line says is the backend's to read
// (its plugins.TranscriptFormat); scanning, watching, the index, the title
// ranking and visibility are the catalogue's, and it knows no backend by
// name. A periodic light rescan (stat only) backs the watcher up, and
// a watcher queue overflow triggers a rescan at once.
//
// A row needs a transcript's first lines (when it started, where, the
// first prompt) and its last ones (when it was last active, its branch),
// and its title lines in both, never what lies between: a scan reads at
// most 64 KB at each end of a file, however large, the windows the Claude
// Agent SDK's session list reads, and titles rows as it does (info.go).
// An append is read from where the previous read stopped, so its cost is
// the appended bytes. With Config.IndexPath, what was read is kept
// between starts (index.go), and an unchanged file is not read again.
//
// The first scan stats every transcript before it reads one, and reads
// the newest first, by modification time, which no row's last line is
// newer than: once Config.FirstPage rows are read that no file still
// unread can come before, they are published and FirstPage is closed, so
// a listing's first page costs the stats and its own rows' reads; the
// rest is read and published after, and Ready is closed (first.go).
//
// # For the host
//
// Open a Catalogue at start and Close it at shutdown. Listing reads
// Rows, which returns the last published snapshot at once (the first
// page's rows alone, until the first scan ends), sorted by
// Compare (most recently modified first, then provider and id). The
// snapshot is shared and never changed, so a listing may hold it while
// it merges the rows with its live sessions and pages through them; Seek
// finds where a page that ended at a given row resumes, even when that
// row has since gone. Lookup finds one row; when a person opens an
// external session, its turns are its backend's to read (Backend.Turns),
// not the catalogue's.
//
// OnChange receives every published batch of changes (Added, Removed,
// Changed with the fields that moved), from the catalogue's goroutine,
// after Rows shows them. The host decides which of them each client
// hears: the rows of sessions it runs or ran are its own, listed from its
// registry, and the rest are external, shown by the rules of
// showExternalSessions (Visible, ModeChange, DiffShown, OwnCutoff).
// Change.Partial and Row.Summary give the wire shapes; the host adds
// _meta, such as vscode.external, since only it knows which rows it ran.
package catalogue
