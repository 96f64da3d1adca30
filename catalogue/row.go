package catalogue

import (
	"cmp"
	"net/url"
	"path/filepath"
	"sort"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// Key names a row: the provider and the backend's conversation id, which
// is the session id of an external session.
type Key struct {
	Provider string
	ID       string
}

// URI returns the row's session resource, "<provider>:/<id>".
func (k Key) URI() string { return protocol.ProviderSessionURI(k.Provider, k.ID).String() }

// String returns the same text as URI.
func (k Key) String() string { return k.URI() }

// Row is one transcript found on disk. Rows are values: a Row handed out
// by the catalogue is never changed afterwards, so it may be shared
// between goroutines without copying.
type Row struct {
	Provider string
	ID       string
	// Title is the title the transcript records: a custom title (a
	// person renamed the session) before an AI title, each the newest
	// one in the file's last 64 KB before the newest in its first 64 KB,
	// as the Claude Agent SDK's session list ranks them; "" when it
	// records none.
	Title string
	// LastPrompt is the newest last-prompt line in the last 64 KB, and
	// SummaryLine the newest summary line there (older CLIs wrote one):
	// the titles of a session that has no Title, in that order.
	LastPrompt  string
	SummaryLine string
	// FirstPrompt is the first thing a person asked, with white space
	// collapsed and cut to a few hundred bytes: the last fallback title.
	// A transcript with no prompt but a slash command gives the command.
	FirstPrompt string
	// Cwd is the directory the conversation ran in, "" when the
	// transcript does not say (some backends' never do).
	Cwd string
	// CwdExists reports whether Cwd named a directory when the row was
	// last checked (at every light rescan).
	CwdExists bool
	// Branch is the git branch of the latest line that names one; the CLI
	// writes "HEAD" outside a repository.
	Branch     string
	CreatedAt  time.Time
	ModifiedAt time.Time

	// Path is the transcript file.
	Path string
	// Size is the file's size when it was last read, and Offset how far
	// its complete lines have been parsed: a later append is read from
	// Offset on.
	Size   int64
	Offset int64
}

// Key returns the row's key.
func (r *Row) Key() Key { return Key{Provider: r.Provider, ID: r.ID} }

// URI returns the row's session resource, "<provider>:/<id>".
func (r *Row) URI() string { return r.Key().URI() }

// DisplayTitle is the title a client shows, chosen as the Claude Agent
// SDK's session list chooses it: the recorded title, else the last
// prompt, else the summary line, else the first prompt, else a
// placeholder naming the provider.
func (r *Row) DisplayTitle() string {
	if t := firstOf(r.Title, r.LastPrompt, r.SummaryLine, r.FirstPrompt); t != "" {
		return t
	}
	return "Untitled " + r.Provider + " session"
}

// Summary returns the row as the catalogue entry clients list. It is idle
// (nothing runs it here) and carries no _meta: the host adds its own
// (vscode.external and the like), since only it knows which rows it ran.
func (r *Row) Summary() protocol.SessionSummary {
	s := protocol.SessionSummary{
		Resource:   r.URI(),
		Provider:   r.Provider,
		Title:      r.DisplayTitle(),
		Status:     protocol.StatusIdle,
		CreatedAt:  protocol.FormatTime(r.CreatedAt),
		ModifiedAt: protocol.FormatTime(r.ModifiedAt),
	}
	if r.Cwd != "" {
		s.WorkingDirectories = []protocol.URI{fileURI(r.Cwd)}
	}
	return s
}

// Compare orders rows as Rows returns them: most recently modified
// first, ties broken by provider and id so the order is total and a
// paging cursor is stable.
func Compare(a, b *Row) int {
	if c := b.ModifiedAt.Compare(a.ModifiedAt); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Provider, b.Provider); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// Field is a set of the summary fields a Change touched.
type Field uint8

// The fields a Changed change can name.
const (
	FieldTitle Field = 1 << iota // DisplayTitle: Title or FirstPrompt
	FieldModifiedAt
	FieldCreatedAt
	FieldCwd // Cwd or CwdExists
	FieldBranch
)

// diffFields returns the fields in which a and b differ as a client
// would see them. Size and offset bookkeeping is not a field: a write
// that moves only those is published in the snapshot but not reported.
func diffFields(a, b *Row) Field {
	var f Field
	if a.DisplayTitle() != b.DisplayTitle() {
		f |= FieldTitle
	}
	if !a.ModifiedAt.Equal(b.ModifiedAt) {
		f |= FieldModifiedAt
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		f |= FieldCreatedAt
	}
	if a.Cwd != b.Cwd || a.CwdExists != b.CwdExists {
		f |= FieldCwd
	}
	if a.Branch != b.Branch {
		f |= FieldBranch
	}
	return f
}

// ChangeKind says what happened to a row.
type ChangeKind uint8

// The kinds of change.
const (
	Added ChangeKind = iota + 1
	Removed
	Changed
)

func (k ChangeKind) String() string {
	switch k {
	case Added:
		return "added"
	case Removed:
		return "removed"
	case Changed:
		return "changed"
	}
	return "unknown"
}

// Change is one row's difference between two published snapshots.
type Change struct {
	Kind ChangeKind
	// Row is the row as it now is; for Removed, as it last was.
	Row Row
	// Fields names what changed, for Changed only.
	Fields Field
}

// Partial returns the changed fields as the body of a
// root/sessionSummaryChanged notification.
func (c Change) Partial() protocol.PartialSessionSummary {
	var p protocol.PartialSessionSummary
	s := c.Row.Summary()
	if c.Fields&FieldTitle != 0 {
		p.Title = &s.Title
	}
	if c.Fields&FieldModifiedAt != 0 {
		p.ModifiedAt = &s.ModifiedAt
	}
	if c.Fields&FieldCreatedAt != 0 {
		p.CreatedAt = &s.CreatedAt
	}
	if c.Fields&FieldCwd != 0 && c.Row.Cwd != "" {
		p.WorkingDirectories = s.WorkingDirectories
	}
	return p
}

// fileURI turns an absolute path into a file URI.
func fileURI(path string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
}

// Seek returns the index in rows, sorted by Compare, of the first row
// that sorts after after: where a page that ended at after resumes. The
// row need not still be in rows.
func Seek(rows []Row, after *Row) int {
	return sort.Search(len(rows), func(i int) bool { return Compare(&rows[i], after) > 0 })
}
