package host

import (
	"context"
	"strings"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/worktree"
)

// resolveSessionConfig answers the schema and values a session would have,
// before one exists.
func (h *Host) resolveSessionConfig(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.ResolveSessionConfigParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	backend, err := h.configBackend(p.Provider)
	if err != nil {
		return nil, err
	}
	folder, err := h.configFolder(c, "resolveSessionConfig", p.WorkingDirectory)
	if err != nil {
		return nil, err
	}
	state, _ := h.resolveConfig(backend, p.Config, c.Principal(), folder)
	return &protocol.ResolveSessionConfigResult{Schema: state.Schema, Values: state.Values}, nil
}

// sessionConfigCompletions answers the values of a key whose list is too
// long to send with the schema.
func (h *Host) sessionConfigCompletions(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.SessionConfigCompletionsParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	backend, err := h.configBackend(p.Provider)
	if err != nil {
		return nil, err
	}
	folder, err := h.configFolder(c, "sessionConfigCompletions", p.WorkingDirectory)
	if err != nil {
		return nil, err
	}
	state, _ := h.resolveConfig(backend, p.Config, c.Principal(), folder)
	prop, ok := state.Schema.Properties.Get(p.Property)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for sessionConfigCompletions: property: no config key %s", protocol.Quote(p.Property))
	}
	query := ""
	if p.Query != nil {
		query = *p.Query
	}
	if p.Property == worktree.KeyBranch {
		return &protocol.SessionConfigCompletionsResult{Items: branchCompletions(folder, query)}, nil
	}
	query = strings.ToLower(query)
	items := []protocol.SessionConfigValueItem{}
	for i, v := range prop.Enum {
		var s string
		if err := jsonUnmarshal(v, &s); err != nil {
			continue
		}
		label := s
		if i < len(prop.EnumLabels) {
			label = prop.EnumLabels[i]
		}
		if query != "" && !strings.Contains(strings.ToLower(s), query) && !strings.Contains(strings.ToLower(label), query) {
			continue
		}
		items = append(items, protocol.SessionConfigValueItem{Value: s, Label: label})
	}
	return &protocol.SessionConfigCompletionsResult{Items: items}, nil
}

// configFolder returns the folder a config question is about: the one
// named, else the host's default. A folder outside the roots c is held to
// is refused: answering would read its repository.
func (h *Host) configFolder(c *conn.Conn, method string, uri *protocol.URI) (string, error) {
	if uri == nil {
		return h.opts.DefaultDirectory, nil
	}
	dir, err := session.DirOf(*uri)
	if err != nil {
		return "", protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: workingDirectory: %v", method, err)
	}
	if err := h.checkRoots(method, c.Principal(), dir); err != nil {
		return "", err
	}
	return dir, nil
}

// configBackend returns the backend a config question is about: the named
// provider, else the first one the host has.
func (h *Host) configBackend(provider *string) (plugins.Backend, error) {
	if provider == nil {
		names := h.opts.Backends.Providers()
		if len(names) == 0 {
			return nil, nil
		}
		provider = &names[0]
	}
	b, ok := h.opts.Backends.Get(*provider)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeProviderNotFound, "no provider %s on this host (it has %s)", protocol.Quote(*provider), strings.Join(h.opts.Backends.Providers(), ", "))
	}
	return b, nil
}
