package listing

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/internal/atomicfile"
	"github.com/ahpd/ahpd/protocol"
)

// View is the external rows a listing shows, ready to merge: their
// listing keys, and the set of their URIs. It is shared by every listing
// until the catalogue, the mode or the host's own sessions change, or the
// windows have moved on; nobody modifies it. The zero View shows nothing.
type View struct {
	at    time.Time
	keys  []entry // in listing order
	byURI map[string]bool
}

// viewTTL bounds how long a view stands with nothing changed: the windows
// of the modes move with the clock.
const viewTTL = time.Minute

// View returns the view of the external rows a listing shows now.
func (x *External) View() *View {
	if x.cat == nil {
		return noView
	}
	x.noteCutoff()
	x.mu.Lock()
	defer x.unlock()
	stale := x.ownChanged.Swap(false)
	if v := x.view; v != nil && !stale && x.cfg.Now().Sub(v.at) < viewTTL {
		return v
	}
	rows := x.visibleLocked()
	v := &View{at: x.cfg.Now(), keys: make([]entry, len(rows)), byURI: make(map[string]bool, len(rows))}
	for i := range rows {
		uri := rows[i].URI()
		v.keys[i] = entry{Key: Key{ModifiedAt: protocol.FormatTime(rows[i].ModifiedAt), Resource: uri},
			row: session.NewListRow(summary(&rows[i])), ext: true}
		v.byURI[uri] = true
	}
	// The catalogue's order is nearly the listing's, but it compares times
	// finer than the listing's keys show them and providers before ids:
	// merging needs the listing's own.
	byListing := func(a, b entry) int { return a.Compare(b.Key) }
	if !slices.IsSortedFunc(v.keys, byListing) {
		slices.SortFunc(v.keys, byListing)
	}
	x.view = v
	return v
}

// summary is an external row as a client lists it.
func summary(r *catalogue.Row) protocol.SessionSummary {
	sum := r.Summary()
	sum.Meta = protocol.Object{session.ExternalMeta: jsontext.Value("true")}
	// Opened, it is a session of one chat, its default: the row says so.
	chat := protocol.DefaultChatURI(sum.Resource)
	sum.DefaultChat = &chat
	sum.Chats = []protocol.SessionChatSummary{{Resource: chat, Title: sum.Title,
		Origin: &protocol.ChatOriginUser{}, Status: new(sum.Status)}}
	return sum
}

// Opening returns the record an external session a client names is held
// from, to be watched and continued: read from its transcript and resumed
// by its backend from its own folder (dir when that is gone). It stays
// external until adopted. False: the catalogue has no such row, or it is
// the host's own.
func (x *External) Opening(su protocol.SessionURI, dir string) (*session.Record, bool) {
	provider := su.Provider()
	if provider == "" {
		return nil, false
	}
	row, ok := x.Lookup(provider, su.ID)
	if !ok || x.IsOwn(row.Key()) {
		return nil, false
	}
	if row.Cwd != "" && row.CwdExists {
		dir = row.Cwd
	}
	created, modified := protocol.FormatTime(row.CreatedAt), protocol.FormatTime(row.ModifiedAt)
	uri := su.String()
	return &session.Record{
		AHPD: session.RecordVersion, URI: uri, Provider: provider, Title: row.DisplayTitle(),
		CreatedAt: created, ModifiedAt: modified, WorkingDirectories: []string{dir},
		Lifecycle: string(protocol.SessionLifecycleReady), DefaultChat: protocol.DefaultChatURI(uri),
		Chats: []*session.ChatRecord{{URI: protocol.DefaultChatURI(uri), Title: row.DisplayTitle(), ModifiedAt: modified,
			Conversation: row.ID, Started: true}},
		External: true, Folder: dir,
	}, true
}

// RootConfig is the root config a host with a catalogue offers: the
// catalogue's key, and the values kept so far.
func RootConfig(mode catalogue.Mode, kept protocol.Object) *protocol.RootConfigState {
	props := protocol.NewMap[protocol.ConfigPropertySchema]()
	p := protocol.ConfigPropertySchema{
		Type:        "string",
		Title:       "Show external sessions",
		Description: new("Which sessions found in the agents' own transcripts, that this host never ran, are listed."),
		Default:     session.QuoteJSON(string(catalogue.DefaultMode)),
		EnumLabels:  []string{"None", "The two most recent", "Last 24 hours", "Last 7 days", "Last 30 days"},
	}
	for _, m := range catalogue.Modes() {
		p.Enum = append(p.Enum, session.QuoteJSON(string(m)))
	}
	props.Set(catalogue.ConfigKey, p)
	values := maps.Clone(kept)
	if values == nil {
		values = protocol.Object{}
	}
	values[catalogue.ConfigKey] = session.QuoteJSON(string(mode))
	return &protocol.RootConfigState{Schema: protocol.ConfigSchema{Properties: props}, Values: values}
}

// loadMode reads the showExternalSessions kept in path, the default if
// none.
func loadMode(path string, log *slog.Logger) catalogue.Mode {
	if path == "" {
		return catalogue.DefaultMode
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Warn("cannot read the root config; using the defaults", "err", err)
		}
		return catalogue.DefaultMode
	}
	var values map[string]string
	if err := json.Unmarshal(data, &values); err != nil {
		log.Warn("cannot read the root config; using the defaults", "err", err)
		return catalogue.DefaultMode
	}
	m, _ := catalogue.ParseMode(values[catalogue.ConfigKey])
	return m
}

// saveMode keeps m in path, telling failed of a write that failed.
func saveMode(path string, m catalogue.Mode, failed func(error)) {
	if path == "" {
		return
	}
	data, _ := json.Marshal(map[string]string{catalogue.ConfigKey: string(m)})
	if err := atomicfile.Write(path, data, nil); err != nil {
		failed(err)
	}
}
