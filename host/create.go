package host

import (
	"slices"
	"strings"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// createSpec is a createSession request, checked: everything a new
// session is made of.
type createSpec struct {
	channel      string // as the client named it
	uri          protocol.SessionURI
	provider     string
	backend      plugins.Backend
	dirs         []string
	config       protocol.SessionConfigState
	owner, scope string
	request      string // its digest (requests.go)
}

// readCreate checks a createSession request and settles what the session
// is made of: its provider, its folders (inside the caller's roots), its
// config, and whose it is and what it is charged to, for good.
func (h *Host) readCreate(c *conn.Conn, p *protocol.CreateSessionParams) (*createSpec, error) {
	su, err := protocol.ParseSessionURI(p.Channel)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: channel: %v", err)
	}
	if err := checkSessionID(su.ID); err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: channel: %v", err)
	}
	spec := &createSpec{channel: p.Channel, uri: su, provider: su.Provider(), request: sessionRequest(c.Principal(), *p)}
	if p.Provider != nil {
		spec.provider = *p.Provider
	}
	if spec.provider == "" {
		if spec.provider, err = h.defaultProvider(); err != nil {
			return nil, protocol.Errorf(protocol.CodeProviderNotFound, "%v", err)
		}
	}
	backend, ok := h.opts.Backends.Get(spec.provider)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeProviderNotFound, "no provider %s on this host (it has %s)", protocol.Quote(spec.provider), strings.Join(h.opts.Backends.Providers(), ", "))
	}
	spec.backend = backend
	if spec.dirs, err = h.createDirs(c, p.WorkingDirectories); err != nil {
		return nil, err
	}
	config, ignored := h.resolveConfig(backend, p.Config, c.Principal(), spec.dirs[0])
	if len(ignored) > 0 && strictConfig(p.Meta) {
		if why := strictRefusal(config, p.Config, spec.provider); why != "" {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: %s", why)
		}
	}
	if len(ignored) > 0 {
		h.log.Info("config values left at their defaults", "session", p.Channel, "keys", ignored)
	}
	spec.config = config
	dir := h.directory()
	spec.owner = session.PrincipalString(dir.Owner(c.Principal()))
	// A scope asked for is checked as asked, not replaced by the default.
	var requested string
	if v, ok := p.Config[session.KeyScope]; ok {
		if err := jsonUnmarshal(v, &requested); err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: config.scope: want \"team/project\"")
		}
	} else {
		_ = jsonUnmarshal(config.Values[session.KeyScope], &requested)
	}
	scope, err := dir.Scope(c.Principal(), requested)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: config.scope: %v", err)
	}
	spec.scope = scopeString(scope)
	return spec, nil
}

// createDirs returns a new session's folders: those asked for, each once
// and inside the caller's roots, or the host's default.
func (h *Host) createDirs(c *conn.Conn, uris []protocol.URI) ([]string, error) {
	dirs := []string{h.opts.DefaultDirectory}
	if len(uris) > 0 {
		dirs = dirs[:0]
		for i, uri := range uris {
			dir, err := session.DirOf(uri)
			if err != nil {
				return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createSession: workingDirectories[%d]: %v", i, err)
			}
			if !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
			}
		}
	}
	for _, dir := range dirs {
		if err := h.checkRoots("createSession", c.Principal(), dir); err != nil {
			return nil, err
		}
	}
	return dirs, nil
}

// addSession makes the provisional session of spec and registers it,
// unless one of its id exists or the host is closing. One made by the same
// request is returned with again set: the request was sent again.
func (h *Host) addSession(c *conn.Conn, spec *createSpec) (s *session.Session, again bool, err error) {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil, false, protocol.Errorf(protocol.CodeInternalError, "ahpd is shutting down")
	}
	if old := h.sessions[spec.uri.ID]; old != nil {
		h.mu.Unlock()
		if old.Request() == spec.request {
			return old, true, nil
		}
		return nil, false, protocol.Errorf(protocol.CodeSessionAlreadyExists, "session %s already exists (as %s)", spec.channel, old.URI())
	}
	s = h.newSession(c, session.Spec{URI: spec.uri, Provider: spec.provider, Backend: spec.backend,
		Dirs: spec.dirs, Config: spec.config, Owner: spec.owner, Scope: spec.scope, Request: spec.request})
	own := s.OwnKeysUnshared() // before another can reach s
	h.sessions[spec.uri.ID] = s
	h.mu.Unlock()
	h.ext.NoteOwn(own)
	h.order.Add(s)
	return s, false, nil
}
