package session

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/outbox"
	"github.com/ahpd/ahpd/internal/lockcheck"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// RecordVersion is the format version of the records this host writes.
const RecordVersion = 1

// defaultTitle is a session's title until it is given one.
const defaultTitle = "New Session"

// newSession is a session with nothing of a record yet.
func newSession(env *Env, uri, id, provider string, backend plugins.Backend) *Session {
	now := env.Now()
	return &Session{
		mu: lockcheck.Mutex{Class: "session"}, out: outbox.New(uri),
		h: env, uri: uri, id: id, provider: provider, backend: backend,
		chats: map[string]*ChatEntry{}, busy: map[*chats.Chat]bool{},
		used: now, lastAction: now,
	}
}

// Creator is the client that made a provisional session, and who it
// speaks for.
type Creator struct {
	ClientID  string
	Principal grants.Principal
}

// Spec is what a provisional session is made of.
type Spec struct {
	URI      protocol.SessionURI
	Provider string
	Backend  plugins.Backend // nil: the provider is not available here
	By       Creator
	Dirs     []string // its working directories, the first its folder
	Config   protocol.SessionConfigState
	// Owner and Scope are the record's (grants.Principal and scope
	// strings): who owns it and which part of the roots it may reach.
	Owner, Scope string
	// Request is a digest of the createSession request the session was
	// made by: the same request sent again is answered as taken.
	Request string
}

// New makes a provisional session: there for the client that made it,
// announced to everyone when its first turn reaches the backend.
func New(env *Env, spec Spec) *Session {
	now := protocol.FormatTime(env.Now())
	uri := spec.URI.String()
	s := newSession(env, uri, spec.URI.ID, spec.Provider, spec.Backend)
	s.provisional, s.creatorID, s.creator = true, spec.By.ClientID, spec.By.Principal
	s.awake.Store(true)
	s.setWorkDir(spec.Dirs[0])
	chatURI := protocol.DefaultChatURI(uri)
	s.rec = Record{
		AHPD: RecordVersion, URI: uri, Provider: spec.Provider, Title: defaultTitle,
		CreatedAt: now, ModifiedAt: now, WorkingDirectories: spec.Dirs, Config: spec.Config.Values, Folder: spec.Dirs[0],
		Lifecycle: string(protocol.SessionLifecycleCreating), DefaultChat: chatURI, Request: spec.Request,
		Chats: []*ChatRecord{{URI: chatURI, Title: defaultTitle, ModifiedAt: now, Conversation: spec.URI.ID}},
		Owner: spec.Owner, Scope: spec.Scope,
	}
	s.build(spec.Config, nil)
	s.firstRowLocked()
	s.h.Sink.Go(s.warmRepo) // waited for by the host's Close: it runs git
	return s
}

// Restore makes a session of a stored record and, when there is one, of
// its journal's tail (rc). config gives the session's config from its
// record, as the host resolves it. It comes back asleep: its agents start
// again on its next turn.
func Restore(env *Env, id string, rec *Record, rc *Recovered, backend plugins.Backend, config func(*Record) protocol.SessionConfigState) *Session {
	s := newSession(env, rec.URI, id, rec.Provider, backend)
	s.rec, s.announced, s.stored, s.asleep = *rec, true, true, true
	s.setWorkDir(rec.WorkingDirectories[0])
	if rec.Checkpoints > 0 && !rec.Untracked {
		// What it wrote before the restart may lie between another
		// session's checkpoints in its tree: it is there (repos.go).
		env.Repos.join(s, s.WorkDir())
	}
	if rc != nil {
		rc.into(&s.rec)
	}
	s.build(config(&s.rec), rc)
	for _, e := range s.chats {
		if e.loaded {
			s.setAwakeLocked(true) // it holds turns: it falls asleep as any session does
		}
	}
	if rec.External {
		s.announced = false
		s.state.Meta = protocol.Object{ExternalMeta: jsontext.Value("true")}
		s.setSummaryLocked(s.computeSummaryLocked())
	}
	if rec.CreationError != "" {
		s.state.CreationError = &protocol.ErrorInfo{ErrorType: "backendStartFailed", Message: rec.CreationError}
	}
	s.firstRowLocked()
	return s
}
