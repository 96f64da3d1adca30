package host

import (
	"path/filepath"
	"time"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/host/listing"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// The catalogue and what listings show of it are package listing's
// (listing.External); here is what it is given of the host, and opening
// an external session a client names into the registry.

// Transcripts says whose transcripts the catalogue lists. The zero value
// lists none.
type Transcripts struct {
	// Listers are the backends that list their transcripts, usually
	// Options.Backends.TranscriptListers(); their roots are read once,
	// when the host starts.
	Listers []plugins.TranscriptLister
	// Index is the file the catalogue keeps what it read in between
	// starts, so a start reads only what changed; "" keeps none.
	Index string
}

// rootConfigFile keeps the root config across restarts.
const rootConfigFile = "root-config.json"

// newExternal makes the host's external view, its catalogue not started.
func (h *Host) newExternal() *listing.External {
	modeFile := ""
	if h.opts.StateDir != "" && h.opts.Sessions != "memory" {
		modeFile = filepath.Join(h.opts.StateDir, rootConfigFile)
	}
	return listing.NewExternal(listing.Config{
		ModeFile: modeFile,
		Log:      h.log,
		Now:      h.now,
		Sink:     h.outboxes(),
		Notify: func(method string, params any) {
			h.bus.Notify(protocol.RootURI, method, params, nil)
		},
		HeldOpen: h.heldOpen,
		OwnTimes: h.ownTimes,
		StoreFailed: func(err error) {
			h.storeErrors.Add(1)
			h.log.Error("cannot store the root config", "err", err)
		},
	})
}

// openCatalogue starts reading the transcripts, when there are any to
// read, and offers the mode in the root config.
func (h *Host) openCatalogue() {
	var roots []plugins.TranscriptRoot
	for _, l := range h.opts.Transcripts.Listers {
		roots = append(roots, l.TranscriptRoots()...)
	}
	if len(roots) == 0 {
		return
	}
	mode := h.ext.Start(roots, h.opts.Transcripts.Index)
	h.root.Config = listing.RootConfig(mode, h.root.Config.Values)
	declareHostRules(&h.root.Config.Schema.Properties)
}

// modeChanged applies the root config's showExternalSessions.
func (h *Host) modeChanged() {
	if !h.ext.Has() {
		return // a host with no catalogue shows no external sessions
	}
	h.rootMu.Lock()
	m, _ := catalogue.ParseMode(session.StringValue(h.root.Config.Values[catalogue.ConfigKey]))
	h.unlockRoot()
	h.ext.SetMode(m)
}

// heldOpen reports whether an external session is held by the host, whose
// own summary then speaks for it.
func (h *Host) heldOpen(k catalogue.Key) bool {
	s := h.byID(k.ID)
	return s != nil && s.Provider() == k.Provider
}

// ownTimes returns when each of the host's own sessions was last
// modified. It reads the sessions holding no other lock.
func (h *Host) ownTimes() []time.Time {
	var own []time.Time
	for _, s := range h.sessionList() {
		if t, ok := s.OwnModifiedAt(); ok {
			own = append(own, t)
		}
	}
	return own
}

// listPage is a page of the listing q asks for.
func (h *Host) listPage(q listing.Query) listing.Result {
	var v *listing.View
	if !q.Mine {
		v = h.ext.View()
	}
	return listing.Page(h.order, v, q)
}

// openExternal holds an external session a client asked for, so it can be
// watched and continued (listing.External.Opening).
func (h *Host) openExternal(su protocol.SessionURI) *session.Session {
	rec, ok := h.ext.Opening(su, h.opts.DefaultDirectory)
	if !ok {
		return nil
	}
	s, err := h.restore(rec, nil)
	if err != nil {
		h.log.Warn("cannot open an external session", "session", rec.URI, "err", err)
		return nil
	}
	h.mu.Lock()
	if other := h.sessions[su.ID]; other != nil {
		h.mu.Unlock()
		return other // opened by another client meanwhile
	}
	if h.closing {
		h.mu.Unlock()
		return nil
	}
	h.sessions[su.ID] = s
	h.mu.Unlock()
	h.order.Add(s)
	s.Persist()
	h.log.Info("opened an external session", "session", rec.URI, "dir", rec.Folder)
	return s
}
